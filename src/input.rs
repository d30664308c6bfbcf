//! What the machine is told: the observed release, then one result per awaited effect.
//!
//! Errors are typed so that classification (SPEC §4) is a `match` in the core; the
//! interpreter maps HTTP statuses and tool failures to these variants at its boundary and
//! decides nothing else.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::object::{ReleaseKey, ReleaseObject, ResourceId};

mod failures;
mod name;
mod results;

pub use failures::{ApiError, FetchError, KubeConfigError, RenderError, SourceError};
pub use name::InputName;
pub use results::{
    AppliedObject, ApplyAction, ApplyReport, CredentialsContent, DependencyReport, DriftReport,
    FetchedArtifact, GroupKind, HealthObject, KubeConfigFacts, LiveMeta, LiveObject, ObjectDrift,
    ObjectResult, ReleaseSnapshot, RenderOutput, SourceArtifact, ValuesContent,
};

/// One input: a fact and the time it was observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// When the fact was observed: the core's only clock, so a replay decides the same.
    pub now: Timestamp,
    /// The fact itself: the observed release, or the answer to one awaited effect.
    pub kind: InputKind,
}

impl Input {
    /// Pairs a fact with the time it was observed.
    pub fn new(now: Timestamp, kind: InputKind) -> Self {
        Self { now, kind }
    }

    /// The input that starts an attempt for a release that exists.
    pub fn observed(now: Timestamp, object: ReleaseObject) -> Self {
        Self::new(
            now,
            InputKind::Observed {
                key: object.key(),
                object: Some(Box::new(object)),
            },
        )
    }

    /// The input that starts an attempt for a release that no longer exists.
    pub fn gone(now: Timestamp, key: ReleaseKey) -> Self {
        Self::new(now, InputKind::Observed { key, object: None })
    }
}

/// The fact carried by an input. `Observed` starts an attempt; each other variant answers the
/// awaited effect of the same name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum InputKind {
    /// The release as read from the API server; `None` when it no longer exists.
    Observed {
        /// The release the attempt is for, known even when the object is gone.
        key: ReleaseKey,
        /// The release as read; `None` ends the attempt at once (SPEC §3 step 1).
        object: Option<Box<ReleaseObject>>,
    },
    /// Answer to `AddFinalizer`.
    FinalizerAdded {
        /// Whether the patch landed; an error ends the attempt with a Warning and a backoff.
        result: Result<(), ApiError>,
    },
    /// Answer to `RemoveFinalizer`.
    FinalizerRemoved {
        /// Whether the patch landed; on success the release is left to the API server.
        result: Result<(), ApiError>,
    },
    /// Answer to `CheckDependencies`.
    DependenciesChecked {
        /// The releases found, or why listing them failed (a transient failure).
        result: Result<DependencyReport, ApiError>,
    },
    /// Answer to `ListDependents`.
    DependentsListed {
        /// Every release that has a `dependsOn`, or why listing them failed (transient).
        result: Result<DependencyReport, ApiError>,
    },
    /// Answer to `ResolveSource`.
    SourceResolved {
        /// The artifact the source advertises, or why it cannot be used yet.
        result: Result<SourceArtifact, SourceError>,
    },
    /// Answer to `FetchArtifact`.
    ArtifactFetched {
        /// The verified, unpacked artifact, or why the download or unpacking failed.
        result: Result<FetchedArtifact, FetchError>,
    },
    /// Answer to `Render`.
    Rendered {
        /// The exported value with its scope facts, or `cue`'s classified failure.
        result: Result<RenderOutput, RenderError>,
    },
    /// Answer to `CheckServiceAccount`: whether it exists.
    ServiceAccountChecked {
        /// Whether the ServiceAccount exists; `Ok(false)` is an `ImpersonationFailed` stall.
        result: Result<bool, ApiError>,
    },
    /// Answer to `CheckDrift`.
    DriftChecked {
        /// The drifted objects and the per-object errors of the dry-runs.
        report: DriftReport,
    },
    /// Answer to `Apply`.
    Applied {
        /// What the apply did to each object it reached.
        report: ApplyReport,
    },
    /// Answer to `InspectOwners`: each target's labels, `Ok(None)` when absent.
    OwnersInspected {
        /// One read per target, whose `uuid` label decides whether it may be written.
        objects: Vec<LiveObject>,
    },
    /// Answer to `InspectStale`.
    StaleInspected {
        /// One read per stale target, for the prune guards (SPEC §9).
        objects: Vec<LiveObject>,
    },
    /// Answer to `Prune`.
    Pruned {
        /// One result per deletion; 404 and a failed UID precondition count as done.
        results: Vec<ObjectResult>,
    },
    /// Answer to `PatchStatus`.
    StatusPatched {
        /// Whether the status write landed; an error backs off with the count kept in memory.
        result: Result<(), ApiError>,
    },
    /// Answer to `AwaitTermination`: the objects still there (same UID) when the wait
    /// ended; empty when every one is gone. `error` is set when the watch itself failed.
    TerminationAwaited {
        /// The objects not gone yet, named in the `PruneFailed` message.
        remaining: Vec<ResourceId>,
        /// Why the watch broke off, when it did; the deletion is then retried.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ApiError>,
    },
    /// Answer to `ReadValues`: one result per reference, in order, and the credentials.
    ValuesRead {
        /// Each `valuesFrom` object's content, or why it could not be read, in spec order.
        values: Vec<Result<ValuesContent, ApiError>>,
        /// The `module.secretRef` Secret's credentials, when one was asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<Result<CredentialsContent, ApiError>>,
    },
    /// Answer to `ReadKubeConfig`.
    KubeConfigRead {
        /// What the kubeconfig holds, or why it could not be read.
        result: Result<KubeConfigFacts, KubeConfigError>,
    },
    /// Answer to `AssessHealth`: one entry per target, in order.
    HealthRead {
        /// Each target's live JSON (and pods, when asked for), in request order.
        objects: Vec<HealthObject>,
    },
}

