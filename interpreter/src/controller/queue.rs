//! The operator's own work queue for one release kind: which release waits for a slot,
//! runs, or sleeps until its requeue.
//!
//! kube-runtime's `Controller` only tells us that a release was triggered; its reconcile
//! hands the key here and returns at once. Why not let the attempt run inside the
//! reconcile: kube-runtime keeps one slot per running reconcile and polls **every** slot's
//! `JoinHandle` each time its runner is polled. With its own limit off (so that the fair
//! gate of SPEC §24, not kube-runtime's due-time order, picks the next attempt), the whole
//! fleet sat in those slots at start-up, waiting at the gate: O(N) per runner poll, O(N²)
//! per converge, a third of the controller's CPU at 10 000 releases, and a ~19 KB task per
//! waiter. Here a waiting release is one small task parked on the gate, woken once, and a
//! sleeping one is a timer.
//!
//! What kube-runtime guaranteed is kept: at most one attempt per release at a time; a
//! trigger while it runs runs it once more afterwards (back of the fair queue); a trigger
//! while it sleeps until a requeue runs it now, and the requeue is dropped (the attempt
//! sets the next one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use opm_core::ReleaseKey;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::context::Shutdown;
use crate::ops::admission::Admission;

/// Runs one attempt of a release and says when to run it again (`None`: on its next
/// trigger only).
pub(super) type Runner =
    Arc<dyn Fn(ReleaseKey) -> BoxFuture<'static, Option<Duration>> + Send + Sync>;

/// Where a release is in the queue. A release that is none of these has no entry.
enum State {
    /// Triggered: its task waits at the gate.
    Waiting,
    /// Its attempt runs; `again` when it was triggered meanwhile.
    Running { again: bool },
    /// Its attempt asked to run again later: a timer task, cancelled by an earlier trigger.
    Sleeping { token: u64, timer: AbortHandle },
}

/// The attempts of one kind.
pub(super) struct Attempts {
    gate: Arc<Admission>,
    run: Runner,
    shutdown: Shutdown,
    entries: Mutex<Entries>,
    /// Attempts running now, so shutdown can wait for them.
    running: watch::Sender<usize>,
}

#[derive(Default)]
struct Entries {
    states: HashMap<ReleaseKey, State>,
    next_token: u64,
}

impl Attempts {
    pub(super) fn new(gate: Arc<Admission>, run: Runner, shutdown: Shutdown) -> Arc<Self> {
        Arc::new(Self {
            gate,
            run,
            shutdown,
            entries: Mutex::new(Entries::default()),
            running: watch::Sender::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The release should have an attempt: queue it unless it already waits, or mark it to
    /// run again when it is running.
    pub(super) fn trigger(self: &Arc<Self>, key: ReleaseKey) {
        if self.shutdown.peek().is_some() {
            return;
        }
        let mut entries = self.lock();
        match entries.states.get_mut(&key) {
            Some(State::Waiting) => {}
            Some(State::Running { again }) => *again = true,
            Some(State::Sleeping { timer, .. }) => {
                timer.abort();
                entries.states.insert(key.clone(), State::Waiting);
                tokio::spawn(self.clone().activate(key));
            }
            None => {
                entries.states.insert(key.clone(), State::Waiting);
                tokio::spawn(self.clone().activate(key));
            }
        }
    }

    /// Waits for a slot and runs the attempt, again while it was re-triggered meanwhile;
    /// then sleeps until the requeue it asked for, or forgets the release.
    ///
    /// Boxed (here and in [`Self::sleep`]): each starts the other.
    fn activate(self: Arc<Self>, key: ReleaseKey) -> BoxFuture<'static, ()> {
        async move { self.activate_now(key).await }.boxed()
    }

    async fn activate_now(self: Arc<Self>, key: ReleaseKey) {
        loop {
            let slot = tokio::select! {
                slot = self.gate.acquire(&key.namespace) => slot,
                () = self.shutdown.clone() => {
                    self.lock().states.remove(&key);
                    return;
                }
            };
            self.lock()
                .states
                .insert(key.clone(), State::Running { again: false });
            self.running.send_modify(|n| *n += 1);
            let next = (self.run)(key.clone()).await;
            self.running.send_modify(|n| *n -= 1);
            drop(slot);

            let mut entries = self.lock();
            if let Some(State::Running { again: true }) = entries.states.get(&key) {
                entries.states.insert(key.clone(), State::Waiting);
                continue;
            }
            match next {
                Some(delay) if self.shutdown.peek().is_none() => {
                    let token = entries.next_token;
                    entries.next_token += 1;
                    let timer =
                        tokio::spawn(self.clone().sleep(key.clone(), token, delay)).abort_handle();
                    entries.states.insert(key, State::Sleeping { token, timer });
                }
                _ => {
                    entries.states.remove(&key);
                }
            }
            return;
        }
    }

    /// The timer of a requeue: when it is still the release's current one, the release
    /// waits for a slot again.
    fn sleep(
        self: Arc<Self>,
        key: ReleaseKey,
        token: u64,
        delay: Duration,
    ) -> BoxFuture<'static, ()> {
        async move { self.sleep_now(key, token, delay).await }.boxed()
    }

    async fn sleep_now(self: Arc<Self>, key: ReleaseKey, token: u64, delay: Duration) {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = self.shutdown.clone() => return,
        }
        {
            let mut entries = self.lock();
            match entries.states.get(&key) {
                Some(State::Sleeping { token: t, .. }) if *t == token => {
                    entries.states.insert(key.clone(), State::Waiting);
                }
                // A trigger came first and took over.
                _ => return,
            }
        }
        self.activate(key).await;
    }

