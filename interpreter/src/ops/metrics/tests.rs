//! The exposed names are SPEC §21's, and a forgotten release leaves no series behind.

use super::*;

fn key(name: &str) -> ReleaseKey {
    ReleaseKey {
        kind: Kind::Release,
        namespace: "ns".into(),
        name: name.into(),
    }
}

fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn exposes_spec_names_and_forgets_one_release() {
    let m = Metrics::default();
    for _ in 0..2 {
        m.record(
            &key("a"),
            &Metric::Reconcile {
                outcome: Outcome::NoOp,
                duration: Duration::from_millis(10),
            },
        );
    }
    m.record(
        &key("a"),
        &Metric::ApplyResources {
            created: 3,
            updated: 0,
            unchanged: 1,
        },
    );
    m.record(&key("b"), &Metric::InventorySize { count: 4 });
    m.record_fetch(&key("a"), FetchObservation::Miss { bytes: 100 });
    m.record_fetch(&key("a"), FetchObservation::Hit);
    m.record_render(&key("a"), Duration::from_millis(3));
    let text = m.render();
    let a = r#"kind="Release",name="a",namespace="ns""#;
    assert_eq!(
        sample(
            &text,
            &format!("opm_controller_reconcile_total{{{a},outcome=\"no_op\"}}")
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("opm_controller_apply_resources_total{{{a},action=\"created\"}}")
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("opm_controller_reconcile_duration_seconds_bucket{{{a},le=\"0.01\"}}")
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("opm_controller_fetch_bytes_total{{{a}}}")),
        Some(100.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("opm_controller_artifact_cache_hits_total{{{a}}}")
        ),
        Some(1.0)
    );
    assert!(text.contains("# TYPE opm_controller_render_duration_seconds histogram"));
    m.forget(&key("a"));
    let text = m.render();
    assert!(!text.contains(r#"name="a""#), "{text}");
    assert!(text.contains(r#"opm_controller_inventory_size{kind="Release",name="b""#));
    // Nothing of "a" is kept: only "b" is left.
    assert_eq!(m.lock().keys().collect::<Vec<_>>(), vec![&key("b")]);
}

/// Every family with series of both kinds, every outcome and action, fetches, renders,
/// health and the Ready/suspended gauges, then one release forgotten.
fn a_fleets_samples() -> Metrics {
    use opm_core::api::{Condition, ModuleRelease, Release, ReleaseStatus};
    let m = Metrics::default();
    let mr = |name: &str| ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: "team-b".into(),
        name: name.into(),
    };
    let ready = ReleaseStatus {
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    for (i, k) in [key("a"), key("b"), mr("web"), mr("gone")]
        .iter()
        .enumerate()
    {
        let ms = |n: u64| Duration::from_millis(n * (i as u64 + 1));
        for (n, outcome) in OUTCOMES.iter().enumerate().skip(i) {
            m.record(
                k,
                &Metric::Reconcile {
                    outcome: *outcome,
                    duration: ms(7 * n as u64 + 3),
                },
            );
        }
        m.record(
            k,
            &Metric::ApplyResources {
                created: 3 + i as u64,
                updated: i as u64,
                unchanged: 0,
            },
        );
        m.record(k, &Metric::PruneResources { count: i as u64 });
        m.record(
            k,
            &Metric::InventorySize {
                count: 4 + i as u64,
            },
        );
        if i != 1 {
            m.record(k, &Metric::ReleaseHealthy { healthy: i == 0 });
            m.record(k, &Metric::HealthWait { duration: ms(1500) });
        }
        m.record_render(k, ms(40));
        m.record_render(k, ms(9000));
        let object = if k.kind == Kind::Release {
            let mut r = Release::new(&k.name, Default::default());
            r.spec.common.suspend = i == 1;
            r.status = (i == 0).then(|| ready.clone());
            ReleaseObject::Release(r)
        } else {
            ReleaseObject::ModuleRelease(ModuleRelease::new(&k.name, Default::default()))
        };
        m.observe_release(k, &object);
        if k.kind == Kind::Release {
            m.record_fetch(k, FetchObservation::Miss { bytes: 4096 });
            m.record_fetch(k, FetchObservation::Hit);
        }
        if i == 2 {
            m.observe_status(k, &ready);
        }
    }
    m.forget(&mr("gone"));
    m
}

/// The exposition of [`a_fleets_samples`], with series sorted within each family (their
/// order within a family is not part of the format).
fn sorted_exposition(m: &Metrics) -> String {
    let mut out = Vec::new();
    let mut series = Vec::new();
    for line in m.render().lines() {
        if line.starts_with('#') {
            series.sort();
            out.append(&mut series);
            out.push(line.to_string());
        } else {
            series.push(line.to_string());
        }
    }
    series.sort();
    out.append(&mut series);
    out.join("\n") + "\n"
}

#[test]
fn the_exposition_of_a_fleet_is_unchanged() {
    let got = sorted_exposition(&a_fleets_samples());
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/ops/metrics/exposition.txt"
    );
    if std::env::var_os("OPM_WRITE_EXPOSITION").is_some() {
        std::fs::write(path, &got).expect("write");
    }
    let want = std::fs::read_to_string(path).expect("the recorded exposition");
    assert_eq!(got, want);
}

#[test]
fn webhook_series_only_with_the_webhook_and_then_from_zero() {
    let m = Metrics::default();
    assert!(!m.render().contains("events_webhook"), "off: no series");
    let stats = Arc::new(Mutex::new(DeliveryStats::default()));
    let s = stats.clone();
    m.serve_webhook_stats(move || *s.lock().unwrap());
    let text = m.render();
    for series in [
        "opm_controller_events_webhook_sent_total 0",
        "opm_controller_events_webhook_retries_total 0",
        "opm_controller_events_webhook_dropped_total{reason=\"queue_full\"} 0",
        "opm_controller_events_webhook_dropped_total{reason=\"rejected\"} 0",
        "opm_controller_events_webhook_queued 0",
        "# TYPE opm_controller_events_webhook_queued gauge",
    ] {
        assert!(text.lines().any(|l| l == series), "{series}:\n{text}");
    }
    *stats.lock().unwrap() = DeliveryStats {
        sent: 5,
        retries: 2,
        dropped_queue_full: 3,
        dropped_rejected: 1,
        queued: 7,
    };
    let text = m.render();
    for series in [
        "opm_controller_events_webhook_sent_total 5",
        "opm_controller_events_webhook_retries_total 2",
        "opm_controller_events_webhook_dropped_total{reason=\"queue_full\"} 3",
        "opm_controller_events_webhook_dropped_total{reason=\"rejected\"} 1",
        "opm_controller_events_webhook_queued 7",
    ] {
        assert!(text.lines().any(|l| l == series), "{series}:\n{text}");
    }
}
