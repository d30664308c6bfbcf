//! The work queue's last step: an attempt waits here for a slot before it runs, so at most
//! `--concurrency` attempts of a kind run at once and at most
//! `--max-concurrent-per-namespace` of them from one namespace (SPEC §24). Which waiter
//! goes next is the core's [`FairQueue`]; this module only parks and wakes tasks.
//!
//! The waiters are the tasks of the operator's own work queue
//! (`crate::controller` `queue.rs`), not kube-runtime's reconciles: kube-runtime's limit
//! would pick the next key by due time alone (a tenant with many slow attempts fills every
//! worker), and with it off, reconciles waiting here cost its runner O(waiters) per wake-up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opm_core::fairness::{FairQueue, Limits, Ticket};
use tokio::sync::oneshot;

use crate::ops::health::{Health, Waiters};

/// A fair gate for one controller's attempts.
pub struct Admission {
    state: Mutex<State>,
    health: Arc<Health>,
}

struct State {
    queue: FairQueue,
    /// Waiters not yet admitted: their wake-up and since when they wait (health clock ms).
    parked: HashMap<Ticket, (oneshot::Sender<()>, u64)>,
    next_ticket: Ticket,
}

impl State {
    fn wake(&mut self, tickets: Vec<Ticket>) {
        for t in tickets {
            if let Some((tx, _)) = self.parked.remove(&t) {
                // A dropped receiver is handled by its guard (it sees itself admitted).
                let _ = tx.send(());
            }
        }
    }
}

/// A held slot; dropping it lets the next waiter in.
pub struct Slot {
    admission: Arc<Admission>,
    namespace: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.admission.release(&self.namespace);
    }
}

/// Cleans up after a waiter whose future was dropped (shutdown, cancelled reconcile).
struct Waiting {
    admission: Arc<Admission>,
    ticket: Ticket,
    namespace: String,
    done: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut s = self.admission.lock();
        if s.parked.remove(&self.ticket).is_some() {
            let started = s.queue.cancel(self.ticket);
            s.wake(started);
        } else {
            // Admitted, but never took the slot.
            let started = s.queue.finish(&self.namespace);
            s.wake(started);
        }
    }
}

impl Admission {
    pub fn new(limits: Limits, health: Arc<Health>) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                queue: FairQueue::new(limits),
                parked: HashMap::new(),
                next_ticket: 0,
            }),
            health,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a slot for an attempt in `namespace`.
    pub async fn acquire(self: &Arc<Self>, namespace: &str) -> Slot {
        let (rx, mut guard) = {
            let mut s = self.lock();
            let ticket = s.next_ticket;
            s.next_ticket += 1;
            let (tx, rx) = oneshot::channel();
            s.parked.insert(ticket, (tx, self.health.now_ms()));
            let started = s.queue.push(ticket, namespace);
            s.wake(started);
            let guard = Waiting {
                admission: self.clone(),
                ticket,
                namespace: namespace.to_string(),
                done: false,
            };
            (rx, guard)
        };
        // The sender lives in `parked` until this ticket is admitted.
        let _ = rx.await;
        guard.done = true;
        self.health.progress();
        Slot {
            admission: self.clone(),
            namespace: namespace.to_string(),
        }
    }

    fn release(&self, namespace: &str) {
        let mut s = self.lock();
        let started = s.queue.finish(namespace);
        s.wake(started);
        drop(s);
        self.health.progress();
    }
    /// (running, waiting) now.
    pub fn load(&self) -> (usize, usize) {
        let s = self.lock();
        (s.queue.running(), s.queue.waiting())
    }
}

impl Waiters for Admission {
    /// (waiting, since when the oldest waits), for `/healthz`.
    fn waiting(&self) -> (usize, Option<u64>) {
        let s = self.lock();
        (
            s.parked.len(),
            s.parked.values().map(|(_, since)| *since).min(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(total: usize, per: usize) -> Arc<Admission> {
        Admission::new(
            Limits {
                total,
                per_namespace: per,
            },
            Arc::new(Health::default()),
        )
    }

    #[tokio::test]
    async fn a_dropped_waiter_gives_back_its_place() {
        let g = gate(1, 1);
        let held = g.acquire("a").await;
        let waiter = tokio::spawn({
            let g = g.clone();
            async move {
                let _slot = g.acquire("b").await;
            }
        });
        // Let the waiter park, then cancel it.
        while g.load().1 == 0 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(g.load(), (1, 0));
        drop(held);
        assert_eq!(g.load(), (0, 0));
        // The gate still admits.
        let _again = g.acquire("c").await;
        assert_eq!(g.load(), (1, 0));
    }

    #[tokio::test]
    async fn a_saturated_namespace_waits_and_another_gets_the_free_slot() {
        let g = gate(2, 1);
        let a1 = g.acquire("a").await;
        let a2 = tokio::spawn({
            let g = g.clone();
            async move { g.acquire("a").await }
        });
        while g.load().1 == 0 {
            tokio::task::yield_now().await;
        }
        // The second worker is free, but A is at its cap: B gets it.
        let b = g.acquire("b").await;
        assert_eq!(g.load(), (2, 1));
        drop(a1);
        let a2 = a2.await.unwrap();
        assert_eq!(g.load(), (2, 0));
        drop((a2, b));
        assert_eq!(g.load(), (0, 0));
    }
}
