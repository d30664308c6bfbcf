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
    // The shared labels go with the series: only "b" is left.
    let labels = m.labels.lock().expect("lock");
    assert_eq!(labels.keys().collect::<Vec<_>>(), vec![&key("b")]);
}

#[test]
fn a_releases_series_share_one_copy_of_its_labels() {
    let m = Metrics::default();
    m.record(&key("a"), &Metric::InventorySize { count: 4 });
    m.record_render(&key("a"), Duration::from_millis(3));
    let (l1, l2) = (m.labels(&key("a")), m.labels(&key("a")));
    assert!(Arc::ptr_eq(&l1.name, &l2.name));
    assert!(Arc::ptr_eq(&l1.namespace, &l2.namespace));
    assert_eq!(m.labels.lock().expect("lock").len(), 1);
}
