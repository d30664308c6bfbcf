//! Read-ahead of OPM renders: batches of releases rendered back to back, before their
//! attempts ask, while the workers apply what the last batch rendered.
//!
//! Rendering ahead inside an attempt's batch ([`super::batch`]) fills each `cue` run, but
//! the attempt that misses the cache still waits for the whole run, and so does every
//! worker that picks a release of that batch meanwhile: with a 16-release OPM batch
//! taking a few hundred milliseconds, those waits, not the CPU, set the pace of a fleet
//! being created (bench/README.md). So when a batch found more releases to take ahead
//! than it had room for, one more batch of them is rendered in the background: in a
//! render turn of the namespace like any other run (fair across namespaces, within
//! `--max-concurrent-renders`), at most one such run per namespace, module version and
//! Platform at a time, and only while the renders done ahead and not yet used stay under
//! a quarter of the render cache, so the read-ahead never evicts what it just made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Opm;
use super::batch::{BatchKey, export_members, keep_ahead};
use crate::cue::module_ref::ModuleRef;
use crate::cue::render::{
    RENDER_CACHE_BYTES, RenderError, RenderGate, RenderKey, Rendered, Renderer,
};

/// Bytes of renders done ahead and not yet used by an attempt, per batch key, past which
/// no more are done ahead (a quarter of the render cache).
const LEAD_BYTES: u64 = (RENDER_CACHE_BYTES / 4) as u64;

/// Batch keys whose read-ahead is remembered; past it the table starts over (a stale
/// entry costs at most one read-ahead run not done).
const MAX_LEADS: usize = 1024;

/// Starts a read-ahead run in the background (the controller's: it owns the runtime and
/// the render gate the run waits on).
pub trait Prefetch: Send + Sync {
    /// Spawns [`Opm::run_prefetch`] for `job`.
    fn spawn(&self, job: PrefetchJob);
}

/// One read-ahead run: releases of `module` in `key`'s namespace through its Platform.
#[derive(Debug, Clone)]
pub struct PrefetchJob {
    module: ModuleRef,
    key: BatchKey,
}

impl PrefetchJob {
    /// The namespace whose render turn the run takes.
    pub fn namespace(&self) -> &str {
        &self.key.namespace
    }
}

/// The read-ahead state of one batch key.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Lead {
    /// A read-ahead run is in flight.
    running: bool,
    /// The last batch found more releases to take ahead than it had room for.
    more: bool,
    /// Renders done ahead that no attempt has used yet, with their sizes.
    unused: HashMap<RenderKey, u64>,
    /// Their bytes, summed.
    bytes: u64,
}

impl Lead {
    /// Whether another read-ahead run should start now: none in flight, more releases
    /// waiting, and what was done ahead already under [`LEAD_BYTES`].
    fn should_run(&self) -> bool {
        !self.running && self.more && self.bytes < LEAD_BYTES
    }

    fn keep(&mut self, renders: impl IntoIterator<Item = (RenderKey, u64)>) {
        for (key, bytes) in renders {
            if let Some(old) = self.unused.insert(key, bytes) {
                self.bytes -= old;
            }
            self.bytes += bytes;
        }
    }

    fn used(&mut self, key: &RenderKey) -> bool {
        match self.unused.remove(key) {
            Some(bytes) => {
                self.bytes -= bytes;
                true
            }
            None => false,
        }
    }
}

/// The read-ahead state of every batch key.
#[derive(Default)]
pub(super) struct Leads {
    state: Mutex<HashMap<BatchKey, Lead>>,
}

impl Leads {
    fn with<T>(&self, key: &BatchKey, f: impl FnOnce(&mut Lead) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.len() >= MAX_LEADS && !state.contains_key(key) {
            state.retain(|_, lead| lead.running);
        }
        f(state.entry(key.clone()).or_default())
    }

    /// A batch of `key` kept `renders` done ahead; `more`: it took as many as it had room
    /// for, so more may be waiting.
    pub(super) fn kept(&self, key: &BatchKey, renders: Vec<(RenderKey, u64)>, more: bool) {
        self.with(key, |lead| {
            lead.keep(renders);
            lead.more = more;
        });
    }

    /// An attempt found `render` in the cache: whether it was one done ahead.
    pub(super) fn used(&self, key: &BatchKey, render: &RenderKey) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.get_mut(key).is_some_and(|lead| lead.used(render))
    }

    /// Marks a read-ahead run of `key` started when one should start now.
    fn claim(&self, key: &BatchKey) -> bool {
        self.with(key, |lead| {
            let go = lead.should_run();
            lead.running |= go;
            go
        })
    }

    fn finished(&self, key: &BatchKey, more: bool) {
        self.with(key, |lead| {
            lead.running = false;
            lead.more = more;
        });
    }
}

