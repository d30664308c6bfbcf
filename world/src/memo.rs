//! Attempts the world need not run again.
//!
//! Most attempts of a long simulation are periodic NoOps: the release, its objects and the
//! rest of the world are as they were at its last attempt, so the core, a pure function of
//! its inputs, would answer exactly as it did then. Each such attempt costs a render, its
//! digests, a drift comparison of every field and a health read, and the result is known.
//!
//! After a NoOp attempt that only read the world (render, source, drift check, health read)
//! and met no fault, the world keeps what it did ([`AttemptMemo`]) with what it read: the
//! release's `resourceVersion`, the resource version of every object it checked (looked up
//! only when the store was written since), and the world's epoch (bumped by every
//! scheduled event and setup change: sources, modules, RBAC, faults, rollouts,
//! cluster-scoped kinds, the Platform). The next attempt of that release, when all of
//! these are unchanged, no fault could hit any of its effects and every health read was
//! past its rollout (so it no longer changes with time), is answered from the memo: the
//! same metrics, outcome, reason, requeue and step count, without running the core.
//!
//! Only with [`super::Retention::Timeline`]: full logs and traces need each attempt's inputs
//! and effects, so with [`super::Retention::Full`] every attempt runs.

use std::time::Duration;

use opm_core::effect::{Effect, EffectKind, Metric};
use opm_core::object::{ReleaseKey, ResourceId};
use opm_core::outcome::Outcome;
use opm_core::reason::Reason;

use super::World;

/// What a NoOp attempt did, and what it read to do it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AttemptMemo {
    /// The release's `metadata.resourceVersion` it observed (unique per write).
    release_version: Option<String>,
    /// [`World::epoch`] when it ran.
    epoch: u64,
    /// [`World::store_writes`] when it ran, or when its objects were last found unchanged.
    store_writes: u64,
    /// Every object it checked (drift, health) with its store resource version then.
    objects: Vec<(ResourceId, Option<u64>)>,
    /// The awaited effects' kinds, in order, for the fault check.
    kinds: Vec<EffectKind>,
    /// The metrics it recorded, in order.
    metrics: Vec<Metric>,
    /// How it ended.
    pub(crate) ended: Ended,
}

/// How an attempt ended: its `Done` and the inputs fed to the machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ended {
    pub outcome: Outcome,
    pub reason: Reason,
    pub requeue_after: Option<Duration>,
    pub steps: u32,
}

/// Gathers an attempt's reads while it runs; [`Recording::finish`] makes the memo.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recording {
    /// An effect that writes (or a read this memo cannot vouch for) was seen.
    spoiled: bool,
    objects: Vec<ResourceId>,
    kinds: Vec<EffectKind>,
    metrics: Vec<Metric>,
}

impl Recording {
    /// Notes one effect of the attempt, before the world executes it.
    pub(crate) fn note(&mut self, world: &World, effect: &Effect) {
        if self.spoiled {
            return;
        }
        match effect {
            Effect::EmitEvent { .. } | Effect::Done { .. } => return,
            Effect::RecordMetric { metric } => {
                self.metrics.push(metric.clone());
                return;
            }
            Effect::ResolveSource { .. } | Effect::FetchArtifact { .. } | Effect::Render { .. } => {
            }
            Effect::CheckDrift { objects, .. } => {
                self.objects.extend(objects.iter().map(|o| o.id.clone()));
            }
            Effect::AssessHealth { targets, .. } => {
                // A read before its rollout's end changes with time alone.
                if targets
                    .iter()
                    .any(|t| !world.cluster.rollout_due(&t.id, world.now))
                {
                    self.spoiled = true;
                    return;
                }
                self.objects.extend(targets.iter().map(|t| t.id.clone()));
            }
            _ => {
                self.spoiled = true;
                return;
            }
        }
        self.kinds.push(effect.kind());
    }

    /// The memo of a finished attempt, if it can stand for the next one: a NoOp of an
    /// existing release that met no fault and took no virtual time.
    pub(crate) fn finish(
        self,
        world: &World,
        release_version: Option<String>,
        ended: Ended,
        clean: bool,
    ) -> Option<AttemptMemo> {
        if self.spoiled || !clean || ended.outcome != Outcome::NoOp {
            return None;
        }
        let objects = self
            .objects
            .into_iter()
            .map(|id| {
                let rv = world.cluster.store.get(&id).map(|o| o.resource_version);
                (id, rv)
            })
            .collect();
        Some(AttemptMemo {
            release_version,
            epoch: world.epoch,
            store_writes: world.store_writes,
            objects,
            kinds: self.kinds,
            metrics: self.metrics,
            ended,
        })
    }
}

impl AttemptMemo {
    /// Whether the attempt of `key` now would do exactly what this one did.
    ///
    /// Its health reads were past their rollouts, which only a write of the object (a new
    /// resource version) or a new rollout (a new epoch) starts again; so time alone does not
    /// change them.
    pub(crate) fn holds(
        &self,
        world: &World,
        key: &ReleaseKey,
        release_version: Option<&str>,
    ) -> bool {
        self.epoch == world.epoch
            && self.release_version.as_deref() == release_version
            && (self.store_writes == world.store_writes || self.objects_unchanged(world))
            && self
                .kinds
                .iter()
                .all(|k| !world.schedule.faults.could_hit(*k, key, world.now))
    }

    /// Whether every object it checked still has the resource version it had (or is still
    /// absent): the store was written since, but not these.
    fn objects_unchanged(&self, world: &World) -> bool {
        self.objects
            .iter()
            .all(|(id, rv)| world.cluster.store.get(id).map(|o| o.resource_version) == *rv)
    }

    /// Notes that its objects were found unchanged at `store_writes`, so the next check
    /// need not look them up again unless the store is written in between.
    pub(crate) fn checked_at(&mut self, store_writes: u64) {
        self.store_writes = store_writes;
    }

    /// The metrics the attempt recorded, to record again.
    pub(crate) fn metrics(&self) -> &[Metric] {
        &self.metrics
    }
}
