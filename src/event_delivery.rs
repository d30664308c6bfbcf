//! The events webhook's delivery policy (SPEC §32): which event goes out next, when a
//! failed one is tried again, what a receiver's answer means, and which event is dropped
//! when the queue is full. The interpreter's sender (`ops/events_webhook`) only POSTs what
//! [`Outbox::poll`] hands it and reports the answer with [`Outbox::handle_answer`].
//!
//! The guarantees, and why:
//! - **Never blocks a reconcile.** [`Outbox::push`] is a queue insert: it never waits for
//!   the receiver, and a full queue makes room by dropping (counted), never by waiting.
//! - **In order, once each.** One event is in flight at a time, the oldest first; the next
//!   goes only after the receiver has taken it (2xx) or refused it for good. Every release's
//!   events therefore arrive in the order they were recorded. A receiver that took an event
//!   but whose answer was lost gets it again: at least once, with the same `id` to
//!   de-duplicate on (CloudEvents' rule).
//! - **Bounded.** At most `queue_size` events wait; when another comes, the oldest one not
//!   being sent right now is dropped (its news is the stalest) and counted as
//!   [`DropReason::QueueFull`].
//! - **Backoff belongs to the receiver, not to one event.** Consecutive failures double the
//!   wait (from [`FIRST_BACKOFF`], at most `max_backoff`); dropping the head of the queue
//!   keeps the wait, so a receiver that is down is not hammered once per new event. The
//!   first delivery resets it.
//!
//! Time enters as `now` on each call; nothing here reads a clock.

use std::collections::VecDeque;
use std::time::Duration;

use jiff::Timestamp;

/// Events held by default (`--events-webhook-queue-size`).
pub const DEFAULT_QUEUE_SIZE: usize = 10_000;
/// The largest `--events-webhook-queue-size`: an event is a few KiB at most (its note is
/// cut at 1 KiB), so the queue stays within a few hundred MiB even when full.
pub const MAX_QUEUE_SIZE: usize = 100_000;
/// The longest wait between two tries by default (`--events-webhook-max-backoff`).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The wait after the first failure (or `max_backoff`, if shorter); it doubles from there.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// The bounds of one outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryLimits {
    /// Events held at most (at least 1 is held whatever is given).
    pub queue_size: usize,
    /// The longest wait between two tries.
    pub max_backoff: Duration,
}

impl Default for DeliveryLimits {
    fn default() -> Self {
        Self {
            queue_size: DEFAULT_QUEUE_SIZE,
            max_backoff: DEFAULT_MAX_BACKOFF,
        }
    }
}

/// Why an event was dropped (the `reason` label of the dropped counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// The queue was full: the oldest waiting event made room for a new one.
    QueueFull,
    /// The receiver refused it for good (a 4xx other than 408 and 429, or a redirect).
    Rejected,
}

impl DropReason {
    /// Every reason, in label order.
    pub const ALL: [DropReason; 2] = [DropReason::QueueFull, DropReason::Rejected];

    /// The metric label.
    pub fn metric_label(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::Rejected => "rejected",
        }
    }
}

/// What the receiver's answer to one POST means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Taken (2xx).
    Delivered,
    /// Try again later: no answer (connection refused, timeout), 408, 425, 429 or 5xx;
    /// `after` is the receiver's `Retry-After`, if it sent one.
    Retry {
        /// `Retry-After`.
        after: Option<Duration>,
    },
    /// Refused for good: trying again would get the same answer.
    Rejected,
}

impl Answer {
    /// The meaning of HTTP status `status`, or of no answer at all (`None`).
    pub fn of_status(status: Option<u16>, retry_after: Option<Duration>) -> Answer {
        match status {
            Some(200..=299) => Answer::Delivered,
            None | Some(408 | 425 | 429 | 500..=599) => Answer::Retry { after: retry_after },
            Some(_) => Answer::Rejected,
        }
    }
}

/// What the sender does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll<T> {
    /// POST `item`, then report the answer under `seq`.
    Send {
        /// Names this try in [`Outbox::handle_answer`].
        seq: u64,
        /// The event.
        item: T,
    },
    /// The receiver failed: nothing goes before this time.
    WaitUntil(Timestamp),
    /// An event is being sent; wait for its answer.
    Busy,
    /// Nothing to send.
    Idle,
}

/// Counts since the outbox was made (the webhook's metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// Events the receiver took.
    pub sent: u64,
    /// Tries that failed and will be repeated.
    pub retries: u64,
    /// Events dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Events the receiver refused for good.
    pub dropped_rejected: u64,
    /// Events waiting now (the one in flight included).
    pub queued: u64,
}

