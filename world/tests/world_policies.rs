//! SPEC §28 in the simulated world: `ssa: IfNotPresent` creates but never updates, `Merge`
//! never takes a field another manager owns, `Ignore` never writes, and an object without
//! a policy is corrected (`driftDetection: Correct`). The same release, the same edits and
//! the same new revision as the e2e test `policies_give_the_cluster_the_world_predicts`
//! (interpreter/tests/operator/drift_policies.rs), and the same resulting cluster.

use std::time::Duration;

use jiff::Timestamp;
use opm_core::object::ResourceId;
use opm_core::{Config, ReleaseKey};
use opm_world::{ArtifactDef, FieldPath, SourceId, World, WorldEvent, fixtures};
use serde_json::{Value, json};

const NS: &str = "demo";

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn at(secs: u64) -> Timestamp {
    t0() + Duration::from_secs(secs)
}

/// The release's objects at `revision` (`data.k` and `data.j` carry it); each ConfigMap
/// named after its policy.
fn components(revision: &str) -> Value {
    let cm = |name: &str, ssa: Option<&str>| {
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"k": revision, "j": revision}});
        if let Some(ssa) = ssa {
            o["metadata"]["annotations"] = json!({"releases.opmodel.dev/ssa": ssa});
        }
        o
    };
    json!({"app": {
        "ifnp": cm("p-ifnp", Some("IfNotPresent")),
        "mrg": cm("p-mrg", Some("Merge")),
        "ign": cm("p-ign", Some("Ignore")),
        "plain": cm("p-plain", None),
    }})
}

fn cm_id(name: &str) -> ResourceId {
    ResourceId {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: NS.into(),
        name: name.into(),
    }
}

/// `data` of each ConfigMap, `null` when it does not exist.
fn cluster(w: &World) -> Value {
    let mut out = serde_json::Map::new();
    for name in ["p-ifnp", "p-mrg", "p-ign", "p-plain"] {
        let data = w
            .object(&cm_id(name))
            .map_or(Value::Null, |o| o.manifest()["data"].clone());
        out.insert(name.into(), data);
    }
    Value::Object(out)
}

fn ready(w: &World, key: &ReleaseKey) -> String {
    w.release(key)
        .and_then(|o| o.status())
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| format!("{}/{}", c.status, c.reason))
        .unwrap_or_default()
}

#[test]
fn policies_give_the_cluster_the_operator_gives() {
    let cfg = Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster);
    let mut w = World::new(cfg, t0(), 1);
    w.namespace(NS);
    let src = SourceId::new("OCIRepository", NS, "pol");
    w.publish(
        &src,
        ArtifactDef::package("r1", ".", "pol", NS, components("ours")),
    );
    let mut obj = fixtures::release(NS, "pol", "pol", ".");
    let common = fixtures::common_mut(&mut obj);
    common.prune = true;
    common.drift_detection = Some(serde_json::from_value(json!({"mode": "Correct"})).unwrap());
    let key = w.create_release(obj).unwrap();
    w.drive_until(at(10)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    assert_eq!(
        cluster(&w),
        json!({
            "p-ifnp": {"j": "ours", "k": "ours"},
            "p-mrg": {"j": "ours", "k": "ours"},
            "p-ign": null,
            "p-plain": {"j": "ours", "k": "ours"},
        })
    );

    // Another writer (a `kubectl edit`) changes `data.k` of three of them.
    for name in ["p-ifnp", "p-mrg", "p-plain"] {
        w.apply_event(WorldEvent::TamperObject {
            id: cm_id(name),
            manager: "someone".into(),
            field: FieldPath::new("data", "k"),
            value: json!("theirs"),
        })
        .unwrap();
    }
    // A new revision changes every value.
    w.schedule(
        at(60),
        WorldEvent::NewArtifact {
            source: src.clone(),
            artifact: ArtifactDef::package("r2", ".", "pol", NS, components("v2")),
        },
    );
    w.drive_until(at(120)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    assert_eq!(cluster(&w), expected());
}

/// The cluster after the edits and revision `v2`, as the e2e test finds it too:
/// IfNotPresent keeps what it had (the edit included), Merge leaves `k` to its new owner
/// and updates `j`, Ignore never wrote, the plain object is corrected and updated.
fn expected() -> Value {
    json!({
        "p-ifnp": {"j": "ours", "k": "theirs"},
        "p-mrg": {"j": "v2", "k": "theirs"},
        "p-ign": null,
        "p-plain": {"j": "v2", "k": "v2"},
    })
}
