//! A pure simulated cluster that drives the core across many attempts.
//!
//! The world holds what a reconcile touches — release objects, managed objects with
//! server-side apply and field ownership, Flux sources, artifacts, modules, ServiceAccounts
//! and their RBAC, a fault schedule — plus a virtual clock and a work queue. It executes
//! each effect exactly as the interpreter would against a real cluster, so property tests
//! and `opm-sim` see the same machine behaviour as production, minus the IO.
//!
//! ## Determinism
//!
//! Like the core, the world never reads a clock and never draws an unseeded random number:
//! time is [`World::now`], moved only by the driver to the next due attempt or scheduled
//! event; the only variety is a SplitMix64 generator seeded by the caller (uids, optional
//! success jitter, probabilistic faults). Same setup, same seed, same history → the same
//! attempts, effects and statuses, byte for byte.
//!
//! ## Shape (quinn's `Pair`, str0m's harness)
//!
//! * setup (`setup`): [`World::new`], then command mutators ([`World::namespace`],
//!   [`World::add_module`], [`World::publish`], [`World::add_service_account`],
//!   [`World::apply_platform`],
//!   [`World::create_release`], [`World::add_fault`], [`World::schedule`]);
//! * drive (`driver`, `clock`): [`World::run_attempt`] (one attempt drained to `Done`),
//!   [`World::step`] (the next due thing), [`World::drive_until`],
//!   [`World::drive_bounded`] (fails with [`Stuck`] instead of spinning);
//! * observe (`observe`): [`World::timeline`], [`World::logs`] (full [`AttemptLog`]s), [`World::events`],
//!   [`World::metrics`], [`World::store`], [`World::releases`];
//! * as data: `opm-sim`'s scenario format (its `scenario` module) builds and runs a world
//!   from YAML or JSON; [`WorldEvent`] is the serde form of each scheduled change.
//!
//! ## The core's second interpreter
//!
//! This crate used to be the core's `world` module (`src/world/`); it is its own
//! crate now, beside the interpreter (`interpreter/`) it mirrors, so the operator no
//! longer compiles it and a change to it rebuilds only the simulator and its tests. It
//! uses only the core's public API and, like the core, no IO, clock or randomness
//! (`tools/check-core-deps` checks both). Every decision stays in the core; what the world
//! decides is only what the cluster would do.
//!
//! Its layout follows the interpreter's. The state is split in three: the `cluster`
//! (`Cluster`: the [`Store`] of objects with their fields and managers and server-side
//! apply's rules, the [`Releases`], the [`Rbac`], the [`Catalog`], remote clusters,
//! rollouts, the Platform) is what the executors act on; the `schedule` (`Schedule`: the
//! scheduled [`WorldEvent`]s, the [`FaultSchedule`] and the seeded [`SplitMix64`]) drives it
//! through time, apart from it; [`World`] composes them with the operator's own
//! bookkeeping (the work queue, the virtual clock, logs, memos). `effects/` holds one
//! executor per effect kind (the files named as in `interpreter/src/effects/`), each a
//! method of the cluster that receives an executor context (`effects::Cx`: the virtual
//! time, the attempt's record, and the notes — store writes, watch events — the world acts
//! on once the effect is answered), as the interpreter's executors receive theirs;
//! `World::execute` takes the schedule's fault, runs the executor, then turns its notes
//! into triggers.
//!
//! ## Where each SPEC section lives
//!
//! | SPEC section | module |
//! |---|---|
//! | §3 One attempt, the drain rule; §5 requeue and jitter | `driver` ([`World::run_attempt`]); the virtual clock: `clock` ([`World::step`], [`World::drive_bounded`]) |
//! | §5, §14, §15 what re-triggers an attempt (watches) | `events` ([`WorldEvent`]), with the core's `opm_core::triggers` |
//! | §9 Prune, §12 deletion, §19 apply, §20 drift, §25 ownership, §32 teardown waits: the effects | `effects` (one file per effect kind, as in `interpreter/src/effects/`), on the `cluster` |
//! | §19/§20/§25 server-side apply, field ownership, conflicts, immutable fields | `store` ([`Store`]; `store/ssa.rs`, `store/fields.rs`) |
//! | §12 release objects: finalizers, generation, status subresource | `releases` ([`Releases`]) |
//! | §15 Impersonation and RBAC | `rbac` ([`Rbac`], [`Grant`]) |
//! | §16 sources, §17 artifacts, §18 render (modules as templates) | `catalog` ([`Catalog`]) |
//! | §23 Traces and simulation: attempt logs, the timeline | `log` ([`AttemptLog`], [`TimelineEntry`]); the schedule: `schedule` (events, `faults` ([`FaultSchedule`]), the seeded generator `prng` ([`SplitMix64`])) |
//! | §26 Health: rollouts | `health` ([`SimRollout`]) |
//! | §28 Per-object policies: the core's write plan, `Merge`'s fields of others left out | `policy` |
//! | §30 the Platform | `platform` ([`PlatformDef`]) |
//! | §31 Remote clusters | `clusters` |
//! | NoOp attempts not run again (an optimisation, no SPEC rule) | `memo` |

