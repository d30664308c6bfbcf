//! The webhook's queue, drop and backoff decisions, on a hand-moved clock.

use super::*;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_800_000_000_000 + ms).expect("a time")
}

fn outbox(queue_size: usize, max_backoff_ms: u64) -> Outbox<u32> {
    Outbox::new(DeliveryLimits {
        queue_size,
        max_backoff: Duration::from_millis(max_backoff_ms),
    })
}

/// Sends whatever is due at `now` and answers it; the item sent, if any.
fn send(o: &mut Outbox<u32>, now: Timestamp, answer: Answer) -> Option<u32> {
    match o.poll(now) {
        Poll::Send { seq, item } => {
            o.handle_answer(seq, now, answer);
            Some(item)
        }
        _ => None,
    }
}

const DOWN: Answer = Answer::Retry { after: None };

#[test]
fn delivers_in_order_one_at_a_time() {
    let mut o = outbox(10, 60_000);
    for i in 0..3 {
        assert_eq!(o.push(i), None);
    }
    let Poll::Send { seq, item } = o.poll(t(0)) else {
        panic!("nothing to send")
    };
    assert_eq!(item, 0);
    assert_eq!(o.poll(t(0)), Poll::Busy, "one in flight at a time");
    o.handle_answer(seq, t(1), Answer::Delivered);
    assert_eq!(send(&mut o, t(2), Answer::Delivered), Some(1));
    assert_eq!(send(&mut o, t(3), Answer::Delivered), Some(2));
    assert_eq!(o.poll(t(4)), Poll::Idle);
    assert_eq!(
        o.stats(),
        DeliveryStats {
            sent: 3,
            ..DeliveryStats::default()
        }
    );
}

#[test]
fn a_failing_receiver_gets_the_same_event_again_after_a_doubling_wait() {
    let mut o = outbox(10, 3_000);
    o.push(7);
    o.push(8);
    let mut now = t(0);
    let mut waits = Vec::new();
    for _ in 0..5 {
        assert_eq!(
            send(&mut o, now, DOWN),
            Some(7),
            "the head is retried, not skipped"
        );
        let Poll::WaitUntil(at) = o.poll(now) else {
            panic!("no backoff")
        };
        waits.push(now.duration_until(at).as_millis());
        assert_eq!(
            o.poll(at - jiff::SignedDuration::from_millis(1)),
            Poll::WaitUntil(at)
        );
        now = at;
    }
    assert_eq!(
        waits,
        [500, 1_000, 2_000, 3_000, 3_000],
        "capped at max_backoff"
    );
    assert_eq!(send(&mut o, now, Answer::Delivered), Some(7));
    assert_eq!(
        o.poll(now),
        Poll::Send { seq: 1, item: 8 },
        "no wait once it took one"
    );
    assert_eq!(o.stats().retries, 5);
    assert_eq!(o.stats().sent, 1);
}

#[test]
fn retry_after_is_honoured_up_to_max_backoff() {
    let mut o = outbox(10, 10_000);
    o.push(1);
    let after = |s| Answer::Retry {
        after: Some(Duration::from_secs(s)),
    };
    send(&mut o, t(0), after(4));
    assert_eq!(o.poll(t(0)), Poll::WaitUntil(t(4_000)));
    send(&mut o, t(4_000), after(3_600));
    assert_eq!(o.poll(t(4_000)), Poll::WaitUntil(t(14_000)), "capped");
}

#[test]
fn a_full_queue_drops_the_oldest_and_counts_it() {
    let mut o = outbox(2, 60_000);
    assert_eq!(o.push(1), None);
    assert_eq!(o.push(2), None);
    assert_eq!(o.push(3), Some(1));
    assert_eq!(o.push(4), Some(2));
    assert_eq!(o.len(), 2);
    assert_eq!(o.stats().dropped(DropReason::QueueFull), 2);
    assert_eq!(send(&mut o, t(0), Answer::Delivered), Some(3));
    assert_eq!(send(&mut o, t(0), Answer::Delivered), Some(4));
}

