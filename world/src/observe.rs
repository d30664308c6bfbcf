//! What a world shows: the clock, the cluster's stores, the releases, the timeline, the
//! logs, events and metrics, and what is due.

use jiff::Timestamp;

use opm_core::config::Config;
use opm_core::object::{ReleaseKey, ReleaseObject, ResourceId};

use super::{
    AttemptLog, Catalog, FaultSchedule, Metrics, Rbac, RecordedEvent, Releases, Store,
    StoredObject, TimelineEntry, Trigger, World,
};

impl World {
    /// The virtual clock, moved only by the driver to the next due attempt or event.
    pub fn now(&self) -> Timestamp {
        self.now
    }
    /// The operator configuration every attempt runs with.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// The managed objects, as the API server would hold them.
    pub fn store(&self) -> &Store {
        &self.cluster.store
    }
    /// Every release object, reconciled and external.
    pub fn releases(&self) -> &Releases {
        &self.cluster.releases
    }
    /// The release object under `key`, as the API server would return it.
    pub fn release(&self, key: &ReleaseKey) -> Option<&ReleaseObject> {
        self.cluster.releases.get(key)
    }
    /// The Flux sources, artifacts and modules the world serves.
    pub fn catalog(&self) -> &Catalog {
        &self.cluster.catalog
    }
    /// The ServiceAccounts and what impersonating each allows.
    pub fn rbac(&self) -> &Rbac {
        &self.cluster.rbac
    }
    /// The faults scheduled so far, in the order they match.
    pub fn faults(&self) -> &FaultSchedule {
        &self.schedule.faults
    }
    /// One entry per attempt not yet drained, oldest first.
    pub fn timeline(&self) -> &[TimelineEntry] {
        &self.timeline
    }

    /// Hands out the timeline so far and forgets it, so long simulations stream their
    /// output in constant memory. [`World::unsettled`] only sees entries not yet drained.
    pub fn drain_timeline(&mut self) -> Vec<TimelineEntry> {
        self.drained += self.timeline.len() as u64;
        std::mem::take(&mut self.timeline)
    }

    /// Hands out the full attempt logs kept so far and forgets them (with
    /// [`Retention::Full`](crate::Retention::Full), streaming traces out of a long run).
    pub fn drain_logs(&mut self) -> Vec<AttemptLog> {
        std::mem::take(&mut self.logs)
    }

    /// Attempts run so far (drained or not).
    pub fn attempts_run(&self) -> u64 {
        self.drained + self.timeline.len() as u64
    }
    /// How many attempts were answered from the memo of the release's last identical NoOp
    /// instead of running the core (see [`World::with_attempt_memo`]).
    pub fn memoised_attempts(&self) -> u64 {
        self.memo_hits
    }
    /// The full attempt logs kept (with `Retention::Full`) and not yet drained.
    pub fn logs(&self) -> &[AttemptLog] {
        &self.logs
    }
    /// Events the core emitted so far; empty with [`Retention::Timeline`](crate::Retention::Timeline).
    pub fn events(&self) -> &[RecordedEvent] {
        &self.events
    }
    /// The operator's metrics so far, as the interpreter would export them.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    /// Every watch trigger so far (what re-queued a release early, and when); empty with
    /// [`Retention::Timeline`](crate::Retention::Timeline).
    pub fn triggers(&self) -> &[Trigger] {
        &self.triggers
    }
    /// When the release is next due, if queued.
    pub fn due(&self, key: &ReleaseKey) -> Option<Timestamp> {
        self.due.get(key).copied()
    }
    /// Scheduled events not yet applied.
    pub fn pending_events(&self) -> usize {
        self.schedule.events.len()
    }

    /// The live object with this identity, if any.
    pub fn object(&self, id: &ResourceId) -> Option<&StoredObject> {
        self.cluster.store.get(id)
    }
}
