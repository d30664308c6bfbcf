//! Backoff (SPEC §5): monotone, starts at 5s, caps at 5m, equals min(5s·2^(n−1), 5m); and in
//! the world, consecutive transient failures are requeued exactly on that sequence.

mod world_support;

use std::time::Duration;

use opm_core::EffectKind;
use opm_core::Outcome;
use opm_core::backoff::compute_backoff;
use opm_core::input::ApiError;
use opm_world::{Fault, FaultError};
use proptest::prelude::*;
use world_support::*;

fn formula(n: i64) -> Duration {
    if n <= 1 {
        return Duration::from_secs(5);
    }
    let secs = 5u128 * (1u128 << (n - 1).min(100) as u32);
    Duration::from_secs(secs.min(300) as u64)
}

proptest! {
    #![proptest_config(pt_config("proptest-regressions/prop_backoff.txt", 256))]

    #[test]
    fn backoff_is_the_capped_doubling(n in -5i64..200) {
        let d = compute_backoff(n);
        prop_assert_eq!(d, formula(n));
        prop_assert!(d >= Duration::from_secs(5) && d <= Duration::from_secs(300));
        prop_assert!(compute_backoff(n + 1) >= d, "not monotone at {}", n);
        if n <= 1 {
            prop_assert_eq!(d, Duration::from_secs(5));
        }
        if n >= 7 {
            prop_assert_eq!(d, Duration::from_secs(300));
        }
    }

    #[test]
    fn extreme_counters_stay_capped(n in any::<i64>()) {
        let d = compute_backoff(n);
        prop_assert!(d >= Duration::from_secs(5) && d <= Duration::from_secs(300));
    }
}

proptest! {
    #![proptest_config(pt_config("proptest-regressions/prop_backoff_world.txt", 12))]

    /// A release failing transiently `k` times in a row is requeued after backoff(1..=k),
    /// and the first success resets the counter and the delay to the interval.
    #[test]
    fn consecutive_transient_failures_follow_the_sequence(s in setup(), k in 1u32..12, which in 0usize..3) {
        let mut w = base_world(&s);
        let kind = [EffectKind::Apply, EffectKind::Render, EffectKind::FetchArtifact][which];
        let key = release_keys()[if kind == EffectKind::FetchArtifact { 2 } else { 0 }].clone();
        let error = match kind {
            EffectKind::FetchArtifact => FaultError::Fetch { error: opm_core::FetchError::Http { status: 502 } },
            _ => FaultError::api(ApiError::Unavailable { message: "down".into() }),
        };
        w.add_fault(Fault::always(kind, error).times(k).for_release(key.clone())).unwrap();
        w.drive_until(at(3600)).unwrap();
        let mine: Vec<_> = w.timeline().iter().filter(|e| e.key == key).collect();
        for (i, e) in mine.iter().take(k as usize).enumerate() {
            prop_assert_eq!(e.outcome, Some(Outcome::FailedTransient));
            prop_assert_eq!(e.requeue_after, Some(compute_backoff(i as i64 + 1)), "failure {}", i + 1);
            if let Some(next) = mine.get(i + 1) {
                prop_assert_eq!(next.started_at.duration_since(e.finished_at).unsigned_abs(), compute_backoff(i as i64 + 1));
            }
        }
        let ok = mine[k as usize];
        prop_assert!(matches!(ok.outcome, Some(Outcome::Applied | Outcome::AppliedAndPruned)));
        prop_assert_eq!(ok.requeue_after, Some(Duration::from_secs(300)));
    }
}
