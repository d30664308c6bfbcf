//! The six outcomes of SPEC §4 and a classified failed exit: class → outcome and requeue.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::backoff::{STALLED_RECHECK, compute_backoff};
use crate::reason::Reason;

/// How an attempt ended. Exactly six values; every exit names its own.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Nothing changed: no apply, status barely touched (SPEC §10).
    NoOp,
    /// Applied, nothing pruned.
    Applied,
    /// Applied and the prune ran.
    AppliedAndPruned,
    /// Retried with backoff (soft-blocked exits count here too).
    FailedTransient,
    /// Needs a change; rechecked after 30 minutes.
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
    /// The condition and event reason.
    pub reason: Reason,
    /// How it is retried.
    pub class: FailureClass,
    /// Shown in `Ready`, the event and the history entry.
    pub message: String,
}

impl Failure {
    /// A failure retried with backoff.
    pub fn transient(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            class: FailureClass::Transient,
            message: message.into(),
        }
    }
    /// A failure that needs a change to the spec or the cluster.
    pub fn stalled(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            class: FailureClass::Stalled,
            message: message.into(),
        }
    }
    /// Waiting on something outside the release; not counted as a failure.
    pub fn soft(reason: Reason, message: impl Into<String>) -> Self {
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
        assert_eq!(
            Failure::soft(Reason::SourceNotReady, "").requeue(9, dep),
            dep
        );
        assert_eq!(
            Failure::transient(Reason::ApplyFailed, "")
                .requeue(3, dep)
                .as_secs(),
            20
        );
        assert_eq!(
            Failure::stalled(Reason::RenderFailed, "")
                .requeue(1, dep)
                .as_secs(),
            1800
        );
        assert_eq!(
            Failure::soft(Reason::SourceNotReady, "").outcome(),
            Outcome::FailedTransient
        );
    }
}