impl DeliveryStats {
    /// The dropped count for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::QueueFull => self.dropped_queue_full,
            DropReason::Rejected => self.dropped_rejected,
        }
    }
}

#[derive(Debug)]
struct Entry<T> {
    seq: u64,
    item: T,
}

/// The bounded queue of events for one receiver, and when to try next.
#[derive(Debug)]
pub struct Outbox<T> {
    limits: DeliveryLimits,
    queue: VecDeque<Entry<T>>,
    /// The front entry is being sent (its `seq`).
    in_flight: Option<u64>,
    next_seq: u64,
    /// Consecutive failed tries (the receiver's, across events).
    failures: u32,
    retry_at: Option<Timestamp>,
    stats: DeliveryStats,
}

impl<T: Clone> Outbox<T> {
    /// An empty outbox.
    pub fn new(limits: DeliveryLimits) -> Self {
        Self {
            limits: DeliveryLimits {
                queue_size: limits.queue_size.max(1),
                ..limits
            },
            queue: VecDeque::new(),
            in_flight: None,
            next_seq: 0,
            failures: 0,
            retry_at: None,
            stats: DeliveryStats::default(),
        }
    }

    /// Queues `item`; never waits. When the queue is full the oldest event not being sent
    /// right now is dropped (`item` itself, when the only other one is in flight) and
    /// returned.
    pub fn push(&mut self, item: T) -> Option<T> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut dropped = None;
        if self.queue.len() >= self.limits.queue_size {
            let oldest_waiting = usize::from(self.in_flight.is_some());
            match self.queue.remove(oldest_waiting) {
                Some(old) => dropped = Some(old.item),
                None => {
                    self.stats.dropped_queue_full += 1;
                    return Some(item);
                }
            }
            self.stats.dropped_queue_full += 1;
        }
        self.queue.push_back(Entry { seq, item });
        dropped
    }

    /// What to do next at `now`: send the oldest event, wait for the backoff or for the
    /// answer in flight, or nothing.
    #[must_use]
    pub fn poll(&mut self, now: Timestamp) -> Poll<T> {
        if self.in_flight.is_some() {
            return Poll::Busy;
        }
        let Some(front) = self.queue.front() else {
            return Poll::Idle;
        };
        if let Some(at) = self.retry_at
            && at > now
        {
            return Poll::WaitUntil(at);
        }
        self.in_flight = Some(front.seq);
        Poll::Send {
            seq: front.seq,
            item: front.item.clone(),
        }
    }

    /// The receiver's answer to the try `seq`, at `now`. An answer for an event that is no
    /// longer in flight (dropped meanwhile) only counts; it changes nothing else. Returns
    /// the reason when the event was dropped for good.
    pub fn handle_answer(
        &mut self,
        seq: u64,
        now: Timestamp,
        answer: Answer,
    ) -> Option<DropReason> {
        let current = self.in_flight == Some(seq);
        if current {
            self.in_flight = None;
        }
        match answer {
            Answer::Delivered => {
                self.stats.sent += 1;
                self.failures = 0;
                self.retry_at = None;
                if current {
                    self.queue.pop_front();
                }
                None
            }
            Answer::Retry { after } => {
                self.stats.retries += 1;
                self.failures = self.failures.saturating_add(1);
                let wait = self
                    .backoff()
                    .max(after.unwrap_or_default().min(self.limits.max_backoff));
                self.retry_at = Some(add(now, wait));
                None
            }
            Answer::Rejected => {
                // The receiver answered: it is up, so no backoff for the next event.
                self.failures = 0;
                self.retry_at = None;
                self.stats.dropped_rejected += 1;
                if current {
                    self.queue.pop_front();
                }
                Some(DropReason::Rejected)
            }
        }
    }

    /// The wait after the current run of failures: [`FIRST_BACKOFF`] doubled per failure
    /// after the first, at most `max_backoff`.
    pub fn backoff(&self) -> Duration {
        let first = FIRST_BACKOFF.min(self.limits.max_backoff);
        let doublings = self.failures.saturating_sub(1).min(32);
        first
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.limits.max_backoff)
    }

    /// Events waiting (the one in flight included).
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The counts so far, with the queue's length now.
    pub fn stats(&self) -> DeliveryStats {
        DeliveryStats {
            queued: self.queue.len() as u64,
            ..self.stats
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> DeliveryLimits {
        self.limits
    }
}

/// `now + wait`, saturating at the largest time jiff holds (no panic on any duration).
fn add(now: Timestamp, wait: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(wait)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests;
