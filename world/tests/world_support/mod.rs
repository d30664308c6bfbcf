//! Shared by the property tests: a fixed base world, generated histories of world events,
//! the "heal" that removes every fault and user error, and helpers over attempt logs.
#![allow(dead_code)]

mod convergence;
mod generate;
#[allow(unused_imports)]
pub use convergence::*;
pub use generate::*;

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use opm_core::api::DependencyRef;
use opm_core::input::{InputKind, RenderError};
use opm_core::{Config, Kind, ReleaseKey, ResourceId};
use opm_world::{
    ArtifactDef, AttemptLog, Grant, ModuleDef, PlatformDef, SourceId, World, WorldEvent, fixtures,
};
use proptest::prelude::*;
use serde_json::{Value, json};

pub const MODULE: &str = "example.com/modules/web@v0";
/// The version of [`MODULE`] that is an OPM module (SPEC §30): the web module's objects,
/// rendered through the Platform.
pub const OPM_VERSION: &str = "v0.3.0";

/// The Platform pinning the OPM catalog at `version`, Ready once evaluated.
pub fn platform(version: &str) -> PlatformDef {
    PlatformDef::catalog("opmodel.dev/catalogs/opm@v2", version)
}
pub const NS: &str = "demo";

pub fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

pub fn at(secs: u64) -> Timestamp {
    t0() + Duration::from_secs(secs)
}

/// Cases per property: `PROPTEST_CASES` or `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `default` cases (or `PROPTEST_CASES`), failures persisted in
/// `proptest-regressions/<file>.txt` and replayed first on every run.
pub fn pt_config(file: &'static str, default: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: cases(default),
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(file),
        )),
        max_shrink_iters: 256,
        ..Default::default()
    }
}

pub fn key(kind: Kind, name: &str) -> ReleaseKey {
    ReleaseKey {
        kind,
        namespace: NS.into(),
        name: name.into(),
    }
}

/// The releases of the base world, by index in generated events.
pub fn release_keys() -> Vec<ReleaseKey> {
    vec![
        key(Kind::ModuleRelease, "a"),
        key(Kind::ModuleRelease, "b"),
        key(Kind::Release, "c"),
        key(Kind::ModuleRelease, "d"),
    ]
}

pub fn external_key() -> ReleaseKey {
    key(Kind::ModuleRelease, "ext")
}

pub fn source() -> SourceId {
    SourceId::new("OCIRepository", NS, "repo")
}

/// `n` ConfigMaps (and a Namespace when `with_ns`), as a release package exports them.
pub fn components(n: usize, revision: u32) -> Value {
    let mut objs = serde_json::Map::new();
    for i in 0..n {
        objs.insert(
            format!("cm{i}"),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("c-cm{i}")},
                "data": {"rev": revision.to_string()}}),
        );
    }
    objs.insert(
        "ns".into(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("c-extra-{}", n % 2)}}),
    );
    json!({ "main": objs })
}

pub fn artifact(revision: u32, n: usize, broken: bool) -> ArtifactDef {
    let mut a = ArtifactDef::package(
        &format!("v{revision}"),
        "./app",
        "c",
        NS,
        components(n, revision),
    );
    if broken {
        a.paths.insert(
            "app".into(),
            Err(RenderError::Evaluation {
                message: "components.main: conflicting values".into(),
            }),
        );
    }
    a
}

/// Module v0.2.0: the web module without its ServiceAccount (so a version change prunes).
fn web_v020() -> ModuleDef {
    let mut m = ModuleDef::web();
    if let Some(c) = m
        .components
        .get_mut("config")
        .and_then(Value::as_object_mut)
    {
        c.remove("serviceaccount");
    }
    m
}

/// Options of the base world that vary per case.
#[derive(Clone, Debug)]
pub struct Setup {
    pub prune: [bool; 4],
    pub seed: u64,
}

pub fn setup() -> impl Strategy<Value = Setup> {
    (any::<[bool; 4]>(), any::<u64>()).prop_map(|(prune, seed)| Setup { prune, seed })
}

/// The releases of the base world: a: plain ModuleRelease; b: impersonates `deployer`,
/// drift `Correct`; c: a Release of the `repo` source; d: depends on a and on `ext`.
pub fn base_releases(s: &Setup) -> Vec<opm_core::ReleaseObject> {
    let mut a = fixtures::module_release(NS, "a", MODULE, "v0.2.1");
    fixtures::common_mut(&mut a).prune = s.prune[0];
    let mut b = fixtures::module_release(NS, "b", MODULE, "v0.2.1");
    {
        let c = fixtures::common_mut(&mut b);
        c.prune = s.prune[1];
        c.service_account_name = Some("deployer".into());
        c.drift_detection = Some(opm_core::api::DriftDetection {
            mode: opm_core::api::DriftMode::Correct,
            ignore: Vec::new(),
        });
    }
    let mut c = fixtures::release(NS, "c", "repo", "./app");
    fixtures::common_mut(&mut c).prune = s.prune[2];
    // Deletes whatever `prune` says and waits until its objects are gone (SPEC §12).
    fixtures::common_mut(&mut c).deletion_policy =
        Some(opm_core::api::DeletionPolicy::WaitForTermination);
    let mut d = fixtures::module_release(NS, "d", MODULE, "v0.2.1");
    {
        let c = fixtures::common_mut(&mut d);
        c.prune = s.prune[3];
        c.depends_on = vec![
            DependencyRef {
                name: "a".into(),
                ..Default::default()
            },
            DependencyRef {
                name: "ext".into(),
                ..Default::default()
            },
        ];
    }
    vec![a, b, c, d]
}

