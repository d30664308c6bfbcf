//! The names of the input kinds: one typed table, so that a phase, an effect and an input
//! agree on "which answer" by comparing values, never strings.

use std::fmt;

/// Which kind of input: the tag of [`InputKind`](super::InputKind) without its payload.
///
/// [`Phase::awaits`](crate::machine) names the input a phase waits for,
/// [`Effect::answered_by`](crate::Effect::answered_by) the input that answers an effect, and
/// [`InputKind::kind`](super::InputKind::kind) the input given; the machine accepts an input
/// when the first and the last are equal. [`InputName::as_str`] is the name traces carry
/// (the `type` of a serialised input), so its strings are a public format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InputName {
    /// `observed`: the release as read; starts an attempt.
    Observed,
    /// `finalizerAdded`: answers `AddFinalizer`.
    FinalizerAdded,
    /// `finalizerRemoved`: answers `RemoveFinalizer`.
    FinalizerRemoved,
    /// `dependenciesChecked`: answers `CheckDependencies`.
    DependenciesChecked,
    /// `dependentsListed`: answers `ListDependents`.
    DependentsListed,
    /// `sourceResolved`: answers `ResolveSource`.
    SourceResolved,
    /// `artifactFetched`: answers `FetchArtifact`.
    ArtifactFetched,
    /// `rendered`: answers `Render`.
    Rendered,
    /// `serviceAccountChecked`: answers `CheckServiceAccount`.
    ServiceAccountChecked,
    /// `driftChecked`: answers `CheckDrift`.
    DriftChecked,
    /// `applied`: answers `Apply`.
    Applied,
    /// `ownersInspected`: answers `InspectOwners`.
    OwnersInspected,
    /// `staleInspected`: answers `InspectStale`.
    StaleInspected,
    /// `pruned`: answers `Prune`.
    Pruned,
    /// `statusPatched`: answers `PatchStatus`.
    StatusPatched,
    /// `healthRead`: answers `AssessHealth`.
    HealthRead,
    /// `valuesRead`: answers `ReadValues`.
    ValuesRead,
    /// `terminationAwaited`: answers `AwaitTermination`.
    TerminationAwaited,
    /// `kubeConfigRead`: answers `ReadKubeConfig`.
    KubeConfigRead,
}

impl InputName {
    /// The name as it appears in traces (`observed`, `rendered`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            InputName::Observed => "observed",
            InputName::FinalizerAdded => "finalizerAdded",
            InputName::FinalizerRemoved => "finalizerRemoved",
            InputName::DependenciesChecked => "dependenciesChecked",
            InputName::DependentsListed => "dependentsListed",
            InputName::SourceResolved => "sourceResolved",
            InputName::ArtifactFetched => "artifactFetched",
            InputName::Rendered => "rendered",
            InputName::ServiceAccountChecked => "serviceAccountChecked",
            InputName::DriftChecked => "driftChecked",
            InputName::Applied => "applied",
            InputName::OwnersInspected => "ownersInspected",
            InputName::StaleInspected => "staleInspected",
            InputName::Pruned => "pruned",
            InputName::StatusPatched => "statusPatched",
            InputName::HealthRead => "healthRead",
            InputName::ValuesRead => "valuesRead",
            InputName::TerminationAwaited => "terminationAwaited",
            InputName::KubeConfigRead => "kubeConfigRead",
        }
    }
}

impl fmt::Display for InputName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::InputName;
    use crate::input::*;
    use crate::object::{Kind, ReleaseKey};

    /// One input of every kind, with the smallest payload each takes.
    fn every_kind() -> Vec<InputKind> {
        let api = || ApiError::Forbidden {
            message: "no".into(),
        };
        vec![
            InputKind::Observed {
                key: ReleaseKey {
                    kind: Kind::Release,
                    namespace: "n".into(),
                    name: "r".into(),
                },
                object: None,
            },
            InputKind::FinalizerAdded { result: Ok(()) },
            InputKind::FinalizerRemoved { result: Ok(()) },
            InputKind::DependenciesChecked { result: Err(api()) },
            InputKind::DependentsListed { result: Err(api()) },
            InputKind::SourceResolved {
                result: Err(SourceError::NotFound),
            },
            InputKind::ArtifactFetched {
                result: Err(FetchError::Io {
                    message: "x".into(),
                }),
            },
            InputKind::Rendered {
                result: Err(RenderError::Resolution {
                    message: "x".into(),
                }),
            },
            InputKind::ServiceAccountChecked { result: Ok(true) },
            InputKind::DriftChecked {
                report: DriftReport::default(),
            },
            InputKind::Applied {
                report: ApplyReport::default(),
            },
            InputKind::OwnersInspected { objects: vec![] },
            InputKind::StaleInspected { objects: vec![] },
            InputKind::Pruned { results: vec![] },
            InputKind::StatusPatched { result: Ok(()) },
            InputKind::HealthRead { objects: vec![] },
            InputKind::ValuesRead {
                values: vec![],
                credentials: None,
            },
            InputKind::TerminationAwaited {
                remaining: vec![],
                error: None,
            },
            InputKind::KubeConfigRead {
                result: Err(KubeConfigError::SecretNotFound),
            },
        ]
    }

    /// The trace name is the serialised input's `type`, for every kind, and no two kinds
    /// share a name.
    #[test]
    fn names_are_the_trace_tags() {
        let all = every_kind();
        let mut seen = std::collections::BTreeSet::new();
        for input in &all {
            let json = serde_json::to_value(input).unwrap();
            assert_eq!(json["type"], input.kind().as_str(), "{input:?}");
            assert_eq!(input.kind().to_string(), input.kind().as_str());
            assert!(seen.insert(input.kind()), "{input:?}");
        }
        assert_eq!(seen.len(), 19);
        assert_eq!(seen.first(), Some(&InputName::Observed));
    }
}