#![warn(unreachable_pub)]
#![warn(missing_docs)]

mod catalog;
mod clock;
mod cluster;
mod clusters;
mod driver;
mod effects;
mod events;
mod faults;
pub mod fixtures;
mod health;
mod log;
mod memo;
mod observe;
mod platform;
mod policy;
mod prng;
mod rbac;
mod releases;
mod schedule;
mod setup;
mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

pub use catalog::{
    ArtifactDef, Catalog, Exported, FluxSource, ModuleDef, SourceId, exported, normalise_path,
};
pub use clock::{Step, Stuck};
pub use effects::{Metrics, RecordedEvent};
pub use events::WorldEvent;
pub use faults::{Fault, FaultError, FaultMismatch, FaultSchedule};
pub use health::SimRollout;
pub use log::{AttemptLog, TimelineEntry, Trigger};
pub use platform::{DEFAULT_TRANSFORMERS, PlatformDef};
pub use prng::SplitMix64;
pub use rbac::{Grant, Rbac, Verb};
pub use releases::{EditError, ReleaseRecord, Releases, merge_patch};
pub use store::{FieldPath, Managers, Store, StoredObject};

use opm_core::config::Config;
use opm_core::input::InputError;
use opm_core::object::{ReleaseKey, ReleaseObject};

/// Why the world could not go on. Each names the release whose attempt broke a rule.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WorldError {
    /// The machine refused an input the world fed it: the two disagree on what is awaited.
    #[error("{key:?}: the machine refused an input: {error}")]
    Input {
        /// The release whose attempt was being driven.
        key: ReleaseKey,
        /// What the machine objected to.
        error: InputError,
    },
    /// A batch broke the drain rule: fire-and-forget effects first, one awaited effect or
    /// `Done` last.
    #[error("{key:?}: malformed batch: {detail}")]
    BatchShape {
        /// The release whose attempt emitted the batch.
        key: ReleaseKey,
        /// How the batch broke the rule, e.g. an awaited effect before its end.
        detail: String,
    },
    /// An attempt went past the world's step budget without reaching `Done`.
    #[error("{key:?}: attempt did not finish within {steps} steps")]
    Runaway {
        /// The release whose attempt did not end.
        key: ReleaseKey,
        /// The inputs fed before the world gave up: its step budget.
        steps: usize,
    },
    /// A scheduled release edit was refused.
    #[error(transparent)]
    Edit(#[from] EditError),
    /// A scheduled fault cannot hit the effect kind it names.
    #[error(transparent)]
    Fault(#[from] FaultMismatch),
}

/// How much of each attempt to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Full [`AttemptLog`]s (inputs, effects, status): for tests and traces.
    Full,
    /// Only [`TimelineEntry`]s (the log of an attempt run by [`World::run_attempt`] is kept
    /// until the next attempt, without its inputs and effects; the driver's own attempts,
    /// [`World::step`] and those built on it, keep none): for long simulations. Emitted events ([`World::events`]) and watch
    /// triggers ([`World::triggers`]) are not kept either, so memory stays flat however
    /// many virtual hours run.
    Timeline,
}

/// The simulated cluster, its clock and its work queue.
#[derive(Clone, Debug)]
pub struct World {
    cfg: Config,
    now: Timestamp,
    /// What the executors act on.
    cluster: cluster::Cluster,
    /// Events, faults and the seeded generator, apart from the cluster.
    schedule: schedule::Schedule,
    /// The work queue: one due time per release, indexed both ways.
    due: BTreeMap<ReleaseKey, Timestamp>,
    queue: BTreeSet<(Timestamp, ReleaseKey)>,
    /// Last watch trigger per release.
    changed_at: BTreeMap<ReleaseKey, Timestamp>,
    triggers: Vec<Trigger>,
    timeline: Vec<TimelineEntry>,
    /// Timeline entries already handed out by [`World::drain_timeline`] (attempt ids stay
    /// monotonic across drains).
    drained: u64,
    logs: Vec<AttemptLog>,
    events: Vec<RecordedEvent>,
    metrics: Metrics,
    retention: Retention,
    /// ±5 % on success requeues, drawn from the seeded generator (off by default so
    /// properties can compare exact delays).
    jitter: bool,
    max_steps: usize,
    /// State of the attempt being executed.
    current: effects::Current,
    /// Bumped by every scheduled event and setup change, and by anything else an attempt
    /// reads that no resource version covers (see [`memo`]).
    epoch: u64,
    /// Writes to the store by attempts (objects created, changed, pruned or orphaned); the
    /// store's other writes are events or setup, which bump [`World::epoch`].
    store_writes: u64,
    /// Whether NoOp attempts may be answered from [`World::memos`] (with
    /// [`Retention::Timeline`] only).
    memo: bool,
    /// The last memoisable attempt of each release.
    memos: store::FixedHashMap<ReleaseKey, memo::AttemptMemo>,
    /// Attempts answered from [`World::memos`].
    memo_hits: u64,
    /// The digest of the Ready Platform when it was last checked (none: not Ready), so only
    /// a change of it re-triggers the OPM releases.
    platform_ready_digest: Option<String>,
    /// Releases that rendered or waited through the Platform (the operator's record of them).
    opm_releases: BTreeSet<ReleaseKey>,
}