    /// Releases waiting, running or sleeping now.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().states.len()
    }

    /// After shutdown: resolves once every running attempt has finished (waiters and
    /// timers end at shutdown without running).
    pub(super) async fn drained(&self) {
        let _ = self.running.subscribe().wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use opm_core::Kind;
    use opm_core::fairness::Limits;
    use tokio::sync::{Notify, oneshot};

    use super::*;
    use crate::ops::health::Health;

    fn key(name: &str) -> ReleaseKey {
        ReleaseKey {
            kind: Kind::Release,
            namespace: "a".into(),
            name: name.into(),
        }
    }

    fn gate(total: usize) -> Arc<Admission> {
        Admission::new(
            Limits {
                total,
                per_namespace: total,
            },
            Arc::new(Health::default()),
        )
    }

    fn never() -> (oneshot::Sender<()>, Shutdown) {
        let (tx, rx) = oneshot::channel::<()>();
        (tx, super::super::controller::shutdown_on(rx.map(|_| ())))
    }

    /// A runner that counts attempts, holds each until `release` is notified, and then
    /// asks for the next of `next` (the last one repeats).
    struct Probe {
        runs: AtomicUsize,
        release: Notify,
        started: Notify,
        next: Mutex<Vec<Option<Duration>>>,
    }

    fn runner(probe: Arc<Probe>) -> Runner {
        Arc::new(move |_key| {
            let probe = probe.clone();
            async move {
                probe.runs.fetch_add(1, Ordering::SeqCst);
                probe.started.notify_one();
                probe.release.notified().await;
                let mut next = probe.next.lock().unwrap();
                if next.len() > 1 {
                    next.remove(0)
                } else {
                    next[0]
                }
            }
            .boxed()
        })
    }

    fn probe(next: &[Option<Duration>]) -> Arc<Probe> {
        Arc::new(Probe {
            runs: AtomicUsize::new(0),
            release: Notify::new(),
            started: Notify::new(),
            next: Mutex::new(next.to_vec()),
        })
    }

    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn triggers_while_waiting_are_one_attempt_and_while_running_one_more() {
        let (_keep, shutdown) = never();
        let p = probe(&[None]);
        let q = Attempts::new(gate(1), runner(p.clone()), shutdown);
        q.trigger(key("r"));
        q.trigger(key("r"));
        p.started.notified().await;
        assert_eq!(p.runs.load(Ordering::SeqCst), 1);
        // Running: two triggers ask for exactly one more attempt.
        q.trigger(key("r"));
        q.trigger(key("r"));
        p.release.notify_one();
        p.started.notified().await;
        assert_eq!(p.runs.load(Ordering::SeqCst), 2);
        p.release.notify_one();
        settle().await;
        assert_eq!(p.runs.load(Ordering::SeqCst), 2);
        assert_eq!(q.tracked(), 0, "an attempt without a requeue is forgotten");
    }

    #[tokio::test]
    async fn a_requeue_runs_after_its_delay_and_a_trigger_replaces_it() {
        let (_keep, shutdown) = never();
        let ms = Duration::from_millis;
        // First attempt: again in 50 ms; second: in 300 ms; then not before an hour.
        let p = probe(&[Some(ms(50)), Some(ms(300)), Some(Duration::from_secs(3600))]);
        let q = Attempts::new(gate(1), runner(p.clone()), shutdown);
        q.trigger(key("r"));
        p.started.notified().await;
        p.release.notify_one();
        // The requeue runs by itself.
        p.started.notified().await;
        assert_eq!(p.runs.load(Ordering::SeqCst), 2, "the requeue ran");
        p.release.notify_one();
        settle().await;
        assert_eq!(q.tracked(), 1, "sleeping until its 300 ms requeue");

        // A trigger during that sleep runs at once; its attempt asks for an hour, and the
        // 300 ms timer it replaced never runs.
        q.trigger(key("r"));
        p.started.notified().await;
        assert_eq!(p.runs.load(Ordering::SeqCst), 3);
        p.release.notify_one();
        tokio::time::sleep(ms(600)).await;
        assert_eq!(
            p.runs.load(Ordering::SeqCst),
            3,
            "the replaced requeue did not run"
        );
        assert_eq!(q.tracked(), 1);
    }

    #[tokio::test]
    async fn waiters_hold_no_slot_and_shutdown_waits_only_for_running_attempts() {
        let (stop, shutdown) = never();
        let p = probe(&[None]);
        let q = Attempts::new(gate(1), runner(p.clone()), shutdown);
        for i in 0..100 {
            q.trigger(key(&format!("r{i}")));
        }
        p.started.notified().await;
        for _ in 0..500 {
            if q.gate.load().1 == 99 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(p.runs.load(Ordering::SeqCst), 1);
        assert_eq!(
            q.gate.load(),
            (1, 99),
            "one runs, the others wait at the gate"
        );
        let _ = stop.send(());
        let drained = tokio::spawn({
            let q = q.clone();
            async move { q.drained().await }
        });
        settle().await;
        assert!(!drained.is_finished(), "the running attempt is not cut off");
        p.release.notify_one();
        drained.await.unwrap();
        assert_eq!(
            p.runs.load(Ordering::SeqCst),
            1,
            "waiters did not start at shutdown"
        );
        assert_eq!(q.gate.load(), (0, 0));
        q.trigger(key("late"));
        settle().await;
        assert_eq!(
            p.runs.load(Ordering::SeqCst),
            1,
            "no attempt starts after shutdown"
        );
    }
}
