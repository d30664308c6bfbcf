//! SPEC §1: field names, omission of empty values, CRD shape; inputs/effects as JSON.

use opm_core::api::{self, ModuleRelease, Release, ReleaseStatus};
use opm_core::effect::{Effect, Event, EventType};
use opm_core::input::{ApiError, Input, InputKind, RenderError};
use opm_core::{Kind, Outcome, ReleaseKey, ReleaseObject};
use serde_json::{Value, json};

fn module_release_json() -> Value {
    json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": "ModuleRelease",
        "metadata": {"name": "web", "namespace": "demo", "generation": 3},
        "spec": {
            "module": {"path": "example.com/modules/web@v0", "version": "v0.2.1"},
            "values": {"replicas": 2, "image": "nginx"},
            "dependsOn": [{"name": "db"}],
            "interval": "1m",
            "timeout": "2m",
            "prune": true,
            "serviceAccountName": "deployer",
            "rollout": {"forceConflicts": true},
            "driftDetection": {"mode": "Correct"}
        },
        "status": {
            "observedGeneration": 3,
            "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                            "message": "Reconciliation succeeded",
                            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 3}],
            "releaseUUID": "0b0f6b9c-0000-5000-8000-000000000000",
            "lastAttemptedAction": "reconcile",
            "lastAttemptedAt": "2026-01-01T00:00:00Z",
            "lastAttemptedDuration": "1.5s",
            "failureCounters": {"apply": 2},
            "inventory": {"revision": 4, "digest": "sha256:aa", "count": 1,
                          "entries": [{"group": "apps", "kind": "Deployment", "namespace": "demo",
                                       "name": "web", "v": "v1", "component": "web"}]},
            "history": [{"sequence": 7, "action": "reconcile", "phase": "complete",
                         "startedAt": "2026-01-01T00:00:00Z", "inventoryCount": 1}],
            "nextRetryAt": "2026-01-01T00:05:00Z"
        }
    })
}

#[test]
fn module_release_round_trips_exactly() {
    let v = module_release_json();
    let mr: ModuleRelease = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(mr.spec.module.version, "v0.2.1");
    assert!(mr.spec.common.prune);
    assert_eq!(
        mr.spec.common.drift_detection.as_ref().unwrap().mode,
        api::DriftMode::Correct
    );
    assert_eq!(mr.status.as_ref().unwrap().failure_counters.apply, 2);
    assert_eq!(serde_json::to_value(&mr).unwrap(), v);
}

#[test]
fn release_round_trips_exactly() {
    let v = json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": "Release",
        "metadata": {"name": "app", "namespace": "demo"},
        "spec": {
            "sourceRef": {"kind": "OCIRepository", "name": "repo", "namespace": "flux-system"},
            "path": "./releases/app"
        },
        "status": {"source": {"ref": "OCIRepository/flux-system/repo", "artifactRevision": "v1@sha256:ab",
                              "artifactDigest": "sha256:ab", "artifactURL": "http://x/a.tgz"}}
    });
    let rel: Release = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(rel.spec.source_ref.kind, "OCIRepository");
    assert_eq!(serde_json::to_value(&rel).unwrap(), v);
}

#[test]
fn empty_status_serialises_to_nothing() {
    assert_eq!(
        serde_json::to_value(ReleaseStatus::default()).unwrap(),
        json!({})
    );
}

