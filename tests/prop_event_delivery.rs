//! Properties of the events webhook's outbox (`event_delivery`) over generated runs of
//! events, sender turns, receiver answers and clock jumps: the queue never exceeds its
//! bound; every event is accounted for exactly once (sent, dropped or still queued); what
//! the receiver takes arrives in the order it was queued, each event at most once unless a
//! lost answer made the sender try it again; and a receiver that comes back and stays up
//! gets everything still queued.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use opm_core::event_delivery::{Answer, DeliveryLimits, Outbox, Poll};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    /// A reconcile records an event.
    Push,
    /// The sender takes its turn; while the POST is out, this many more events are
    /// recorded; then the receiver answers (if a POST was made).
    Turn(Answer, u8),
    /// Time passes.
    Wait(u64),
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        4 => Just(Answer::Delivered),
        3 => (0u64..5).prop_map(|s| Answer::Retry {
            after: (s > 0).then(|| Duration::from_secs(s)),
        }),
        1 => Just(Answer::Rejected),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => Just(Step::Push),
        4 => (answer(), prop_oneof![3 => Just(0u8), 1 => 1u8..4]).prop_map(|(a, n)| Step::Turn(a, n)),
        2 => (0u64..120_000).prop_map(Step::Wait),
    ]
}

fn t0() -> Timestamp {
    Timestamp::from_second(1_800_000_000).expect("a time")
}

proptest! {
    #[test]
    fn bounded_accounted_for_and_in_order(
        queue_size in 1usize..6,
        max_backoff_ms in 1u64..90_000,
        steps in proptest::collection::vec(step(), 1..200),
    ) {
        let mut o: Outbox<u64> = Outbox::new(DeliveryLimits {
            queue_size,
            max_backoff: Duration::from_millis(max_backoff_ms),
        });
        let mut now = t0();
        let mut pushed = 0u64;
        let mut taken: Vec<u64> = Vec::new();
        let mut dropped_seen = 0u64;
        for s in &steps {
            match s {
                Step::Push => {
                    if o.push(pushed).is_some() {
                        dropped_seen += 1;
                    }
                    pushed += 1;
                }
                Step::Turn(answer, during) => match o.poll(now) {
                    Poll::Send { seq, item } => {
                        for _ in 0..*during {
                            if let Some(gone) = o.push(pushed) {
                                prop_assert_ne!(gone, item, "the event in flight was dropped");
                                dropped_seen += 1;
                            }
                            pushed += 1;
                        }
                        if *answer == Answer::Delivered {
                            taken.push(item);
                        }
                        o.handle_answer(seq, now, *answer);
                    }
                    Poll::WaitUntil(at) => prop_assert!(at > now),
                    Poll::Idle => prop_assert!(o.is_empty()),
                    Poll::Busy => prop_assert!(false, "nothing is in flight between turns"),
                },
                Step::Wait(ms) => now += SignedDuration::from_millis(*ms as i64),
            }
            let st = o.stats();
            prop_assert!(o.len() <= queue_size, "{} > {queue_size}", o.len());
            prop_assert_eq!(st.queued, o.len() as u64);
            prop_assert_eq!(st.sent + st.dropped_queue_full + st.dropped_rejected + st.queued, pushed);
            prop_assert_eq!(st.dropped_queue_full, dropped_seen);
            prop_assert_eq!(st.sent, taken.len() as u64);
        }
        // Strictly increasing: in queue order, and none twice (every answer here arrives).
        prop_assert!(taken.windows(2).all(|w| w[0] < w[1]), "{taken:?}");
        // The receiver comes back and stays up: everything still queued arrives, in order,
        // and within max_backoff of now.
        let queued: BTreeSet<u64> = (0..pushed).filter(|i| !taken.contains(i)).collect();
        let left = o.len();
        let deadline = now + SignedDuration::from_millis(max_backoff_ms as i64);
        let mut after = Vec::new();
        loop {
            match o.poll(now) {
                Poll::WaitUntil(at) => {
                    prop_assert!(at <= deadline, "waits past the longest backoff");
                    now = at;
                }
                Poll::Send { seq, item } => {
                    after.push(item);
                    o.handle_answer(seq, now, Answer::Delivered);
                }
                Poll::Idle => break,
                Poll::Busy => prop_assert!(false, "nothing is in flight between turns"),
            }
        }
        prop_assert_eq!(after.len(), left);
        prop_assert!(after.iter().all(|i| queued.contains(i)));
        prop_assert!(after.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(taken.last().is_none_or(|l| after.first().is_none_or(|f| f > l)));
    }
}
