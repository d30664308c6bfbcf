use super::*;
use opm_core::object::Kind;

fn key() -> ReleaseKey {
    ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "a".into(),
    }
}

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

#[test]
fn window_times_and_release() {
    let mut s = FaultSchedule::default();
    let mut rng = SplitMix64::new(1);
    s.add(Fault::always(EffectKind::Apply, FaultError::unavailable()).between(t(10), t(20)))
        .unwrap();
    s.add(Fault::always(EffectKind::Render, FaultError::unavailable()).times(2))
        .unwrap();
    assert_eq!(s.take(EffectKind::Apply, &key(), t(9), &mut rng), None);
    assert!(s.take(EffectKind::Apply, &key(), t(10), &mut rng).is_some());
    assert_eq!(s.take(EffectKind::Apply, &key(), t(20), &mut rng), None);
    assert!(s.take(EffectKind::Render, &key(), t(0), &mut rng).is_some());
    assert!(!s.quiet_from(t(20)));
    assert!(s.take(EffectKind::Render, &key(), t(0), &mut rng).is_some());
    assert_eq!(s.take(EffectKind::Render, &key(), t(0), &mut rng), None);
    assert!(s.quiet_from(t(20)));
    let mut other = key();
    other.name = "b".into();
    s.add(Fault::always(EffectKind::Prune, FaultError::unavailable()).for_release(other.clone()))
        .unwrap();
    assert_eq!(s.take(EffectKind::Prune, &key(), t(0), &mut rng), None);
    assert!(s.take(EffectKind::Prune, &other, t(0), &mut rng).is_some());
}

#[test]
fn could_hit_agrees_with_take_and_draws_nothing() {
    let mut s = FaultSchedule::default();
    s.add(Fault::always(EffectKind::Apply, FaultError::unavailable()).between(t(10), t(20)))
        .unwrap();
    s.add(Fault::always(EffectKind::Render, FaultError::unavailable()).times(1))
        .unwrap();
    let mut other = key();
    other.name = "b".into();
    s.add(Fault::always(EffectKind::Prune, FaultError::unavailable()).for_release(other.clone()))
        .unwrap();
    let mut rng = SplitMix64::new(1);
    for (kind, k, at) in [
        (EffectKind::Apply, key(), t(9)),
        (EffectKind::Apply, key(), t(10)),
        (EffectKind::Apply, key(), t(20)),
        (EffectKind::Render, key(), t(0)),
        (EffectKind::Render, key(), t(0)),
        (EffectKind::Prune, key(), t(0)),
        (EffectKind::Prune, other.clone(), t(0)),
        (EffectKind::CheckDrift, key(), t(0)),
    ] {
        let could = s.could_hit(kind, &k, at);
        let before = rng.clone();
        let took = s.take(kind, &k, at, &mut rng).is_some();
        assert_eq!(could, took, "{kind:?} {k:?} {at}");
        if !could {
            assert_eq!(rng, before, "nothing drawn when no fault could hit");
        }
    }
}

#[test]
fn mismatched_errors_are_refused() {
    let mut s = FaultSchedule::default();
    let fetch = FaultError::Fetch {
        error: FetchError::Http { status: 503 },
    };
    assert!(
        s.add(Fault::always(EffectKind::Apply, fetch.clone()))
            .is_err()
    );
    assert!(
        s.add(Fault::always(EffectKind::FetchArtifact, fetch))
            .is_ok()
    );
    assert!(
        s.add(Fault::always(
            EffectKind::EmitEvent,
            FaultError::unavailable()
        ))
        .is_err()
    );
    assert_eq!(
        FaultError::unavailable()
            .as_render()
            .map(|e| matches!(e, RenderError::RegistryUnreachable { .. })),
        Some(true)
    );
}

#[test]
fn probability_uses_the_seeded_generator() {
    let run = |seed| {
        let mut s = FaultSchedule::default();
        let mut f = Fault::always(EffectKind::Apply, FaultError::unavailable());
        f.per_mille = Some(500);
        s.add(f).unwrap();
        let mut rng = SplitMix64::new(seed);
        (0..64)
            .map(|_| s.take(EffectKind::Apply, &key(), t(0), &mut rng).is_some())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    let hits = run(3).iter().filter(|h| **h).count();
    assert!(hits > 10 && hits < 54, "{hits}");
}