#[test]
fn crds_have_names_columns_and_status_subresource() {
    let crds = serde_json::to_value(api::crds()).unwrap();
    let expect = [
        (
            "modulereleases.releases.opmodel.dev",
            "mr",
            vec!["Ready", "Reason", "Module", "Version", "Age", "Retry"],
        ),
        (
            "releases.releases.opmodel.dev",
            "rel",
            vec![
                "Ready", "Reason", "Source", "Path", "Age", "Revision", "Retry",
            ],
        ),
    ];
    for (crd, (name, short, cols)) in crds.as_array().unwrap().iter().zip(expect) {
        assert_eq!(crd["metadata"]["name"], name);
        assert_eq!(crd["spec"]["group"], "releases.opmodel.dev");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(crd["spec"]["names"]["shortNames"], json!([short]));
        let version = &crd["spec"]["versions"][0];
        assert_eq!(version["name"], "v1alpha1");
        assert_eq!(version["subresources"]["status"], json!({}));
        let got: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(got, cols);
        let retry = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "Retry")
            .unwrap();
        assert_eq!(retry["priority"], 1);
        assert_eq!(retry["jsonPath"], ".status.nextRetryAt");
        // `date` would render the future retry time as `<invalid>` in kubectl.
        assert_eq!(retry["type"], "string");
        let status = &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert_eq!(status["conditions"]["x-kubernetes-list-type"], "map");
        assert_eq!(
            status["conditions"]["x-kubernetes-list-map-keys"],
            json!(["type"])
        );
        assert_eq!(status["history"]["x-kubernetes-list-type"], "atomic");
        assert_eq!(
            status["inventory"]["properties"]["entries"]["x-kubernetes-list-type"],
            "atomic"
        );
        assert!(status["releaseUUID"].is_object());
    }
    let mr_spec =
        &crds[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        mr_spec["properties"]["values"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    assert_eq!(mr_spec["required"], json!(["module"]));
}

#[test]
fn inputs_and_effects_are_tagged_json() {
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mr: ModuleRelease = serde_json::from_value(module_release_json()).unwrap();
    let input = Input::new(
        now,
        InputKind::Observed {
            key: ReleaseKey {
                kind: Kind::ModuleRelease,
                namespace: "demo".into(),
                name: "web".into(),
            },
            object: Some(Box::new(ReleaseObject::ModuleRelease(mr))),
        },
    );
    let line = serde_json::to_string(&input).unwrap();
    assert!(
        line.starts_with(r#"{"now":"2026-01-01T00:00:00Z","kind":{"type":"observed""#),
        "{line}"
    );
    let back: Input = serde_json::from_str(&line).unwrap();
    assert_eq!(back, input);

    let rendered = Input::new(
        now,
        InputKind::Rendered {
            result: Err(RenderError::Resolution {
                message: "module not found".into(),
            }),
        },
    );
    let v = serde_json::to_value(&rendered).unwrap();
    assert_eq!(
        v["kind"],
        json!({"type": "rendered", "result": {"Err": {"type": "resolution", "message": "module not found"}}})
    );
    assert_eq!(serde_json::from_value::<Input>(v).unwrap(), rendered);

    let patched = InputKind::StatusPatched {
        result: Err(ApiError::Conflict {
            message: "x".into(),
        }),
    };
    let s = serde_json::to_string(&patched).unwrap();
    assert_eq!(serde_json::from_str::<InputKind>(&s).unwrap(), patched);

    let effects = vec![
        Effect::EmitEvent {
            event: Event {
                event_type: EventType::Warning,
                reason: opm_core::Reason::ApplyFailed,
                action: "Apply".into(),
                note: "boom".into(),
            },
        },
        Effect::Done {
            outcome: Outcome::FailedStalled,
            reason: opm_core::Reason::ApplyFailed,
            requeue_after: Some(std::time::Duration::from_secs(1800)),
        },
    ];
    let s = serde_json::to_string(&effects).unwrap();
    assert!(
        s.contains(r#""type":"emitEvent""#) && s.contains(r#""eventType":"Warning""#),
        "{s}"
    );
    assert!(s.contains(r#""outcome":"failedStalled""#), "{s}");
    assert_eq!(serde_json::from_str::<Vec<Effect>>(&s).unwrap(), effects);
}

#[test]
fn durations_are_validated_by_the_schema() {
    let crds = serde_json::to_value(api::crds()).unwrap();
    let spec = &crds[1]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["interval"]["pattern"], api::common::GO_DURATION);
    assert_eq!(spec["timeout"]["pattern"], api::common::GO_DURATION);
    // The pattern and the core's parser agree on typical values.
    for ok in ["5m", "1h30m", "10s", "1.5s", "300ms", "0"] {
        assert!(opm_core::duration::parse(ok).is_ok(), "{ok}");
    }
}
