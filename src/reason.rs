//! Condition and event reasons (SPEC §3, §4, §9, §12, §13, §20, §26, §28): one enum, so a
//! reason cannot be misspelt and a new one cannot be added without its event action.
//!
//! The serialised names are the public contract: conditions, events, traces and `Done` carry
//! exactly the strings SPEC writes, which are the variant names.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a condition has its status, why an event was emitted, or how an attempt ended.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// An attempt is under way, or waits for health (SPEC §3 step 7, §26).
    Progressing,
    /// `Ready=True` after a full success (SPEC §3 step 18).
    ReconciliationSucceeded,
    /// `spec.suspend` is set (SPEC §13).
    Suspended,
    /// The first attempt after a suspension lifted (SPEC §3 step 5).
    Resumed,
    /// Nothing changed since the last apply (SPEC §7).
    NoOp,
    /// The rendered objects were applied (SPEC §4).
    Applied,
    /// Stale objects were deleted (SPEC §9).
    Pruned,
    /// A Namespace or CRD in the stale set is never deleted (SPEC §9).
    PruneSkipped,
    /// A `dependsOn` entry is not Ready, missing, or forms a cycle (SPEC §14).
    DependenciesNotReady,
    /// A reference to another namespace while `--no-cross-namespace-refs` (SPEC §14, §16).
    CrossNamespaceRefDenied,
    /// The Flux source is missing, unsupported, not ready or unreadable (SPEC §16).
    SourceNotReady,
    /// The artifact download failed (SPEC §17).
    FetchFailed,
    /// The artifact's content cannot be extracted safely (SPEC §17).
    InvalidArtifact,
    /// `spec.path` is missing, not a directory, or escapes the artifact (SPEC §17).
    PathNotFound,
    /// No `release.cue` at the path (SPEC §18).
    ReleaseFileNotFound,
    /// The exported value is not a `ModuleRelease` (SPEC §18).
    UnsupportedKind,
    /// The module or a dependency cannot be fetched from the registry (SPEC §18).
    ResolutionFailed,
    /// CUE evaluation, values or the rendered objects are invalid (SPEC §18, §24).
    RenderFailed,
    /// An OPM module or instance waits for a Ready Platform `cluster` (SPEC §30).
    PlatformNotReady,
    /// No usable identity to act as (SPEC §15).
    ImpersonationFailed,
    /// An apply was refused or failed (SPEC §19).
    ApplyFailed,
    /// At least one stale object could not be deleted (SPEC §9).
    PruneFailed,
    /// An object belongs to another release or pre-existed (SPEC §25).
    OwnershipConflict,
    /// The attempt exceeded `spec.timeout` (SPEC §4).
    ReconcileTimeout,
    /// The ServiceAccount to delete as is missing (SPEC §12).
    DeletionSAMissing,
    /// Deletion left the inventory in place (SPEC §12).
    OrphanedOnDeletion,
    /// Live objects differ from what was applied (SPEC §20).
    DriftDetected,
    /// Adding or removing the finalizer failed; nothing was committed (SPEC §3 step 3).
    FinalizerFailed,
    /// Writing the status failed (SPEC §10).
    StatusPatchFailed,
    /// The release's deletion finished (SPEC §12).
    Deleted,
    /// The release no longer exists (SPEC §3 step 1).
    Gone,
    /// An object is Failed, or not all healthy within `timeout` (SPEC §26).
    HealthCheckFailed,
    /// `Healthy=True` (SPEC leaves the reason open; Flux's word).
    Succeeded,
    /// A `valuesFrom` object or key is missing and not `optional` (SPEC §27).
    ValuesNotFound,
    /// An object deleted and created anew (`releases.opmodel.dev/force: enabled`, SPEC §28).
    Recreated,
    /// `ModuleResolved=True` on a ModuleRelease (SPEC §3 step 10).
    Resolved,
    /// The remote cluster's kubeconfig is missing, too large, unreadable, or runs a
    /// command or names a file (SPEC §31).
    InvalidKubeConfig,
    /// The remote cluster cannot be reached (SPEC §31); transient.
    ClusterUnreachable,
    /// The kubeconfig now points at another server; the old cluster's objects were left
    /// there and are named in `status.leftBehind` (SPEC §31).
    ClusterChanged,
    /// A deleting release waits for the releases that depend on it to go first (SPEC §32).
    DependentsExist,
    /// A hook failed, or was not done within `timeout` (SPEC §32); transient.
    HookFailed,
    /// The caller broke the drain rule: an attempt started from anything but `Observed`.
    /// Only ever in `Done`, never in a condition or an event.
    InvalidInput,
}