impl World {
    /// An empty cluster at `start`, with the operator configured by `cfg`.
    pub fn new(cfg: Config, start: Timestamp, seed: u64) -> Self {
        Self {
            cfg,
            now: start,
            cluster: cluster::Cluster::new(seed),
            schedule: schedule::Schedule::new(seed),
            due: BTreeMap::new(),
            queue: BTreeSet::new(),
            changed_at: BTreeMap::new(),
            triggers: Vec::new(),
            timeline: Vec::new(),
            drained: 0,
            logs: Vec::new(),
            events: Vec::new(),
            metrics: Metrics::default(),
            retention: Retention::Full,
            jitter: false,
            max_steps: 256,
            current: effects::Current::default(),
            epoch: 0,
            store_writes: 0,
            memo: true,
            memos: Default::default(),
            memo_hits: 0,
            platform_ready_digest: None,
            opm_releases: BTreeSet::new(),
        }
    }

    /// Chooses how much of each attempt to keep: full logs for tests, the timeline for long runs.
    pub fn with_retention(mut self, r: Retention) -> Self {
        self.retention = r;
        self
    }

    /// Whether a NoOp attempt whose inputs are all unchanged since the release's last one
    /// may be answered from it without running the core again (on by default; it only
    /// applies with [`Retention::Timeline`], and changes no output).
    pub fn with_attempt_memo(mut self, on: bool) -> Self {
        self.memo = on;
        self
    }

    /// Turns on the ±5 % jitter of success requeues, drawn from the seeded generator.
    pub fn with_jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    // ---- queue ------------------------------------------------------------------------

    fn set_due(&mut self, key: &ReleaseKey, at: Timestamp) {
        if let Some(old) = self.due.insert(key.clone(), at) {
            self.queue.remove(&(old, key.clone()));
        }
        self.queue.insert((at, key.clone()));
    }

    fn clear_due(&mut self, key: &ReleaseKey) {
        if let Some(old) = self.due.remove(key) {
            self.queue.remove(&(old, key.clone()));
        }
    }

    /// A watch event: the release is due now (unless already due sooner).
    fn trigger(&mut self, key: &ReleaseKey, why: &'static str) {
        self.trigger_at(key, self.now, why);
    }

    /// A watch event that re-queues the release at `at` (unless already due sooner).
    fn trigger_at(&mut self, key: &ReleaseKey, at: Timestamp, why: &'static str) {
        if self.cluster.releases.record(key).is_none_or(|r| r.external) {
            return;
        }
        let now = self.now;
        if self.due.get(key).is_none_or(|d| *d > at) {
            self.set_due(key, at);
        }
        self.changed_at.insert(key.clone(), now);
        if self.retention == Retention::Full {
            self.triggers.push(Trigger {
                at: now,
                before_attempt: self.attempts_run(),
                key: key.clone(),
                why: why.to_string(),
            });
        }
    }

    fn trigger_source_users(&mut self, source: &SourceId, why: &'static str) {
        let users: Vec<ReleaseKey> = self
            .cluster
            .releases
            .iter()
            .filter_map(|(k, r)| match &r.object {
                ReleaseObject::Release(rel) => {
                    let ns = if rel.spec.source_ref.namespace.is_empty() {
                        &k.namespace
                    } else {
                        &rel.spec.source_ref.namespace
                    };
                    (rel.spec.source_ref.kind == source.kind
                        && rel.spec.source_ref.name == source.name
                        && *ns == source.namespace)
                        .then(|| k.clone())
                }
                ReleaseObject::ModuleRelease(_) => None,
            })
            .collect();
        for k in users {
            self.trigger(&k, why);
        }
    }

    /// Releases whose `dependsOn` names `dep`. Runs on every Ready transition, so it only
    /// looks at the releases that have a `dependsOn` at all ([`Releases::with_depends_on`]):
    /// walking every release here made each transition cost O(fleet).
    fn trigger_dependents(&mut self, dep: &ReleaseKey) {
        let dependents: Vec<ReleaseKey> = self
            .cluster
            .releases
            .with_depends_on()
            .filter(|(k, r)| opm_core::deps::depends_on(k, &r.object.common().depends_on, dep))
            .map(|(k, _)| k.clone())
            .collect();
        for k in dependents {
            self.trigger(&k, "dependencyReady");
        }
    }
}

/// `t + d`, saturating at the end of jiff's range.
pub(crate) fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|sd| t.checked_add(sd).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests;