#[test]
fn the_event_in_flight_is_never_the_one_dropped() {
    let mut o = outbox(2, 60_000);
    o.push(1);
    o.push(2);
    let Poll::Send { seq, item: 1 } = o.poll(t(0)) else {
        panic!("1 first")
    };
    assert_eq!(
        o.push(3),
        Some(2),
        "the oldest waiting goes, not the one being sent"
    );
    o.handle_answer(seq, t(1), Answer::Delivered);
    assert_eq!(send(&mut o, t(1), Answer::Delivered), Some(3));

    // Size 1: while the only event is in flight, a new one is itself the oldest waiting.
    let mut o = outbox(1, 60_000);
    o.push(1);
    let Poll::Send { seq, .. } = o.poll(t(0)) else {
        panic!("1 first")
    };
    assert_eq!(o.push(2), Some(2));
    o.handle_answer(seq, t(1), Answer::Delivered);
    assert_eq!(o.poll(t(1)), Poll::Idle);
    assert_eq!(o.stats().dropped_queue_full, 1);
}

#[test]
fn dropping_a_waiting_head_keeps_the_receivers_backoff() {
    let mut o = outbox(1, 60_000);
    o.push(1);
    send(&mut o, t(0), DOWN);
    send(&mut o, t(500), DOWN);
    assert_eq!(o.poll(t(500)), Poll::WaitUntil(t(1_500)));
    assert_eq!(o.push(2), Some(1));
    assert_eq!(
        o.poll(t(600)),
        Poll::WaitUntil(t(1_500)),
        "a new event does not reset the down receiver's wait"
    );
    assert_eq!(send(&mut o, t(1_500), Answer::Delivered), Some(2));
}

#[test]
fn a_rejected_event_is_dropped_for_good_and_the_next_goes_at_once() {
    let mut o = outbox(10, 60_000);
    o.push(1);
    o.push(2);
    let Poll::Send { seq, .. } = o.poll(t(0)) else {
        panic!()
    };
    assert_eq!(
        o.handle_answer(seq, t(0), Answer::Rejected),
        Some(DropReason::Rejected)
    );
    assert_eq!(o.poll(t(0)), Poll::Send { seq: 1, item: 2 });
    assert_eq!(o.stats().dropped_rejected, 1);
}

#[test]
fn a_stale_answer_changes_nothing_but_the_counts() {
    let mut o = outbox(10, 60_000);
    o.push(1);
    o.push(2);
    let Poll::Send { seq, .. } = o.poll(t(0)) else {
        panic!()
    };
    o.handle_answer(seq + 100, t(0), Answer::Delivered);
    assert_eq!(
        o.poll(t(0)),
        Poll::Busy,
        "still waiting for the real answer"
    );
    assert_eq!(o.len(), 2);
}

#[test]
fn statuses_mean_what_http_says() {
    for (status, want) in [
        (Some(200), Answer::Delivered),
        (Some(202), Answer::Delivered),
        (Some(204), Answer::Delivered),
        (None, DOWN),
        (Some(408), DOWN),
        (Some(429), DOWN),
        (Some(500), DOWN),
        (Some(503), DOWN),
        (Some(301), Answer::Rejected),
        (Some(400), Answer::Rejected),
        (Some(401), Answer::Rejected),
        (Some(404), Answer::Rejected),
        (Some(413), Answer::Rejected),
    ] {
        assert_eq!(Answer::of_status(status, None), want, "{status:?}");
    }
}

#[test]
fn no_duration_or_size_panics() {
    let mut o = Outbox::new(DeliveryLimits {
        queue_size: 0,
        max_backoff: Duration::MAX,
    });
    assert_eq!(o.limits().queue_size, 1);
    o.push(1);
    for _ in 0..100 {
        send(
            &mut o,
            t(0),
            Answer::Retry {
                after: Some(Duration::MAX),
            },
        );
    }
    assert!(matches!(o.poll(t(0)), Poll::WaitUntil(_)));
    assert_eq!(
        DropReason::ALL.map(DropReason::metric_label),
        ["queue_full", "rejected"]
    );
}
