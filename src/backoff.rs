//! Requeue delays (SPEC §5).

use std::time::Duration;

/// First retry delay after a transient failure.
pub(crate) const BASE_DELAY: Duration = Duration::from_secs(5);
/// Longest retry delay after transient failures.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(300);
/// Safety recheck of a stalled release.
pub const STALLED_RECHECK: Duration = Duration::from_secs(30 * 60);
/// Interval when `spec.interval` is not set.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// Smallest accepted `spec.interval`.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(10);
/// Attempt deadline when `spec.timeout` is not set.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest `spec.interval` and `spec.timeout` (SPEC §24). The CRD refuses more; the core
/// clamps what an older CRD (or a stored object from before it) let through, so no requeue,
/// deadline or timestamp the core computes is ever further away than this.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);
/// Largest `spec.timeout` (SPEC §24), clamped like [`MAX_INTERVAL`].
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Longest requeue the core ever asks for: the interpreter may add jitter or a clock reading
/// to it without any chance of overflow.
pub const MAX_REQUEUE: Duration = Duration::from_secs(24 * 3600);

/// `ComputeBackoff(n) = min(5s · 2^(n−1), 5m)`, and 5s for `n ≤ 1`, where `n` counts
/// consecutive failed attempts including this one.
pub fn compute_backoff(n: i64) -> Duration {
    if n <= 1 {
        return BASE_DELAY;
    }
    // 5s · 2^6 = 320s already exceeds the cap, so larger exponents need no arithmetic.
    let exp = (n - 1).min(7) as u32;
    BASE_DELAY.saturating_mul(1u32 << exp).min(MAX_DELAY)
}

/// `delay`, raised to the server's `Retry-After` when `error` is a 429 that carried one
/// (SPEC §24: a 429 with `Retry-After` waits at least that long), and at most
/// [`STALLED_RECHECK`] so a hostile or broken header cannot park a release for days.
pub(crate) fn honour_retry_after(delay: Duration, error: &crate::ApiError) -> Duration {
    match error {
        crate::ApiError::TooManyRequests {
            retry_after_secs: Some(s),
            ..
        } => delay.max(Duration::from_secs(*s).min(STALLED_RECHECK)),
        _ => delay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_raises_the_delay_within_bounds() {
        let busy = |s| crate::ApiError::TooManyRequests {
            message: "slow down".into(),
            retry_after_secs: s,
        };
        assert_eq!(
            honour_retry_after(BASE_DELAY, &busy(Some(42))),
            Duration::from_secs(42)
        );
        assert_eq!(honour_retry_after(MAX_DELAY, &busy(Some(1))), MAX_DELAY);
        assert_eq!(honour_retry_after(BASE_DELAY, &busy(None)), BASE_DELAY);
        assert_eq!(
            honour_retry_after(BASE_DELAY, &busy(Some(u64::MAX))),
            STALLED_RECHECK
        );
        let other = crate::ApiError::Unavailable {
            message: "x".into(),
        };
        assert_eq!(honour_retry_after(BASE_DELAY, &other), BASE_DELAY);
    }

    #[test]
    fn backoff_sequence_matches_spec() {
        let got: Vec<u64> = (1..=9).map(|n| compute_backoff(n).as_secs()).collect();
        assert_eq!(got, vec![5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(compute_backoff(0), BASE_DELAY);
        assert_eq!(compute_backoff(-3), BASE_DELAY);
        assert_eq!(compute_backoff(i64::MAX), MAX_DELAY);
    }
}