impl InputKind {
    /// Which kind of input this is, the tag without its payload.
    pub fn kind(&self) -> InputName {
        match self {
            InputKind::Observed { .. } => InputName::Observed,
            InputKind::FinalizerAdded { .. } => InputName::FinalizerAdded,
            InputKind::FinalizerRemoved { .. } => InputName::FinalizerRemoved,
            InputKind::DependenciesChecked { .. } => InputName::DependenciesChecked,
            InputKind::DependentsListed { .. } => InputName::DependentsListed,
            InputKind::SourceResolved { .. } => InputName::SourceResolved,
            InputKind::ArtifactFetched { .. } => InputName::ArtifactFetched,
            InputKind::Rendered { .. } => InputName::Rendered,
            InputKind::ServiceAccountChecked { .. } => InputName::ServiceAccountChecked,
            InputKind::DriftChecked { .. } => InputName::DriftChecked,
            InputKind::Applied { .. } => InputName::Applied,
            InputKind::OwnersInspected { .. } => InputName::OwnersInspected,
            InputKind::StaleInspected { .. } => InputName::StaleInspected,
            InputKind::Pruned { .. } => InputName::Pruned,
            InputKind::StatusPatched { .. } => InputName::StatusPatched,
            InputKind::HealthRead { .. } => InputName::HealthRead,
            InputKind::ValuesRead { .. } => InputName::ValuesRead,
            InputKind::TerminationAwaited { .. } => InputName::TerminationAwaited,
            InputKind::KubeConfigRead { .. } => InputName::KubeConfigRead,
        }
    }

    /// The variant name as it appears in traces (`observed`, `rendered`, ...).
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The first `Unreachable` error this answer carries: a remote cluster that did not
    /// answer fails the attempt as `ClusterUnreachable`, whatever the effect (SPEC §31).
    pub fn unreachable(&self) -> Option<&ApiError> {
        fn first<'a>(mut errs: impl Iterator<Item = Option<&'a ApiError>>) -> Option<&'a ApiError> {
            errs.find_map(|e| e.filter(|e| matches!(e, ApiError::Unreachable { .. })))
        }
        match self {
            InputKind::ServiceAccountChecked { result } => {
                first(std::iter::once(result.as_ref().err()))
            }
            InputKind::DriftChecked { report } => {
                first(report.errors.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::Applied { report } => {
                first(report.objects.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::OwnersInspected { objects } | InputKind::StaleInspected { objects } => {
                first(objects.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::Pruned { results } => first(results.iter().map(|o| o.result.as_ref().err())),
            InputKind::HealthRead { objects } => {
                first(objects.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::TerminationAwaited { error, .. } => first(std::iter::once(error.as_ref())),
            _ => None,
        }
    }
}

/// Why an input was refused. A refused input changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The input answers another effect than the one the attempt waits for.
    #[error("input {got} does not answer the awaited effect ({expected})")]
    Unexpected {
        /// The input the attempt waits for.
        expected: InputName,
        /// The input it was given.
        got: InputName,
    },
    /// The attempt has emitted `Done`; it takes no more inputs.
    #[error("the attempt is finished; start a new one with an observed input")]
    Finished,
    /// An attempt was started with something other than the observed release.
    #[error("an attempt must start with an observed input, got {got}")]
    NotObserved {
        /// The input it was started with.
        got: InputName,
    },
}