impl Reason {
    /// Every reason, in declaration order: for parsing and for tests that must see them all.
    pub const ALL: [Reason; 42] = [
        Reason::Progressing,
        Reason::ReconciliationSucceeded,
        Reason::Suspended,
        Reason::Resumed,
        Reason::NoOp,
        Reason::Applied,
        Reason::Pruned,
        Reason::PruneSkipped,
        Reason::DependenciesNotReady,
        Reason::CrossNamespaceRefDenied,
        Reason::SourceNotReady,
        Reason::FetchFailed,
        Reason::InvalidArtifact,
        Reason::PathNotFound,
        Reason::ReleaseFileNotFound,
        Reason::UnsupportedKind,
        Reason::ResolutionFailed,
        Reason::RenderFailed,
        Reason::PlatformNotReady,
        Reason::ImpersonationFailed,
        Reason::ApplyFailed,
        Reason::PruneFailed,
        Reason::OwnershipConflict,
        Reason::ReconcileTimeout,
        Reason::DeletionSAMissing,
        Reason::OrphanedOnDeletion,
        Reason::DriftDetected,
        Reason::FinalizerFailed,
        Reason::StatusPatchFailed,
        Reason::Deleted,
        Reason::Gone,
        Reason::HealthCheckFailed,
        Reason::Succeeded,
        Reason::ValuesNotFound,
        Reason::Recreated,
        Reason::Resolved,
        Reason::InvalidKubeConfig,
        Reason::ClusterUnreachable,
        Reason::ClusterChanged,
        Reason::DependentsExist,
        Reason::HookFailed,
        Reason::InvalidInput,
    ];

