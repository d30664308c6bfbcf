//! Is the operator still making progress? The `/healthz` decision (SPEC §22: it fails
//! when the controllers have stopped making progress: a watch dead or the work queue stuck
//! past a bound).
//!
//! The interpreter samples its heartbeats (milliseconds on a monotonic clock it owns) and
//! asks [`assess`]; the core never reads a clock. A quiet cluster is healthy: a watch that
//! delivers nothing is not dead, and an empty queue is not stuck.

use std::time::Duration;

/// One watch stream's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchBeat {
    /// The stream's name, as `/healthz` reports it.
    pub name: String,
    /// The stream ended (its controller or trigger task stopped).
    pub ended: bool,
    /// Since when every poll of the stream has been an error (`None`: its last item was
    /// good, or it has delivered nothing yet).
    pub failing_since_ms: Option<u64>,
}

/// A snapshot of the heartbeats, sampled at `now_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beats {
    /// When the snapshot was taken (milliseconds of the interpreter's clock).
    pub now_ms: u64,
    /// Every watch stream's state.
    pub watches: Vec<WatchBeat>,
    /// Attempts waiting for a slot.
    pub waiting: usize,
    /// Since when the oldest waiter waits.
    pub oldest_waiting_since_ms: Option<u64>,
    /// Last time an attempt started, or an effect of one completed.
    pub last_progress_ms: u64,
}

/// Why the operator is not live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unhealthy {
    /// A watch stream stopped: its releases no longer react to changes.
    WatchEnded {
        /// Which stream.
        watch: String,
    },
    /// A watch stream has errored on every poll for `for_`.
    WatchFailing {
        /// Which stream.
        watch: String,
        /// How long it has been failing.
        for_: Duration,
    },
    /// Attempts wait, yet nothing has progressed for `for_`.
    QueueStuck {
        /// How many attempts wait for a slot.
        waiting: usize,
        /// How long nothing has progressed.
        for_: Duration,
    },
}

impl std::fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unhealthy::WatchEnded { watch } => write!(f, "the {watch} watch has ended"),
            Unhealthy::WatchFailing { watch, for_ } => {
                write!(f, "the {watch} watch has failed for {}s", for_.as_secs())
            }
            Unhealthy::QueueStuck { waiting, for_ } => write!(
                f,
                "{waiting} attempt(s) queued and none has made progress for {}s",
                for_.as_secs()
            ),
        }
    }
}

/// Healthy, or every reason it is not. `bound` is how long a watch may fail, or a
/// non-empty queue go without any progress, before the process counts as stuck.
pub fn assess(beats: &Beats, bound: Duration) -> Result<(), Vec<Unhealthy>> {
    let bound_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX);
    let age = |since: u64| beats.now_ms.saturating_sub(since);
    let mut bad = Vec::new();
    for w in &beats.watches {
        if w.ended {
            bad.push(Unhealthy::WatchEnded {
                watch: w.name.clone(),
            });
        } else if let Some(since) = w.failing_since_ms
            && age(since) > bound_ms
        {
            bad.push(Unhealthy::WatchFailing {
                watch: w.name.clone(),
                for_: Duration::from_millis(age(since)),
            });
        }
    }
    if beats.waiting > 0
        && let Some(oldest) = beats.oldest_waiting_since_ms
        && age(oldest) > bound_ms
        && age(beats.last_progress_ms) > bound_ms
    {
        bad.push(Unhealthy::QueueStuck {
            waiting: beats.waiting,
            for_: Duration::from_millis(age(beats.last_progress_ms.max(oldest))),
        });
    }
    if bad.is_empty() { Ok(()) } else { Err(bad) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(60);

    fn beats(now_ms: u64) -> Beats {
        Beats {
            now_ms,
            watches: vec![WatchBeat {
                name: "ModuleRelease".into(),
                ended: false,
                failing_since_ms: None,
            }],
            waiting: 0,
            oldest_waiting_since_ms: None,
            last_progress_ms: 0,
        }
    }

    #[test]
    fn a_quiet_operator_is_healthy() {
        assert_eq!(assess(&beats(10_000_000), BOUND), Ok(()));
    }

    #[test]
    fn an_ended_watch_is_unhealthy_at_once() {
        let mut b = beats(1000);
        b.watches[0].ended = true;
        assert_eq!(
            assess(&b, BOUND),
            Err(vec![Unhealthy::WatchEnded {
                watch: "ModuleRelease".into()
            }])
        );
    }

    #[test]
    fn a_watch_failing_past_the_bound_is_unhealthy() {
        let mut b = beats(100_000);
        b.watches[0].failing_since_ms = Some(50_000);
        assert_eq!(
            assess(&b, BOUND),
            Ok(()),
            "50s of errors is within the bound"
        );
        b.now_ms = 111_000;
        let err = assess(&b, BOUND).unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(
            err[0].to_string(),
            "the ModuleRelease watch has failed for 61s"
        );
    }

    #[test]
    fn a_queue_without_progress_past_the_bound_is_stuck() {
        let mut b = beats(200_000);
        b.waiting = 3;
        b.oldest_waiting_since_ms = Some(100_000);
        b.last_progress_ms = 100_000;
        let err = assess(&b, BOUND).unwrap_err();
        assert_eq!(
            err,
            vec![Unhealthy::QueueStuck {
                waiting: 3,
                for_: Duration::from_secs(100)
            }]
        );
        // Recent progress (an attempt started or an effect completed) keeps it healthy.
        b.last_progress_ms = 190_000;
        assert_eq!(assess(&b, BOUND), Ok(()));
        // So does a waiter that has not waited long, and an empty queue.
        b.last_progress_ms = 0;
        b.oldest_waiting_since_ms = Some(150_000);
        assert_eq!(assess(&b, BOUND), Ok(()));
        b.waiting = 0;
        b.oldest_waiting_since_ms = None;
        assert_eq!(assess(&b, BOUND), Ok(()));
    }

    #[test]
    fn extreme_clocks_never_panic() {
        let mut b = beats(0);
        b.waiting = usize::MAX;
        b.oldest_waiting_since_ms = Some(u64::MAX);
        b.last_progress_ms = u64::MAX;
        b.watches[0].failing_since_ms = Some(u64::MAX);
        assert_eq!(assess(&b, Duration::MAX), Ok(()));
        b.now_ms = u64::MAX;
        b.oldest_waiting_since_ms = Some(0);
        b.last_progress_ms = 0;
        assert!(assess(&b, Duration::ZERO).is_err());
    }
}
