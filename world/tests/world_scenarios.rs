//! Whole scenarios in the simulated world: the core and the world together, over time.

use std::time::Duration;

use jiff::Timestamp;
use opm_core::input::{FetchError, RenderError};
use opm_core::{Config, Effect, EffectKind, Outcome, ReleaseKey};
use opm_world::{
    ArtifactDef, Fault, FaultError, Grant, ModuleDef, SourceId, World, WorldEvent, fixtures,
};
use serde_json::json;

/// The operator identity allowed everywhere: these scenarios are about something else.
fn operator_cfg() -> Config {
    Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster)
}

const MODULE: &str = "example.com/modules/web@v0";

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn at(secs: u64) -> Timestamp {
    t0() + Duration::from_secs(secs)
}

fn module_world() -> (World, ReleaseKey) {
    let mut w = World::new(operator_cfg(), t0(), 1);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    let key = w
        .create_release(fixtures::module_release("demo", "app", MODULE, "v0.2.1"))
        .unwrap();
    (w, key)
}

fn components(n: usize) -> serde_json::Value {
    let mut objs = serde_json::Map::new();
    for i in 0..n {
        objs.insert(
            format!("cm{i}"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm{i}")},
                "data": {"i": i.to_string()}}),
        );
    }
    json!({ "main": objs })
}

fn release_world(prune: bool) -> (World, ReleaseKey, SourceId) {
    let mut w = World::new(operator_cfg(), t0(), 2);
    w.namespace("demo");
    let src = SourceId::new("OCIRepository", "demo", "repo");
    w.publish(
        &src,
        ArtifactDef::package("v1", "./app", "app", "demo", components(3)),
    );
    let mut obj = fixtures::release("demo", "app", "repo", "./app");
    fixtures::common_mut(&mut obj).prune = prune;
    let key = w.create_release(obj).unwrap();
    (w, key, src)
}

fn ready(w: &World, key: &ReleaseKey) -> String {
    w.release(key)
        .and_then(|o| o.status())
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| format!("{}/{}", c.status, c.reason))
        .unwrap_or_default()
}

fn requeues(w: &World) -> Vec<u64> {
    w.timeline()
        .iter()
        .map(|e| e.requeue_after.map_or(0, |d| d.as_secs()))
        .collect()
}

#[test]
fn module_release_applies_then_noops_every_interval() {
    let (mut w, key) = module_world();
    let log = w.run_attempt(&key).unwrap().clone();
    assert_eq!(log.outcome, Some(Outcome::Applied));
    assert_eq!(log.status_mismatches, 0);
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    let inv = log.status.as_ref().unwrap().inventory.clone().unwrap();
    assert_eq!(inv.count, 4);
    assert_eq!(w.store().len(), 5, "namespace + 4 objects");
    w.drive_until(at(900)).unwrap();
    let outcomes: Vec<_> = w
        .timeline()
        .iter()
        .map(|e| (e.started_at, e.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (at(0), Some(Outcome::Applied)),
            (at(300), Some(Outcome::NoOp)),
            (at(600), Some(Outcome::NoOp)),
            (at(900), Some(Outcome::NoOp)),
        ]
    );
    // NoOp attempts write nothing to the cluster.
    assert!(
        w.logs()[1..]
            .iter()
            .all(|l| !l.effects().any(|e| matches!(e, Effect::Apply { .. })))
    );
}

#[test]
fn artifact_server_down_twenty_minutes_backs_off_then_recovers() {
    let (mut w, key, _) = release_world(false);
    w.add_fault(
        Fault::always(
            EffectKind::FetchArtifact,
            FaultError::Fetch {
                error: FetchError::Http { status: 503 },
            },
        )
        .between(t0(), at(20 * 60)),
    )
    .unwrap();
    w.drive_until(at(30 * 60)).unwrap();
    let rq = requeues(&w);
    // 5s, 10s, ... capped at 5m while down; then success and the 5m interval.
    assert_eq!(&rq[..7], &[5, 10, 20, 40, 80, 160, 300]);
    let first_ok = w
        .timeline()
        .iter()
        .position(|e| e.outcome == Some(Outcome::Applied))
        .unwrap();
    assert!(w.timeline()[first_ok].started_at >= at(20 * 60));
    assert!(
        w.timeline()[..first_ok]
            .iter()
            .all(|e| e.reason == "FetchFailed")
    );
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    let s = w.release(&key).unwrap().status().unwrap();
    assert_eq!(s.failure_counters.reconcile, 0);
    assert!(s.next_retry_at.is_none());
}

