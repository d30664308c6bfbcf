//! The trigger rules of `opm_core::triggers` as the simulated world applies them (the live
//! controllers call the same functions): a ServiceAccount appearing and a dependency
//! turning Ready.

use std::time::Duration;

use jiff::Timestamp;
use opm_core::{Config, ReleaseKey};
use opm_world::{Grant, ModuleDef, World, WorldEvent, fixtures};
use serde_json::json;

const MODULE: &str = "example.com/modules/web@v0";

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn at(secs: u64) -> Timestamp {
    t0() + Duration::from_secs(secs)
}

fn ready(w: &World, key: &ReleaseKey) -> String {
    let c = w
        .release(key)
        .and_then(|o| o.status())
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .unwrap();
    format!("{}/{}", c.status, c.reason)
}

fn attempts_of(w: &World, key: &ReleaseKey) -> Vec<Timestamp> {
    w.timeline()
        .iter()
        .filter(|e| &e.key == key)
        .map(|e| e.started_at)
        .collect()
}

#[test]
fn a_new_service_account_retriggers_only_releases_waiting_for_one_3s_later() {
    let mut w = World::new(
        Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster),
        t0(),
        1,
    );
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    let waiting = w
        .create_release(fixtures::module_release("demo", "app", MODULE, "v0.2.1"))
        .unwrap();
    w.apply_event(WorldEvent::EditSpec {
        key: waiting.clone(),
        patch: json!({"serviceAccountName": "deployer"}),
    })
    .unwrap();
    let other = w
        .create_release(fixtures::module_release("demo", "other", MODULE, "v0.2.1"))
        .unwrap();
    w.drive_until(at(60)).unwrap();
    assert_eq!(ready(&w, &waiting), "False/ImpersonationFailed");
    assert_eq!(ready(&w, &other), "True/ReconciliationSucceeded");
    let other_before = attempts_of(&w, &other).len();
    w.schedule(
        at(100),
        WorldEvent::CreateServiceAccount {
            namespace: "demo".into(),
            name: "deployer".into(),
            grants: vec![Grant::namespace_admin()],
        },
    );
    w.drive_until(at(102)).unwrap();
    assert_eq!(
        ready(&w, &waiting),
        "False/ImpersonationFailed",
        "not before 3 s"
    );
    w.drive_until(at(103)).unwrap();
    assert_eq!(ready(&w, &waiting), "True/ReconciliationSucceeded");
    assert_eq!(*attempts_of(&w, &waiting).last().unwrap(), at(103));
    // The Ready release of the namespace is not disturbed (its next requeue is 5 min on).
    assert_eq!(attempts_of(&w, &other).len(), other_before);
}

#[test]
fn a_dependency_that_stays_ready_retriggers_nothing() {
    let mut w = World::new(
        Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster),
        t0(),
        3,
    );
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    let db = w
        .add_external_release(fixtures::module_release("demo", "db", MODULE, "v0.2.1"))
        .unwrap();
    let mut app = fixtures::module_release("demo", "app", MODULE, "v0.2.1");
    fixtures::common_mut(&mut app).depends_on = vec![opm_core::api::DependencyRef {
        name: "db".into(),
        ..Default::default()
    }];
    let app = w.create_release(app).unwrap();
    w.apply_event(WorldEvent::DependencyReady {
        key: db.clone(),
        ready: true,
    })
    .unwrap();
    w.drive_until(at(10)).unwrap();
    assert_eq!(ready(&w, &app), "True/ReconciliationSucceeded");
    let before = attempts_of(&w, &app).len();
    // Ready again (already Ready): no transition, no early attempt.
    w.schedule(
        at(20),
        WorldEvent::DependencyReady {
            key: db,
            ready: true,
        },
    );
    w.drive_until(at(30)).unwrap();
    assert_eq!(attempts_of(&w, &app).len(), before);
}