impl Opm {
    /// A cached render of `key`; when it was one done ahead, the read-ahead may go on
    /// (the prefetch module).
    pub(super) fn cached(
        &self,
        renderer: &Renderer,
        module: &ModuleRef,
        bkey: &BatchKey,
        key: &RenderKey,
    ) -> Option<Result<Arc<Rendered>, RenderError>> {
        let hit = renderer.cached_render(key)?;
        if self.leads.used(bkey, key) {
            self.read_ahead(module, bkey);
        }
        Some(hit)
    }

    /// Renders ahead in the background through `spawner` from now on (the controller's);
    /// without one, renders are done ahead only inside attempts' batches.
    pub fn prefetch_with(&self, spawner: Arc<dyn Prefetch>) {
        let _ = self.spawner.set(spawner);
    }

    /// Starts a read-ahead run of `key` when its lead says so.
    pub(super) fn read_ahead(&self, module: &ModuleRef, key: &BatchKey) {
        let Some(spawner) = self.spawner.get() else {
            return;
        };
        if self.leads.claim(key) {
            spawner.spawn(PrefetchJob {
                module: module.clone(),
                key: key.clone(),
            });
        }
    }

    /// One read-ahead run, then the next while its lead allows (see the module docs).
    pub async fn run_prefetch<G: RenderGate>(
        &self,
        renderer: &Renderer,
        job: PrefetchJob,
        gate: &G,
    ) {
        let more = self.prefetch_once(renderer, &job, gate).await;
        self.leads.finished(&job.key, more);
        self.read_ahead(&job.module, &job.key);
    }

    /// Renders up to `max_batch` releases ahead in one run; whether it filled the batch.
    async fn prefetch_once<G: RenderGate>(
        &self,
        renderer: &Renderer,
        job: &PrefetchJob,
        gate: &G,
    ) -> bool {
        let _turn = gate.turn(&job.key.namespace).await;
        // The Platform may have changed while the run waited: its renders key on the new
        // digest, and these would never be used.
        let Ok((platform, digest)) = self.ready() else {
            return false;
        };
        if digest != job.key.platform {
            return false;
        }
        let max = renderer.config().max_batch;
        let (ahead, full) = self
            .ahead_members(renderer, &job.module, &job.key.namespace, &digest, &[], max)
            .await;
        if ahead.is_empty() {
            return false;
        }
        let inputs: Vec<_> = ahead.iter().map(|a| (&a.values, &a.identity)).collect();
        let split = export_members(renderer, &job.module, &platform, &inputs, None).await;
        let Some(mut all) = split else {
            tracing::debug!(module = %job.module.path, namespace = %job.key.namespace, "OPM read-ahead batch failed; its releases render in their own attempts");
            self.refuse_ahead(ahead);
            return false;
        };
        renderer.note_batch(ahead.len() as u64);
        renderer.note_read_ahead();
        let kept = keep_ahead(renderer, &mut all, 0, ahead);
        self.leads.kept(&job.key, kept, full);
        full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> RenderKey {
        RenderKey {
            source_digest: "module:m@v1".into(),
            config_digest: format!("{i}"),
            path: ".".into(),
            cue_version: "v".into(),
        }
    }

    #[test]
    fn a_lead_runs_only_when_more_wait_and_none_is_in_flight() {
        let mut lead = Lead::default();
        assert!(!lead.should_run(), "nothing known to wait");
        lead.more = true;
        assert!(lead.should_run());
        lead.running = true;
        assert!(!lead.should_run(), "one run at a time");
    }

    #[test]
    fn renders_done_ahead_and_unused_past_a_quarter_of_the_cache_stop_the_read_ahead() {
        let mut lead = Lead {
            more: true,
            ..Lead::default()
        };
        lead.keep([(key(1), LEAD_BYTES / 2), (key(2), LEAD_BYTES / 2)]);
        assert_eq!(lead.bytes, LEAD_BYTES);
        assert!(!lead.should_run(), "a full lead waits for the attempts");
        assert!(lead.used(&key(1)));
        assert!(!lead.used(&key(1)), "a render is used once");
        assert!(!lead.used(&key(3)), "never done ahead");
        assert_eq!(lead.bytes, LEAD_BYTES / 2);
        assert!(lead.should_run(), "an attempt used one: room again");
        // The same render kept twice counts once.
        lead.keep([(key(2), 10)]);
        assert_eq!(lead.bytes, 10);
    }

    #[test]
    fn claim_starts_one_run_and_finished_lets_the_next_start() {
        let leads = Leads::default();
        let k = BatchKey::for_tests("ns");
        assert!(!leads.claim(&k), "no batch said more wait");
        leads.kept(&k, vec![(key(1), 1)], true);
        assert!(leads.claim(&k));
        assert!(!leads.claim(&k), "already running");
        leads.finished(&k, true);
        assert!(leads.claim(&k));
        leads.finished(&k, false);
        assert!(!leads.claim(&k), "the last run found no more");
    }
}