#[test]
fn forbidden_apply_stalls_until_rbac_is_fixed_and_a_change_arrives() {
    let (mut w, key) = module_world();
    w.apply_event(WorldEvent::EditSpec {
        key: key.clone(),
        patch: json!({"serviceAccountName": "deployer"}),
    })
    .unwrap();
    w.add_service_account("demo", "deployer", vec![]);
    w.drive_until(at(60)).unwrap();
    assert_eq!(ready(&w, &key), "False/ImpersonationFailed");
    assert_eq!(
        w.timeline().last().unwrap().requeue_after,
        Some(Duration::from_secs(1800))
    );
    w.apply_event(WorldEvent::Grant {
        namespace: "demo".into(),
        name: "deployer".into(),
        grant: Grant::namespace_admin(),
    })
    .unwrap();
    // RBAC edits are not watched: still stalled until the 30-minute recheck.
    w.drive_until(at(1799)).unwrap();
    assert_eq!(ready(&w, &key), "False/ImpersonationFailed");
    w.drive_until(at(1800)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
}

#[test]
fn stalled_render_recovers_on_a_new_source_revision() {
    let (mut w, key, src) = release_world(true);
    let mut broken = ArtifactDef::package("v2", "./app", "app", "demo", json!({}));
    broken.paths.insert(
        "app".into(),
        Err(RenderError::Evaluation {
            message: "components.main.cm0.data: conflicting values".into(),
        }),
    );
    w.drive_until(at(1)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    w.schedule(
        at(10),
        WorldEvent::NewArtifact {
            source: src.clone(),
            artifact: broken,
        },
    );
    w.schedule(
        at(100),
        WorldEvent::NewArtifact {
            source: src,
            artifact: ArtifactDef::package("v3", "./app", "app", "demo", components(2)),
        },
    );
    w.drive_until(at(99)).unwrap();
    assert_eq!(ready(&w, &key), "False/RenderFailed");
    let stalled = w.release(&key).unwrap().status().unwrap();
    assert!(
        stalled
            .conditions
            .iter()
            .any(|c| c.type_ == "Stalled" && c.status == "True")
    );
    w.drive_until(at(101)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    let last = w.timeline().last().unwrap();
    assert_eq!(last.outcome, Some(Outcome::AppliedAndPruned));
    assert_eq!(w.logs().last().unwrap().deleted.len(), 1, "cm2 pruned");
    let inv = w
        .release(&key)
        .unwrap()
        .status()
        .unwrap()
        .inventory
        .clone()
        .unwrap();
    assert_eq!(inv.count, 2);
}

#[test]
fn deletion_prunes_everything_then_releases_the_object() {
    let (mut w, key, _) = release_world(true);
    w.drive_until(at(1)).unwrap();
    assert_eq!(w.store().len(), 4);
    w.schedule(at(50), WorldEvent::Delete { key: key.clone() });
    w.drive_bounded(10).unwrap();
    assert!(w.release(&key).is_none());
    assert_eq!(w.store().len(), 1, "only the namespace is left");
}

#[test]
fn deletion_with_missing_service_account_waits_for_orphan_annotation() {
    let (mut w, key, _) = release_world(true);
    w.add_service_account("demo", "deployer", vec![Grant::namespace_admin()]);
    w.apply_event(WorldEvent::EditSpec {
        key: key.clone(),
        patch: json!({"serviceAccountName": "deployer"}),
    })
    .unwrap();
    w.drive_until(at(1)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    w.apply_event(WorldEvent::DeleteServiceAccount {
        namespace: "demo".into(),
        name: "deployer".into(),
    })
    .unwrap();
    w.apply_event(WorldEvent::Delete { key: key.clone() })
        .unwrap();
    w.drive_until(at(2)).unwrap();
    assert_eq!(ready(&w, &key), "False/DeletionSAMissing");
    w.schedule(
        at(60),
        WorldEvent::Annotate {
            key: key.clone(),
            name: "opm.dev/force-delete-orphan".into(),
            value: Some("true".into()),
        },
    );
    w.drive_until(at(61)).unwrap();
    assert!(w.release(&key).is_none());
    assert_eq!(w.store().len(), 4, "objects orphaned, not deleted");
    assert!(
        w.events()
            .iter()
            .any(|e| e.event.reason == "OrphanedOnDeletion")
    );
}

#[test]
fn dependency_becoming_ready_triggers_dependent_at_once() {
    let mut w = World::new(operator_cfg(), t0(), 3);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    let db = w
        .add_external_release(fixtures::module_release("demo", "db", MODULE, "v0.2.1"))
        .unwrap();
    let mut app = fixtures::module_release("demo", "app", MODULE, "v0.2.1");
    fixtures::common_mut(&mut app).depends_on = vec![opm_core::api::DependencyRef {
        name: "db".into(),
        ..Default::default()
    }];
    let key = w.create_release(app).unwrap();
    w.schedule(
        at(45),
        WorldEvent::DependencyReady {
            key: db,
            ready: true,
        },
    );
    w.drive_until(at(46)).unwrap();
    let starts: Vec<_> = w
        .timeline()
        .iter()
        .map(|e| (e.started_at, e.outcome, e.reason.clone()))
        .collect();
    let blocked = "DependenciesNotReady".to_string();
    assert_eq!(starts.len(), 3);
    assert_eq!(
        starts[0],
        (at(0), Some(Outcome::FailedTransient), blocked.clone())
    );
    assert_eq!(starts[1], (at(30), Some(Outcome::FailedTransient), blocked));
    assert_eq!((starts[2].0, starts[2].1), (at(45), Some(Outcome::Applied)));
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
}

#[test]
fn drift_is_corrected_in_correct_mode() {
    let (mut w, key) = module_world();
    w.apply_event(WorldEvent::EditSpec {
        key: key.clone(),
        patch: json!({"driftDetection": {"mode": "Correct"}, "rollout": {"forceConflicts": true}}),
    })
    .unwrap();
    w.drive_until(at(1)).unwrap();
    let id = w
        .store()
        .objects()
        .find(|o| o.id.kind == "ConfigMap")
        .unwrap()
        .id
        .clone();
    w.schedule(
        at(100),
        WorldEvent::TamperObject {
            id: id.clone(),
            manager: "kubectl-edit".into(),
            field: opm_world::FieldPath::new("data", "message"),
            value: json!("edited"),
        },
    );
    w.drive_until(at(300)).unwrap();
    assert_eq!(w.timeline().last().unwrap().outcome, Some(Outcome::Applied));
    assert_eq!(
        w.object(&id).unwrap().manifest()["data"]["message"],
        "hello"
    );
}

#[test]
fn operator_restart_requeues_everything_at_once_and_resets_metrics() {
    let (mut w, key) = module_world();
    w.drive_until(at(10)).unwrap();
    assert!(!w.metrics().reconcile_total.is_empty());
    w.schedule(at(100), WorldEvent::OperatorRestart);
    w.drive_until(at(100)).unwrap();
    let last = w.timeline().last().unwrap();
    assert_eq!(
        (last.started_at, last.outcome),
        (at(100), Some(Outcome::NoOp))
    );
    assert_eq!(w.metrics().total_by_outcome().get(&Outcome::NoOp), Some(&1));
    assert_eq!(w.due(&key), Some(at(400)));
}

#[test]
fn conflicting_manager_stalls_without_force() {
    let (mut w, key) = module_world();
    w.drive_until(at(1)).unwrap();
    let id = w
        .store()
        .objects()
        .find(|o| o.id.kind == "ConfigMap")
        .unwrap()
        .id
        .clone();
    w.apply_event(WorldEvent::TamperObject {
        id,
        manager: "kubectl-edit".into(),
        field: opm_world::FieldPath::new("data", "message"),
        value: json!("edited"),
    })
    .unwrap();
    w.apply_event(WorldEvent::EditSpec {
        key: key.clone(),
        patch: json!({"values": {"message": "new"}}),
    })
    .unwrap();
    w.drive_until(at(2)).unwrap();
    assert_eq!(ready(&w, &key), "False/ApplyFailed");
    let msg = w
        .release(&key)
        .unwrap()
        .status()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message
        .clone();
    assert!(msg.contains("kubectl-edit"), "{msg}");
}