    /// The name on the wire, as SPEC spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Progressing => "Progressing",
            Reason::ReconciliationSucceeded => "ReconciliationSucceeded",
            Reason::Suspended => "Suspended",
            Reason::Resumed => "Resumed",
            Reason::NoOp => "NoOp",
            Reason::Applied => "Applied",
            Reason::Pruned => "Pruned",
            Reason::PruneSkipped => "PruneSkipped",
            Reason::DependenciesNotReady => "DependenciesNotReady",
            Reason::CrossNamespaceRefDenied => "CrossNamespaceRefDenied",
            Reason::SourceNotReady => "SourceNotReady",
            Reason::FetchFailed => "FetchFailed",
            Reason::InvalidArtifact => "InvalidArtifact",
            Reason::PathNotFound => "PathNotFound",
            Reason::ReleaseFileNotFound => "ReleaseFileNotFound",
            Reason::UnsupportedKind => "UnsupportedKind",
            Reason::ResolutionFailed => "ResolutionFailed",
            Reason::RenderFailed => "RenderFailed",
            Reason::PlatformNotReady => "PlatformNotReady",
            Reason::ImpersonationFailed => "ImpersonationFailed",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::PruneFailed => "PruneFailed",
            Reason::OwnershipConflict => "OwnershipConflict",
            Reason::ReconcileTimeout => "ReconcileTimeout",
            Reason::DeletionSAMissing => "DeletionSAMissing",
            Reason::OrphanedOnDeletion => "OrphanedOnDeletion",
            Reason::DriftDetected => "DriftDetected",
            Reason::FinalizerFailed => "FinalizerFailed",
            Reason::StatusPatchFailed => "StatusPatchFailed",
            Reason::Deleted => "Deleted",
            Reason::Gone => "Gone",
            Reason::HealthCheckFailed => "HealthCheckFailed",
            Reason::Succeeded => "Succeeded",
            Reason::ValuesNotFound => "ValuesNotFound",
            Reason::Recreated => "Recreated",
            Reason::Resolved => "Resolved",
            Reason::InvalidKubeConfig => "InvalidKubeConfig",
            Reason::ClusterUnreachable => "ClusterUnreachable",
            Reason::ClusterChanged => "ClusterChanged",
            Reason::DependentsExist => "DependentsExist",
            Reason::HookFailed => "HookFailed",
            Reason::InvalidInput => "InvalidInput",
        }
    }

    /// The event action (SPEC §4's third column; the rest by the step they belong to).
    /// No default arm: a new reason must say which step it reports.
    pub fn action(self) -> &'static str {
        use Reason::*;
        match self {
            DependenciesNotReady => "DependsOn",
            CrossNamespaceRefDenied | SourceNotReady => "Resolve",
            FetchFailed | InvalidArtifact => "Fetch",
            PathNotFound | ReleaseFileNotFound | UnsupportedKind => "Load",
            ResolutionFailed | RenderFailed | ValuesNotFound | PlatformNotReady => "Render",
            ImpersonationFailed | ApplyFailed | Applied | OwnershipConflict | Recreated => "Apply",
            PruneFailed | Pruned | PruneSkipped => "Prune",
            DriftDetected => "DriftCheck",
            HealthCheckFailed => "Health",
            HookFailed => "Hook",
            DeletionSAMissing | OrphanedOnDeletion | Deleted | DependentsExist => "Delete",
            InvalidKubeConfig | ClusterUnreachable | ClusterChanged => "Connect",
            Progressing
            | ReconciliationSucceeded
            | Suspended
            | Resumed
            | NoOp
            | ReconcileTimeout
            | FinalizerFailed
            | StatusPatchFailed
            | Gone
            | Succeeded
            | Resolved
            | InvalidInput => "Reconcile",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no reason of SPEC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reason {0:?}")]
pub struct UnknownReason(pub String);

impl FromStr for Reason {
    type Err = UnknownReason;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| UnknownReason(s.to_string()))
    }
}

/// Persisted conditions keep their reason as a string; this compares one with a reason.
impl PartialEq<Reason> for str {
    fn eq(&self, other: &Reason) -> bool {
        self == other.as_str()
    }
}

/// Persisted conditions keep their reason as a string; this compares one with a reason.
impl PartialEq<Reason> for String {
    fn eq(&self, other: &Reason) -> bool {
        self.as_str() == other.as_str()
    }
}

/// Lets `Option<&str>` of a persisted condition be compared as `Some(reason)`.
impl PartialEq<Reason> for &str {
    fn eq(&self, other: &Reason) -> bool {
        *self == other.as_str()
    }
}

