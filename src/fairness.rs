//! Which queued attempt runs next (SPEC §24: `--max-concurrent-per-namespace`).
//!
//! A tenant that fills the workers with slow attempts (a CPU-bomb package that runs until
//! the render deadline, retried forever) must not starve the other namespaces. The
//! interpreter asks this queue for a slot before each attempt: at most `total` attempts run
//! at once, at most `per_namespace` of them from one namespace, and when a slot frees the
//! waiter whose namespace has the fewest attempts in flight goes first (the oldest among
//! equals). A saturated namespace's waiters stay queued while other namespaces go first.
//!
//! Pure: no clock, no locks, no async; the interpreter wraps it in a mutex and wakes the
//! tickets it returns.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Bounds on attempts in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Attempts in flight at once; 0 = unbounded.
    pub total: usize,
    /// Attempts in flight per namespace; 0 = unbounded.
    pub per_namespace: usize,
}

impl Limits {
    /// `--max-concurrent-per-namespace` when not given: half of `--concurrency`, at least 1
    /// (unbounded when the concurrency is).
    pub fn with_default_per_namespace(total: usize, per_namespace: Option<usize>) -> Self {
        let per_namespace =
            per_namespace.unwrap_or(if total == 0 { 0 } else { (total / 2).max(1) });
        Self {
            total,
            per_namespace,
        }
    }
}

/// A waiter's identity, chosen by the caller (unique while it waits or runs).
pub type Ticket = u64;

/// Waiting tickets per namespace (in arrival order) and the attempts in flight per
/// namespace, with an ordered index of the namespaces that have waiters, so choosing the
/// next waiter costs O(log namespaces) rather than a scan of every waiter: with 10 000
/// releases queued at start-up, a scan per push and per finish made each attempt's
/// admission O(fleet).
#[derive(Debug, Clone)]
pub struct FairQueue {
    limits: Limits,
    /// Each namespace's waiters, oldest first, with their arrival number.
    waiting: BTreeMap<String, VecDeque<(u64, Ticket)>>,
    /// Where each waiting ticket waits (for `cancel`).
    tickets: BTreeMap<Ticket, (String, u64)>,
    /// (attempts in flight, arrival of its oldest waiter, namespace) of every namespace
    /// with waiters: the first entry is the next to start.
    ready: BTreeSet<(usize, u64, String)>,
    running: BTreeMap<String, usize>,
    running_total: usize,
    arrivals: u64,
}