/// Sources, modules (one version an OPM module), a Ready Platform, the `deployer`
/// ServiceAccount, the Ready external release `ext` and
/// the four [`base_releases`].
pub fn base_world(s: &Setup) -> World {
    let mut w = World::new(operator_cfg(), t0(), s.seed);
    w.namespace(NS);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    w.add_module(MODULE, "v0.2.0", web_v020());
    w.add_module(MODULE, OPM_VERSION, ModuleDef::opm_web());
    w.apply_platform(&platform("v2.0.0"));
    w.publish(&source(), artifact(1, 3, false));
    w.add_service_account(NS, "deployer", vec![Grant::namespace_admin()]);
    w.add_external_release(fixtures::module_release(NS, "ext", MODULE, "v0.2.1"))
        .unwrap();
    w.apply_event(WorldEvent::DependencyReady {
        key: external_key(),
        ready: true,
    })
    .unwrap();
    for o in base_releases(s) {
        w.create_release(o).unwrap();
    }
    w
}

/// Schedules the history's events (fault windows start at their event's time).
pub fn schedule(w: &mut World, history: &[(u32, Ev)]) {
    for (secs, e) in history {
        let when = at(u64::from(*secs));
        w.schedule(when, e.to_world(when));
    }
}

/// Recreates base releases that are gone (after their deletion finished), with the
/// heal's options (objects they orphaned may carry another manager's edits).
pub fn recreate_missing(w: &mut World, s: &Setup) {
    for mut o in base_releases(s) {
        let c = fixtures::common_mut(&mut o);
        c.rollout = Some(opm_core::api::Rollout {
            force_conflicts: true,
            // A tampering event may have re-created a deleted object without labels.
            adopt_existing: true,
        });
        c.drift_detection = Some(opm_core::api::DriftDetection {
            mode: opm_core::api::DriftMode::Correct,
            ignore: Vec::new(),
        });
        if w.release(&o.key()).is_none() {
            w.create_release(o).unwrap();
        }
    }
}

/// Removes every fault and user error: what an operator on call would do.
pub fn heal(w: &mut World) {
    let now = w.now();
    let mut evs = vec![
        WorldEvent::ClearFaults,
        WorldEvent::Grant {
            namespace: NS.into(),
            name: "deployer".into(),
            grant: Grant::namespace_admin(),
        },
        WorldEvent::DependencyReady {
            key: external_key(),
            ready: true,
        },
        WorldEvent::NewArtifact {
            source: source(),
            artifact: artifact(1000, 2, false),
        },
        WorldEvent::CreatePlatform {
            platform: platform("v2.0.0"),
        },
    ];
    if !w.rbac().account_exists(NS, "deployer") {
        evs.push(WorldEvent::CreateServiceAccount {
            namespace: NS.into(),
            name: "deployer".into(),
            grants: vec![],
        });
    }
    // A deletion held back by a dependent that is not being deleted (SPEC §32) waits for
    // as long as the dependent stays: on call, one lets it go with its objects orphaned
    // (the recreated release adopts them again).
    for k in release_keys() {
        if w.release(&k)
            .is_some_and(|o| o.meta().deletion_timestamp.is_some())
            && release_keys().iter().any(|d| {
                w.release(d).is_some_and(|o| {
                    o.meta().deletion_timestamp.is_none()
                        && opm_core::deps::depends_on(d, &o.common().depends_on, &k)
                })
            })
        {
            evs.push(WorldEvent::Annotate {
                key: k.clone(),
                name: opm_core::constants::ORPHAN_ANNOTATION.into(),
                value: Some("true".into()),
            });
        }
    }
    for k in release_keys() {
        let patch = if k.kind == Kind::Release {
            json!({"suspend": null, "path": "./app", "rollout": {"forceConflicts": true}, "driftDetection": {"mode": "Correct"}})
        } else {
            json!({"suspend": null, "values": null, "module": {"version": "v0.2.1"}, "rollout": {"forceConflicts": true}, "driftDetection": {"mode": "Correct"}})
        };
        if w.release(&k).is_some() {
            evs.push(WorldEvent::EditSpec { key: k, patch });
        }
    }
    for e in evs {
        w.schedule(now, e);
    }
}

/// Builds the base world, runs the history to the horizon.
pub fn run(s: &Setup, history: &[(u32, Ev)], horizon: u32) -> World {
    let mut w = base_world(s);
    schedule(&mut w, history);
    w.drive_until(at(u64::from(horizon)))
        .unwrap_or_else(|e| panic!("world error: {e}"));
    w
}

/// Identities (group, kind, namespace, name) of an inventory.
pub fn inventory_ids(
    status: Option<&opm_core::api::ReleaseStatus>,
) -> BTreeSet<(String, String, String, String)> {
    status
        .and_then(|s| s.inventory.as_ref())
        .map(|i| {
            i.entries
                .iter()
                .map(|e| {
                    (
                        e.group.clone(),
                        e.kind.clone(),
                        e.namespace.clone(),
                        e.name.clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn identity(id: &ResourceId) -> (String, String, String, String) {
    (
        id.group.clone(),
        id.kind.clone(),
        id.namespace.clone(),
        id.name.clone(),
    )
}

/// Whether the attempt's status write (if any) failed.
pub fn status_write_failed(log: &AttemptLog) -> bool {
    log.inputs
        .iter()
        .any(|i| matches!(&i.kind, InputKind::StatusPatched { result: Err(_) }))
}

/// The operator identity allowed everywhere (`--allow-operator-identity=cluster`), for
/// scenarios about something other than tenancy (SPEC §15: tests/tenancy_rules.rs).
pub fn operator_cfg() -> Config {
    Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster)
}
