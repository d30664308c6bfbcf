//! What the world remembers of each attempt: the full exchange with the machine
//! ([`AttemptLog`], also written as a JSON-lines trace) and a one-line timeline entry.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use opm_core::api::ReleaseStatus;
use opm_core::config::Config;
use opm_core::effect::Effect;
use opm_core::input::Input;
use opm_core::object::{ReleaseKey, ResourceId};
use opm_core::outcome::Outcome;
use opm_core::trace::{Recorder, TraceHeader};

/// One attempt, drained to `Done`: `batches[i]` is the machine's answer to `inputs[i]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptLog {
    /// Monotonic attempt number in this world.
    pub id: u64,
    /// The release the attempt was for.
    pub key: ReleaseKey,
    /// The virtual time of its `Observed` input.
    pub started_at: Timestamp,
    /// The virtual time it reached `Done`, after any delay faults.
    pub finished_at: Timestamp,
    /// Inputs fed to the machine.
    pub steps: u32,
    /// The exchange, kept with `Retention::Full` only (empty otherwise).
    pub inputs: Vec<Input>,
    /// The machine's answer to each input, kept with `Retention::Full` only.
    pub batches: Vec<Vec<Effect>>,
    /// How the attempt ended, as its `Done` said.
    pub outcome: Option<Outcome>,
    /// The exit's reason from `Done` (e.g. `ApplyFailed`).
    pub reason: String,
    /// The requeue `Done` asked for, before any jitter.
    pub requeue_after: Option<Duration>,
    /// The release's persisted status after the attempt (`None` when it is gone).
    pub status: Option<ReleaseStatus>,
    /// Objects the attempt's prune effects removed from the store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<ResourceId>,
    /// Status patches whose merge result differed from the full status the effect claimed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub status_mismatches: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl AttemptLog {
    /// Every effect, in order.
    pub fn effects(&self) -> impl Iterator<Item = &Effect> {
        self.batches.iter().flatten()
    }

    /// The status the attempt observed (from its `Observed` input).
    pub fn observed_status(&self) -> Option<&ReleaseStatus> {
        match self.inputs.first().map(|i| &i.kind) {
            Some(opm_core::input::InputKind::Observed {
                object: Some(o), ..
            }) => o.status(),
            _ => None,
        }
    }

    /// The attempt as a JSON-lines trace in the core's format ([`opm_core::trace`]): the
    /// header, then `{"seq":n,"in":…}` and `{"seq":n,"out":…}` in the order they happened,
    /// so `trace::replay` (and `opm-sim replay`) accept it.
    pub fn trace_lines(&self, cfg: &Config) -> Vec<String> {
        let mut r = Recorder::new(&TraceHeader::new(cfg, self.key.clone()).with_attempt(self.id));
        for (input, batch) in self.inputs.iter().zip(&self.batches) {
            r.input(input);
            r.effects(batch);
        }
        r.lines().to_vec()
    }

    /// The attempt's one-line summary, with the `Ready` condition it left.
    pub fn timeline_entry(&self) -> TimelineEntry {
        self.timeline_entry_with(self.status.as_ref())
    }

    /// The timeline entry with `status` as the status after the attempt (the log's own
    /// when it keeps one).
    pub(crate) fn timeline_entry_with(&self, status: Option<&ReleaseStatus>) -> TimelineEntry {
        let ready = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
        TimelineEntry {
            id: self.id,
            key: self.key.clone(),
            started_at: self.started_at,
            finished_at: self.finished_at,
            outcome: self.outcome,
            reason: self.reason.clone(),
            requeue_after: self.requeue_after,
            ready: ready.map(|c| c.status.clone()).unwrap_or_default(),
            message: ready.map(|c| c.message.clone()).unwrap_or_default(),
            steps: self.steps,
        }
    }
}

/// One attempt on the timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineEntry {
    /// The attempt's number, shared with its `AttemptLog`.
    pub id: u64,
    /// The release the attempt was for.
    pub key: ReleaseKey,
    /// The virtual time of its `Observed` input.
    pub started_at: Timestamp,
    /// The virtual time it reached `Done`.
    pub finished_at: Timestamp,
    /// How the attempt ended, as its `Done` said.
    pub outcome: Option<Outcome>,
    /// The exit's reason from `Done` (e.g. `ApplyFailed`).
    pub reason: String,
    /// The requeue `Done` asked for, before any jitter.
    pub requeue_after: Option<Duration>,
    /// `Ready` after the attempt (`True`/`False`/`Unknown`, empty when absent or gone).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready: String,
    /// The `Ready` condition's message after the attempt (why it failed, for failures).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Inputs fed to the machine.
    pub steps: u32,
}

/// A watch event that made a release due at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    /// The virtual time of the watch event.
    pub at: Timestamp,
    /// Attempts run before it (the id the next attempt gets).
    pub before_attempt: u64,
    /// The release it made due.
    pub key: ReleaseKey,
    /// What changed, e.g. `specChanged` or `newArtifact`.
    pub why: String,
}