/// Lets a trace or a test compare a reason with the name it expects on the wire.
impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every reason, its SPEC name and its event action. Written out by hand so that a
    /// renamed variant or a changed action fails here, not on a user's dashboard.
    const SPEC: [(Reason, &str, &str); 42] = [
        (Reason::Progressing, "Progressing", "Reconcile"),
        (
            Reason::ReconciliationSucceeded,
            "ReconciliationSucceeded",
            "Reconcile",
        ),
        (Reason::Suspended, "Suspended", "Reconcile"),
        (Reason::Resumed, "Resumed", "Reconcile"),
        (Reason::NoOp, "NoOp", "Reconcile"),
        (Reason::Applied, "Applied", "Apply"),
        (Reason::Pruned, "Pruned", "Prune"),
        (Reason::PruneSkipped, "PruneSkipped", "Prune"),
        (
            Reason::DependenciesNotReady,
            "DependenciesNotReady",
            "DependsOn",
        ),
        (
            Reason::CrossNamespaceRefDenied,
            "CrossNamespaceRefDenied",
            "Resolve",
        ),
        (Reason::SourceNotReady, "SourceNotReady", "Resolve"),
        (Reason::FetchFailed, "FetchFailed", "Fetch"),
        (Reason::InvalidArtifact, "InvalidArtifact", "Fetch"),
        (Reason::PathNotFound, "PathNotFound", "Load"),
        (Reason::ReleaseFileNotFound, "ReleaseFileNotFound", "Load"),
        (Reason::UnsupportedKind, "UnsupportedKind", "Load"),
        (Reason::ResolutionFailed, "ResolutionFailed", "Render"),
        (Reason::RenderFailed, "RenderFailed", "Render"),
        (Reason::PlatformNotReady, "PlatformNotReady", "Render"),
        (Reason::ImpersonationFailed, "ImpersonationFailed", "Apply"),
        (Reason::ApplyFailed, "ApplyFailed", "Apply"),
        (Reason::PruneFailed, "PruneFailed", "Prune"),
        (Reason::OwnershipConflict, "OwnershipConflict", "Apply"),
        (Reason::ReconcileTimeout, "ReconcileTimeout", "Reconcile"),
        (Reason::DeletionSAMissing, "DeletionSAMissing", "Delete"),
        (Reason::OrphanedOnDeletion, "OrphanedOnDeletion", "Delete"),
        (Reason::DriftDetected, "DriftDetected", "DriftCheck"),
        (Reason::FinalizerFailed, "FinalizerFailed", "Reconcile"),
        (Reason::StatusPatchFailed, "StatusPatchFailed", "Reconcile"),
        (Reason::Deleted, "Deleted", "Delete"),
        (Reason::Gone, "Gone", "Reconcile"),
        (Reason::HealthCheckFailed, "HealthCheckFailed", "Health"),
        (Reason::Succeeded, "Succeeded", "Reconcile"),
        (Reason::ValuesNotFound, "ValuesNotFound", "Render"),
        (Reason::Recreated, "Recreated", "Apply"),
        (Reason::Resolved, "Resolved", "Reconcile"),
        (Reason::InvalidKubeConfig, "InvalidKubeConfig", "Connect"),
        (Reason::ClusterUnreachable, "ClusterUnreachable", "Connect"),
        (Reason::ClusterChanged, "ClusterChanged", "Connect"),
        (Reason::DependentsExist, "DependentsExist", "Delete"),
        (Reason::HookFailed, "HookFailed", "Hook"),
        (Reason::InvalidInput, "InvalidInput", "Reconcile"),
    ];

    #[test]
    fn every_reason_has_its_spec_name_and_action() {
        assert_eq!(
            SPEC.map(|(r, _, _)| r),
            Reason::ALL,
            "the table lists every reason once, in order"
        );
        // A variant declared between two others but missing from `ALL` shifts the
        // discriminants after it, which this catches.
        for (i, r) in Reason::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i, "{r} out of place in Reason::ALL");
        }
        for (reason, name, action) in SPEC {
            assert_eq!(reason.as_str(), name);
            assert_eq!(reason.to_string(), name);
            assert_eq!(reason.action(), action, "{name}");
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), reason);
            assert_eq!(name.parse::<Reason>(), Ok(reason));
            let persisted: String = name.into();
            assert!(*name == reason && persisted == reason && reason == name);
        }
    }

    #[test]
    fn unknown_names_are_refused() {
        assert_eq!(
            "Ready".parse::<Reason>(),
            Err(UnknownReason("Ready".into()))
        );
        assert!(serde_json::from_str::<Reason>("\"applyFailed\"").is_err());
        assert!("ApplyFailed" != Reason::PruneFailed);
    }
}
