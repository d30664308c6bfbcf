//! Heartbeats behind `/healthz` (SPEC §22): each watch stream reports its items, attempts
//! report when they start and when each effect completes, and the admission gates report
//! their waiters. The decision is the core's [`opm_core::liveness::assess`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opm_core::liveness::{self, Beats, Unhealthy, WatchBeat};

/// Default of `--health-stall-timeout`: longer than any one effect may take with the
/// default limits (a render or a fetch is cut at 60s, one apply batch at the attempt
/// deadline), so a busy operator is never restarted for being busy.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A queue whose waiters `/healthz` watches: an admission gate
/// (`crate::ops::admission::Admission`). A trait so the gate, which reports its progress
/// here, is not also a dependency of the heartbeats.
pub trait Waiters: Send + Sync {
    /// How many wait, and since when (health clock ms) the oldest of them waits.
    fn waiting(&self) -> (usize, Option<u64>);
}

#[derive(Default)]
struct WatchState {
    ended: bool,
    failing_since_ms: Option<u64>,
}

/// The process's heartbeats, on a monotonic clock started with it.
pub struct Health {
    start: Instant,
    progress_ms: AtomicU64,
    stall_ms: AtomicU64,
    watches: Mutex<BTreeMap<String, WatchState>>,
    gates: Mutex<Vec<Arc<dyn Waiters>>>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            progress_ms: AtomicU64::new(0),
            stall_ms: AtomicU64::new(DEFAULT_STALL_TIMEOUT.as_millis() as u64),
            watches: Mutex::new(BTreeMap::new()),
            gates: Mutex::new(Vec::new()),
        }
    }
}

impl Health {
    /// Milliseconds since the process started (saturating; never panics).
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// How long a watch may fail, or a non-empty queue go without progress.
    pub fn set_stall_timeout(&self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self.stall_ms.store(ms, Ordering::Relaxed);
    }

    /// The current `--health-stall-timeout`.
    pub fn stall_timeout(&self) -> Duration {
        Duration::from_millis(self.stall_ms.load(Ordering::Relaxed))
    }

    /// An attempt started, or one of its effects completed.
    pub fn progress(&self) {
        self.progress_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn watches(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, WatchState>> {
        self.watches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A watch stream `name` is being consumed (it counts from now on).
    pub fn watch_started(&self, name: &str) {
        self.watches()
            .insert(name.to_string(), WatchState::default());
    }

    /// An item of watch `name`: good or an error.
    pub fn watch_item(&self, name: &str, ok: bool) {
        let now = self.now_ms();
        let mut w = self.watches();
        let state = w.entry(name.to_string()).or_default();
        if ok {
            state.failing_since_ms = None;
        } else if state.failing_since_ms.is_none() {
            state.failing_since_ms = Some(now);
        }
    }

    /// The watch stream `name` ended: nothing it feeds will be triggered again.
    pub fn watch_ended(&self, name: &str) {
        self.watches().entry(name.to_string()).or_default().ended = true;
    }

    /// Counts `gate`'s waiters in the heartbeats from now on.
    pub fn add_gate(&self, gate: Arc<dyn Waiters>) {
        self.gates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(gate);
    }

    /// The heartbeats now.
    pub fn beats(&self) -> Beats {
        let mut waiting = 0;
        let mut oldest: Option<u64> = None;
        for g in self.gates.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let (n, since) = g.waiting();
            waiting += n;
            oldest = match (oldest, since) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Beats {
            now_ms: self.now_ms(),
            watches: self
                .watches()
                .iter()
                .map(|(name, s)| WatchBeat {
                    name: name.clone(),
                    ended: s.ended,
                    failing_since_ms: s.failing_since_ms,
                })
                .collect(),
            waiting,
            oldest_waiting_since_ms: oldest,
            last_progress_ms: self.progress_ms.load(Ordering::Relaxed),
        }
    }

    /// The `/healthz` verdict.
    pub fn check(&self) -> Result<(), Vec<Unhealthy>> {
        liveness::assess(&self.beats(), self.stall_timeout())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_watch_fails_the_check_and_a_good_item_clears_a_failure() {
        let h = Health::default();
        h.set_stall_timeout(Duration::ZERO);
        h.watch_started("ModuleRelease");
        assert!(h.check().is_ok());
        h.watch_item("ModuleRelease", false);
        std::thread::sleep(Duration::from_millis(5));
        assert!(h.check().is_err());
        h.watch_item("ModuleRelease", true);
        assert!(h.check().is_ok());
        h.watch_ended("ModuleRelease");
        assert_eq!(
            h.check().unwrap_err()[0].to_string(),
            "the ModuleRelease watch has ended"
        );
    }
}
