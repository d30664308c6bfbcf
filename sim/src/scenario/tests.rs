use serde_json::json;

use super::*;
use opm_core::Outcome;

fn scenario() -> Scenario {
    serde_json::from_value(json!({
        "duration": "1h",
        "seed": 7,
        "config": {"allowOperatorIdentity": "on"},
        "modules": [{"path": "example.com/modules/web@v0", "version": "v0.2.1"}],
        "sources": [{"kind": "OCIRepository", "namespace": "demo", "name": "repo",
            "artifact": {"revision": "v1", "paths": {"app": {"Ok": {"kind": "ModuleRelease",
                "metadata": {"name": "pkg", "namespace": "demo"},
                "components": {"main": {"cm": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "pkg"}, "data": {"a": "1"}}}}}}}}}],
        "releases": [
            {"apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
             "metadata": {"name": "web", "namespace": "demo"},
             "spec": {"module": {"path": "example.com/modules/web@v0", "version": "v0.2.1"},
                      "values": {"replicas": 2}}},
            {"apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "Release",
             "metadata": {"name": "pkg", "namespace": "demo"},
             "spec": {"sourceRef": {"kind": "OCIRepository", "name": "repo"}, "path": "./app",
                      "prune": true}}
        ],
        "faults": [{"kind": "fetchArtifact", "error": {"type": "fetch", "error": {"type": "http", "status": 503}},
                    "from": "0s", "until": "20m"}],
        "events": [{"at": "30m", "type": "editSpec",
                    "key": {"kind": "ModuleRelease", "namespace": "demo", "name": "web"},
                    "patch": {"values": {"replicas": 3}}}]
    }))
    .expect("scenario parses")
}

#[test]
fn runs_from_json_with_faults_and_edits() {
    let s = scenario();
    let w = s.run().unwrap();
    let pkg: Vec<_> = w
        .timeline()
        .iter()
        .filter(|e| e.key.name == "pkg")
        .collect();
    let delays: Vec<u64> = pkg
        .iter()
        .take(7)
        .map(|e| e.requeue_after.unwrap().as_secs())
        .collect();
    assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300]);
    assert!(pkg.iter().any(|e| e.outcome == Some(Outcome::Applied)));
    let web: Vec<_> = w
        .timeline()
        .iter()
        .filter(|e| e.key.name == "web")
        .collect();
    assert_eq!(web[0].outcome, Some(Outcome::Applied));
    // The edit at 30m re-triggers at once.
    assert!(web.iter().any(|e| e.started_at
        == add(s.start(), std::time::Duration::from_secs(1800))
        && e.outcome == Some(Outcome::Applied)));
    let text = timeline_text(s.start(), w.timeline());
    assert!(text.contains("+00:00:00 ModuleRelease  demo/web"), "{text}");
    assert!(text.contains("# Release demo/pkg: "), "{text}");
}

#[test]
fn same_scenario_same_output() {
    let a = scenario().run().unwrap();
    let b = scenario().run().unwrap();
    assert_eq!(
        serde_json::to_string(a.timeline()).unwrap(),
        serde_json::to_string(b.timeline()).unwrap()
    );
}

#[test]
fn bad_manifests_and_durations_are_named() {
    let mut s = scenario();
    s.releases.push(json!({"kind": "Deployment"}));
    assert!(matches!(s.build(), Err(ScenarioError::Invalid { what, .. }) if what == "releases[2]"));
    let mut s = scenario();
    s.events[0].at = "soon".into();
    assert!(
        matches!(s.build(), Err(ScenarioError::Invalid { what, .. }) if what == "events[0].at")
    );
}

#[test]
fn copies_expand_into_numbered_releases() {
    let mut s = scenario();
    s.releases[0]["copies"] = json!(12);
    assert_eq!(release_count(&s), 13);
    let w = s.build().unwrap();
    let names: Vec<String> = w.releases().keys().map(|k| k.name.clone()).collect();
    assert!(names.contains(&"web-01".to_string()), "{names:?}");
    assert!(names.contains(&"web-12".to_string()), "{names:?}");
    assert!(!names.contains(&"web".to_string()), "{names:?}");
    s.releases[0]["copies"] = json!(0);
    assert!(matches!(s.build(), Err(ScenarioError::Invalid { what, .. }) if what == "releases[0]"));
}

#[test]
fn a_platform_section_opm_modules_and_platform_events_parse_under_either_name() {
    let s: Scenario = serde_saphyr::from_str(
        r#"
duration: 20m
config: {allowOperatorIdentity: "on"}
modules:
  - {path: example.com/modules/opm-web@v1, version: v1.0.0, opm: true}
platform:
  spec: {type: kubernetes, registry: {opmodel.dev/catalogs/opm@v2: {version: 2.0.0}}}
  evaluation: {result: failed, message: "registry unreachable", transient: true}
releases:
  - apiVersion: releases.opmodel.dev/v1alpha1
    kind: ModuleRelease
    metadata: {name: web, namespace: demo}
    spec: {module: {path: example.com/modules/opm-web@v1, version: v1.0.0}}
events:
  - {at: 5m, type: platformCreate, platform: {spec: {type: kubernetes, registry: {opmodel.dev/catalogs/opm@v2: {version: v2.0.0}}}}}
  - {at: 10m, type: changePlatform, platform: {spec: {type: kubernetes, registry: {opmodel.dev/catalogs/opm@v2: {version: v2.1.0}}}}}
  - {at: 15m, type: platformDelete}
"#,
    )
    .expect("scenario parses");
    assert!(s.modules[0].opm);
    assert!(matches!(
        s.events[0].event,
        WorldEvent::CreatePlatform { .. }
    ));
    assert!(matches!(s.events[2].event, WorldEvent::DeletePlatform));
    // The canonical names are written back.
    let back = serde_json::to_value(&s.events[0]).unwrap();
    assert_eq!(back["type"], "createPlatform");
    let w = s.run().unwrap();
    let reasons: Vec<(u64, &str)> = w
        .timeline()
        .iter()
        .map(|e| {
            let secs = e.started_at.duration_since(s.start()).as_secs() as u64;
            (secs, e.reason.as_str())
        })
        .collect();
    // Evaluated but failed at the start: waiting, with the evaluation's message.
    assert_eq!(reasons[0], (0, "PlatformNotReady"));
    assert!(
        w.timeline()[0].message.contains("registry unreachable"),
        "{}",
        w.timeline()[0].message
    );
    // Created Ready at 5m: re-triggered at once; bumped at 10m: applied again (a new digest).
    assert!(
        reasons.contains(&(300, "ReconciliationSucceeded")),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&(600, "ReconciliationSucceeded")),
        "{reasons:?}"
    );
    assert_eq!(w.platform(), None);
}
