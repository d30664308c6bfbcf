//! The ±5 % jitter on success requeues (SPEC §5): the one thing the driver adds to the
//! core's answer, so releases with the same interval spread out instead of waking together.

use std::time::Duration;

use opm_core::Outcome;

/// The longest requeue the driver schedules: the CRD refuses an `interval` over 24h, and
/// a longer one (an old object, a CRD without the rule) must not overflow a timer.
pub const MAX_REQUEUE: Duration = Duration::from_secs(24 * 3600);

/// ±5 % on success requeues only (SPEC §5), clamped to [`MAX_REQUEUE`].
pub(crate) fn jitter(outcome: Outcome, d: Duration) -> Duration {
    jitter_with(outcome, d, fastrand::f64())
}

/// `jitter` with the random draw `r` in `[0, 1)` given. Never panics: any `d` and any
/// `r` (NaN, infinite, negative) give a duration of at most [`MAX_REQUEUE`].
pub fn jitter_with(outcome: Outcome, d: Duration, r: f64) -> Duration {
    let d = d.min(MAX_REQUEUE);
    if outcome.is_failure() {
        return d;
    }
    let r = if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.5
    };
    Duration::try_from_secs_f64(d.as_secs_f64() * (0.95 + r * 0.1))
        .unwrap_or(d)
        .min(MAX_REQUEUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_never_panics_and_is_clamped() {
        let huge = Duration::from_secs(5_124_095_576_030_431 * 3600);
        for d in [
            Duration::ZERO,
            Duration::from_secs(300),
            huge,
            Duration::MAX,
        ] {
            for r in [0.0, 0.5, 0.999_999, 1.0, -1.0, 2.0, f64::NAN, f64::INFINITY] {
                for outcome in [Outcome::Applied, Outcome::NoOp, Outcome::FailedTransient] {
                    assert!(jitter_with(outcome, d, r) <= MAX_REQUEUE, "{d:?} {r}");
                }
            }
        }
        assert_eq!(
            jitter_with(Outcome::Applied, Duration::MAX, 0.5),
            MAX_REQUEUE,
            "5124095576030431h is clamped to 24h"
        );
    }

    #[test]
    fn jitter_is_five_percent_on_successes_only() {
        let d = Duration::from_secs(100);
        assert_eq!(
            jitter_with(Outcome::Applied, d, 0.0),
            Duration::from_secs(95)
        );
        assert_eq!(jitter_with(Outcome::NoOp, d, 1.0), Duration::from_secs(105));
        assert_eq!(jitter_with(Outcome::FailedTransient, d, 0.0), d);
        assert_eq!(
            jitter_with(Outcome::FailedStalled, Duration::MAX, 0.0),
            MAX_REQUEUE
        );
    }
}
