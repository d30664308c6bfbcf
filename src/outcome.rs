//! The five outcomes and the exit table of SPEC §4: reason → class, event action, requeue.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backoff::{STALLED_RECHECK, compute_backoff};

/// How an attempt ended. Exactly six values; every exit names its own.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    NoOp,
    Applied,
    AppliedAndPruned,
    FailedTransient,
    FailedStalled,
    /// Nothing to apply, still waiting for health (SPEC §26).
    Progressing,
}

impl Outcome {
    /// The `outcome` label of `opm_controller_reconcile_total`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Outcome::NoOp => "no_op",
            Outcome::Applied => "applied",
            Outcome::AppliedAndPruned => "applied_and_pruned",
            Outcome::FailedTransient => "failed_transient",
            Outcome::FailedStalled => "failed_stalled",
            Outcome::Progressing => "progressing",
        }
    }

    /// True for the two failure outcomes.
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::FailedTransient | Outcome::FailedStalled)
    }
}

/// Condition and event reasons (SPEC §4, §12, §13, §20). Public contract: spelled as written.
pub mod reasons {
    pub const PROGRESSING: &str = "Progressing";
    pub const SUCCEEDED: &str = "ReconciliationSucceeded";
    pub const SUSPENDED: &str = "Suspended";
    pub const RESUMED: &str = "Resumed";
    pub const NO_OP: &str = "NoOp";
    pub const APPLIED: &str = "Applied";
    pub const PRUNED: &str = "Pruned";
    pub const PRUNE_SKIPPED: &str = "PruneSkipped";
    pub const DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
    pub const CROSS_NAMESPACE_REF_DENIED: &str = "CrossNamespaceRefDenied";
    pub const SOURCE_NOT_READY: &str = "SourceNotReady";
    pub const FETCH_FAILED: &str = "FetchFailed";
    pub const INVALID_ARTIFACT: &str = "InvalidArtifact";
    pub const PATH_NOT_FOUND: &str = "PathNotFound";
    pub const RELEASE_FILE_NOT_FOUND: &str = "ReleaseFileNotFound";
    pub const UNSUPPORTED_KIND: &str = "UnsupportedKind";
    pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
    pub const RENDER_FAILED: &str = "RenderFailed";
    pub const IMPERSONATION_FAILED: &str = "ImpersonationFailed";
    pub const APPLY_FAILED: &str = "ApplyFailed";
    pub const PRUNE_FAILED: &str = "PruneFailed";
    pub const OWNERSHIP_CONFLICT: &str = "OwnershipConflict";
    pub const RECONCILE_TIMEOUT: &str = "ReconcileTimeout";
    pub const DELETION_SA_MISSING: &str = "DeletionSAMissing";
    pub const ORPHANED_ON_DELETION: &str = "OrphanedOnDeletion";
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    pub const FINALIZER_FAILED: &str = "FinalizerFailed";
    pub const STATUS_PATCH_FAILED: &str = "StatusPatchFailed";
    pub const DELETED: &str = "Deleted";
    pub const GONE: &str = "Gone";
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    /// `Healthy=True` (SPEC leaves the reason open; Flux's word).
    pub const HEALTH_SUCCEEDED: &str = "Succeeded";
    /// A `valuesFrom` object or key is missing and not `optional` (SPEC §4, §27).
    pub const VALUES_NOT_FOUND: &str = "ValuesNotFound";
    /// An object deleted and created anew (`releases.opmodel.dev/force: enabled`, SPEC §28).
    pub const RECREATED: &str = "Recreated";
}

/// The event action for a reason (SPEC §4's third column; the rest by the step they belong to).
pub fn action_for(reason: &str) -> &'static str {
    use reasons::*;
    match reason {
        DEPENDENCIES_NOT_READY => "DependsOn",
        CROSS_NAMESPACE_REF_DENIED | SOURCE_NOT_READY => "Resolve",
        FETCH_FAILED | INVALID_ARTIFACT => "Fetch",
        PATH_NOT_FOUND | RELEASE_FILE_NOT_FOUND | UNSUPPORTED_KIND => "Load",
        RESOLUTION_FAILED | RENDER_FAILED | VALUES_NOT_FOUND => "Render",
        IMPERSONATION_FAILED | APPLY_FAILED | APPLIED | OWNERSHIP_CONFLICT | RECREATED => "Apply",
        PRUNE_FAILED | PRUNED | PRUNE_SKIPPED => "Prune",
        DRIFT_DETECTED => "DriftCheck",
        HEALTH_CHECK_FAILED => "Health",
        DELETION_SA_MISSING | ORPHANED_ON_DELETION | DELETED => "Delete",
        _ => "Reconcile",
    }
}

/// How a failed exit is retried.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum FailureClass {
    /// Waiting on something outside the release: Normal event, counters untouched, no history.
    SoftBlocked,
    /// Retried with backoff; `Reconciling` stays True.
    Transient,
    /// Needs a change to succeed: `Stalled=True`, 30-minute safety recheck.
    Stalled,
}

/// A classified failed exit: reason, class and the message shown in conditions and events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub reason: &'static str,
    pub class: FailureClass,
    pub message: String,
}

impl Failure {
    pub fn transient(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            class: FailureClass::Transient,
            message: message.into(),
        }
    }
    pub fn stalled(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            class: FailureClass::Stalled,
            message: message.into(),
        }
    }
    pub fn soft(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            class: FailureClass::SoftBlocked,
            message: message.into(),
        }
    }

    /// The outcome reported for this exit (soft-blocked counts as `failed_transient`).
    pub fn outcome(&self) -> Outcome {
        match self.class {
            FailureClass::Stalled => Outcome::FailedStalled,
            FailureClass::Transient | FailureClass::SoftBlocked => Outcome::FailedTransient,
        }
    }

    /// Requeue delay; `failures` is `failureCounters.reconcile` after this attempt.
    pub fn requeue(&self, failures: i64, dependency_requeue: Duration) -> Duration {
        match self.class {
            FailureClass::SoftBlocked => dependency_requeue.min(crate::backoff::MAX_REQUEUE),
            FailureClass::Transient => compute_backoff(failures),
            FailureClass::Stalled => STALLED_RECHECK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_labels() {
        let all = [
            Outcome::NoOp,
            Outcome::Applied,
            Outcome::AppliedAndPruned,
            Outcome::FailedTransient,
            Outcome::FailedStalled,
            Outcome::Progressing,
        ];
        let labels: Vec<_> = all.iter().map(|o| o.metric_label()).collect();
        assert_eq!(
            labels,
            [
                "no_op",
                "applied",
                "applied_and_pruned",
                "failed_transient",
                "failed_stalled",
                "progressing"
            ]
        );
    }

    #[test]
    fn requeue_by_class() {
        let dep = Duration::from_secs(30);
        assert_eq!(Failure::soft("x", "").requeue(9, dep), dep);
        assert_eq!(Failure::transient("x", "").requeue(3, dep).as_secs(), 20);
        assert_eq!(Failure::stalled("x", "").requeue(1, dep).as_secs(), 1800);
        assert_eq!(Failure::soft("x", "").outcome(), Outcome::FailedTransient);
    }
}