impl FairQueue {
    /// An empty queue that will enforce `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            waiting: BTreeMap::new(),
            tickets: BTreeMap::new(),
            ready: BTreeSet::new(),
            running: BTreeMap::new(),
            running_total: 0,
            arrivals: 0,
        }
    }

    /// The limits it enforces, for the flags' echo in logs.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Tickets waiting.
    pub fn waiting(&self) -> usize {
        self.tickets.len()
    }

    /// Attempts in flight.
    pub fn running(&self) -> usize {
        self.running_total
    }

    /// Attempts in flight from `namespace`.
    pub fn running_in(&self, namespace: &str) -> usize {
        self.running.get(namespace).copied().unwrap_or(0)
    }

    /// Queues `ticket`; returns the tickets that may start now (possibly this one).
    pub fn push(&mut self, ticket: Ticket, namespace: &str) -> Vec<Ticket> {
        self.unindex(namespace);
        let arrival = self.arrivals;
        self.arrivals += 1;
        self.waiting
            .entry(namespace.to_string())
            .or_default()
            .push_back((arrival, ticket));
        self.tickets
            .insert(ticket, (namespace.to_string(), arrival));
        self.index(namespace);
        self.admit()
    }

    /// Drops a waiting `ticket` (its waiter went away); returns the tickets that may start.
    pub fn cancel(&mut self, ticket: Ticket) -> Vec<Ticket> {
        if let Some((namespace, arrival)) = self.tickets.remove(&ticket) {
            self.unindex(&namespace);
            if let Some(queue) = self.waiting.get_mut(&namespace) {
                queue.retain(|(a, _)| *a != arrival);
                if queue.is_empty() {
                    self.waiting.remove(&namespace);
                }
            }
            self.index(&namespace);
        }
        self.admit()
    }

    /// An attempt in `namespace` ended; returns the tickets that may start now.
    pub fn finish(&mut self, namespace: &str) -> Vec<Ticket> {
        if self.running.contains_key(namespace) {
            self.unindex(namespace);
            if let Some(n) = self.running.get_mut(namespace) {
                *n = n.saturating_sub(1);
                self.running_total = self.running_total.saturating_sub(1);
                if *n == 0 {
                    self.running.remove(namespace);
                }
            }
            self.index(namespace);
        }
        self.admit()
    }

    fn admit(&mut self) -> Vec<Ticket> {
        let mut started = Vec::new();
        while let Some(namespace) = self.next_namespace() {
            self.unindex(&namespace);
            let Some((_, ticket)) = self
                .waiting
                .get_mut(&namespace)
                .and_then(VecDeque::pop_front)
            else {
                break;
            };
            if self.waiting.get(&namespace).is_some_and(VecDeque::is_empty) {
                self.waiting.remove(&namespace);
            }
            self.tickets.remove(&ticket);
            *self.running.entry(namespace.clone()).or_insert(0) += 1;
            self.running_total += 1;
            self.index(&namespace);
            started.push(ticket);
        }
        started
    }

    /// The ticket to start next, if any may start: none when `total` are in flight; else
    /// among the waiters whose namespace is under `per_namespace`, the one whose namespace
    /// has the fewest in flight, the oldest among equals.
    pub fn next(&self) -> Option<Ticket> {
        let namespace = self.next_namespace()?;
        self.waiting.get(&namespace)?.front().map(|(_, t)| *t)
    }

    fn next_namespace(&self) -> Option<String> {
        let l = self.limits;
        if l.total != 0 && self.running_total >= l.total {
            return None;
        }
        let (running, _, namespace) = self.ready.first()?;
        (l.per_namespace == 0 || *running < l.per_namespace).then(|| namespace.clone())
    }

    /// The index entry of `namespace` as its state is now, if it has waiters.
    fn entry(&self, namespace: &str) -> Option<(usize, u64, String)> {
        let (arrival, _) = self.waiting.get(namespace)?.front()?;
        Some((self.running_in(namespace), *arrival, namespace.to_string()))
    }

    fn unindex(&mut self, namespace: &str) {
        if let Some(e) = self.entry(namespace) {
            self.ready.remove(&e);
        }
    }

    fn index(&mut self, namespace: &str) {
        if let Some(e) = self.entry(namespace) {
            self.ready.insert(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(total: usize, per: usize) -> FairQueue {
        FairQueue::new(Limits {
            total,
            per_namespace: per,
        })
    }

    #[test]
    fn default_per_namespace_is_half_at_least_one() {
        assert_eq!(Limits::with_default_per_namespace(4, None).per_namespace, 2);
        assert_eq!(Limits::with_default_per_namespace(5, None).per_namespace, 2);
        assert_eq!(Limits::with_default_per_namespace(1, None).per_namespace, 1);
        assert_eq!(Limits::with_default_per_namespace(0, None).per_namespace, 0);
        assert_eq!(
            Limits::with_default_per_namespace(4, Some(3)).per_namespace,
            3
        );
    }

    #[test]
    fn a_saturated_namespace_waits_while_another_goes_first() {
        let mut q = q(4, 2);
        // Tenant A queues eight slow attempts first.
        let mut started = Vec::new();
        for t in 0..8 {
            started.extend(q.push(t, "a"));
        }
        assert_eq!(started, vec![0, 1], "A is capped at two");
        // B arrives last and starts at once: two workers are still free.
        assert_eq!(q.push(100, "b"), vec![100]);
        assert_eq!(q.running(), 3);
        // A finishing lets the next A in, never more than two.
        assert_eq!(q.finish("a"), vec![2]);
        assert_eq!(q.running_in("a"), 2);
    }

    #[test]
    fn when_the_workers_are_full_the_emptier_namespace_goes_next() {
        let mut q = q(2, 2);
        assert_eq!(q.push(1, "a"), vec![1]);
        assert_eq!(q.push(2, "a"), vec![2]);
        assert!(q.push(3, "a").is_empty());
        assert!(q.push(4, "a").is_empty());
        assert!(q.push(5, "b").is_empty(), "no free worker");
        // A slot frees: B (none in flight) beats the older A waiters.
        assert_eq!(q.finish("a"), vec![5]);
        assert_eq!(q.finish("b"), vec![3]);
        assert_eq!(q.finish("a"), vec![4]);
        assert_eq!(q.waiting(), 0);
    }

    #[test]
    fn the_oldest_waiter_goes_first_among_equals() {
        let mut q = q(1, 1);
        assert_eq!(q.push(1, "a"), vec![1]);
        assert!(q.push(2, "b").is_empty());
        assert!(q.push(3, "c").is_empty());
        assert_eq!(q.finish("a"), vec![2]);
        assert_eq!(q.finish("b"), vec![3]);
    }

    #[test]
    fn cancelling_a_waiter_frees_its_place() {
        let mut q = q(1, 1);
        assert_eq!(q.push(1, "a"), vec![1]);
        assert!(q.push(2, "b").is_empty());
        assert!(q.cancel(2).is_empty());
        assert_eq!(q.waiting(), 0);
        assert!(q.finish("a").is_empty());
        assert_eq!(q.running(), 0);
    }

    #[test]
    fn unbounded_limits_start_everything_and_stray_finishes_are_ignored() {
        let mut q = q(0, 0);
        let started: Vec<_> = (0..10).flat_map(|t| q.push(t, "a")).collect();
        assert_eq!(started.len(), 10);
        assert!(q.finish("never-started").is_empty());
        assert_eq!(q.running(), 10);
    }

    #[test]
    fn the_bounds_always_hold() {
        // A deterministic pseudo-random walk of pushes and finishes.
        let mut q = q(4, 2);
        let mut running: Vec<String> = Vec::new();
        let mut seed = 7u64;
        for t in 0..2000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let ns = format!("ns{}", (seed >> 33) % 3);
            if (seed >> 40).is_multiple_of(2) || running.is_empty() {
                q.push(t, &ns);
            } else {
                let i = ((seed >> 20) as usize) % running.len();
                q.finish(&running[i]);
            }
            running = q
                .running
                .iter()
                .flat_map(|(ns, n)| std::iter::repeat_n(ns.clone(), *n))
                .collect();
            assert!(q.running() <= 4);
            assert!(q.running.values().all(|n| *n <= 2));
            // Work-conserving: nothing that could start is left waiting.
            assert!(q.next().is_none());
        }
    }

    /// The queue as it was before the index: one scan of every waiter per choice. The
    /// indexed queue must start exactly the same tickets in the same order.
    struct Scan {
        limits: Limits,
        waiting: VecDeque<(Ticket, String)>,
        running: BTreeMap<String, usize>,
        total: usize,
    }

    impl Scan {
        fn admit(&mut self) -> Vec<Ticket> {
            let mut started = Vec::new();
            loop {
                let l = self.limits;
                if l.total != 0 && self.total >= l.total {
                    break;
                }
                let ran = |ns: &String| self.running.get(ns).copied().unwrap_or(0);
                let Some(i) = self
                    .waiting
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, ns))| l.per_namespace == 0 || ran(ns) < l.per_namespace)
                    .min_by_key(|(i, (_, ns))| (ran(ns), *i))
                    .map(|(i, _)| i)
                else {
                    break;
                };
                let (t, ns) = self.waiting.remove(i).expect("an index from the scan");
                *self.running.entry(ns).or_insert(0) += 1;
                self.total += 1;
                started.push(t);
            }
            started
        }
    }

    #[test]
    fn the_index_starts_the_same_tickets_as_a_scan_of_every_waiter() {
        for (total, per) in [(4, 2), (2, 1), (3, 0), (0, 2), (5, 3)] {
            let mut q = q(total, per);
            let limits = q.limits();
            let mut scan = Scan {
                limits,
                waiting: VecDeque::new(),
                running: BTreeMap::new(),
                total: 0,
            };
            let mut seed = 11u64 + total as u64;
            for t in 0..3000u64 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let ns = format!("ns{}", (seed >> 33) % 5);
                let (a, b) = match (seed >> 40) % 4 {
                    0 | 1 => {
                        scan.waiting.push_back((t, ns.clone()));
                        (q.push(t, &ns), scan.admit())
                    }
                    2 => {
                        let victim = t.saturating_sub((seed >> 50) % 20);
                        scan.waiting.retain(|(w, _)| *w != victim);
                        (q.cancel(victim), scan.admit())
                    }
                    _ => {
                        if let Some(n) = scan.running.get_mut(&ns) {
                            *n -= 1;
                            scan.total -= 1;
                            if *n == 0 {
                                scan.running.remove(&ns);
                            }
                        }
                        (q.finish(&ns), scan.admit())
                    }
                };
                assert_eq!(a, b, "step {t} ({total}, {per})");
                assert_eq!(q.waiting(), scan.waiting.len());
                assert_eq!(q.running(), scan.total);
            }
        }
    }
}
