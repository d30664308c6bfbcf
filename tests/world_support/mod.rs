//! Shared by the property tests: a fixed base world, generated histories of world events,
//! the "heal" that removes every fault and user error, and helpers over attempt logs.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use opm_core::api::DependencyRef;
use opm_core::input::{ApiError, FetchError, InputKind, RenderError, SourceError};
use opm_core::world::{
    ArtifactDef, AttemptLog, Fault, FaultError, FieldPath, Grant, ModuleDef, SourceId, World,
    WorldEvent, fixtures,
};
use opm_core::{Config, EffectKind, Kind, ReleaseKey, ResourceId};
use proptest::prelude::*;
use serde_json::{Value, json};

pub const MODULE: &str = "example.com/modules/web@v0";
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
        });
    }
    let mut c = fixtures::release(NS, "c", "repo", "./app");
    fixtures::common_mut(&mut c).prune = s.prune[2];
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

/// Sources, modules, the `deployer` ServiceAccount, the Ready external release `ext` and
/// the four [`base_releases`].
pub fn base_world(s: &Setup) -> World {
    let mut w = World::new(Config::default(), t0(), s.seed);
    w.namespace(NS);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    w.add_module(MODULE, "v0.2.0", web_v020());
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

/// A generated event, small enough to shrink well; [`Ev::to_world`] makes it real.
#[derive(Clone, Debug)]
pub enum Ev {
    Values {
        r: usize,
        variant: u8,
    },
    Version {
        r: usize,
        variant: u8,
    },
    Artifact {
        revision: u32,
        n: usize,
        broken: bool,
    },
    Fault {
        kind: EffectKind,
        error: u8,
        secs: u32,
        times: Option<u32>,
    },
    Delete {
        r: usize,
    },
    Suspend {
        r: usize,
    },
    Resume {
        r: usize,
    },
    DependencyReady {
        ready: bool,
    },
    DeleteSa,
    CreateSa,
    Revoke,
    Tamper {
        r: usize,
        value: u8,
    },
    DeleteObject {
        r: usize,
    },
    Restart,
    Request {
        r: usize,
        token: u8,
    },
}

const FAULT_KINDS: [EffectKind; 12] = [
    EffectKind::AddFinalizer,
    EffectKind::RemoveFinalizer,
    EffectKind::CheckDependencies,
    EffectKind::ResolveSource,
    EffectKind::FetchArtifact,
    EffectKind::Render,
    EffectKind::CheckServiceAccount,
    EffectKind::CheckDrift,
    EffectKind::Apply,
    EffectKind::InspectStale,
    EffectKind::Prune,
    EffectKind::PatchStatus,
];

pub fn ev(faults_only: bool) -> BoxedStrategy<Ev> {
    let r = 0usize..4;
    let fault = (
        prop::sample::select(FAULT_KINDS.to_vec()),
        0u8..8,
        60u32..3600,
        prop::option::of(1u32..4),
    )
        .prop_map(|(kind, error, secs, times)| Ev::Fault {
            kind,
            error,
            secs,
            times,
        });
    if faults_only {
        return prop_oneof![
            4 => fault,
            1 => (2u32..50, 1usize..5).prop_map(|(revision, n)| Ev::Artifact { revision, n, broken: false }),
            1 => Just(Ev::Restart),
            1 => (r.clone(), any::<u8>()).prop_map(|(r, token)| Ev::Request { r, token }),
        ]
        .boxed();
    }
    prop_oneof![
        4 => (r.clone(), 0u8..5).prop_map(|(r, variant)| Ev::Values { r, variant }),
        3 => (r.clone(), 0u8..3).prop_map(|(r, variant)| Ev::Version { r, variant }),
        4 => (2u32..50, 1usize..5, prop::bool::weighted(0.2))
            .prop_map(|(revision, n, broken)| Ev::Artifact { revision, n, broken }),
        4 => fault,
        1 => r.clone().prop_map(|r| Ev::Delete { r }),
        1 => r.clone().prop_map(|r| Ev::Suspend { r }),
        1 => r.clone().prop_map(|r| Ev::Resume { r }),
        1 => any::<bool>().prop_map(|ready| Ev::DependencyReady { ready }),
        1 => Just(Ev::DeleteSa),
        1 => Just(Ev::CreateSa),
        1 => Just(Ev::Revoke),
        1 => (r.clone(), 0u8..3).prop_map(|(r, value)| Ev::Tamper { r, value }),
        1 => r.clone().prop_map(|r| Ev::DeleteObject { r }),
        1 => Just(Ev::Restart),
        1 => (r, any::<u8>()).prop_map(|(r, token)| Ev::Request { r, token }),
    ]
    .boxed()
}

/// Events at offsets (seconds) within `horizon`.
pub fn history(
    max_len: usize,
    horizon: u32,
    faults_only: bool,
) -> impl Strategy<Value = Vec<(u32, Ev)>> {
    prop::collection::vec((0..horizon, ev(faults_only)), 0..max_len)
}

/// Denser histories: between `min_len` and `max_len` events.
pub fn busy_history(
    min_len: usize,
    max_len: usize,
    horizon: u32,
    faults_only: bool,
) -> impl Strategy<Value = Vec<(u32, Ev)>> {
    prop::collection::vec((0..horizon, ev(faults_only)), min_len..max_len)
}

fn fault_error(kind: EffectKind, variant: u8) -> FaultError {
    let api = |v: u8| match v % 6 {
        0 => ApiError::Unavailable {
            message: "etcdserver: request timed out".into(),
        },
        1 => ApiError::TooManyRequests {
            message: "slow down".into(),
        },
        2 => ApiError::Forbidden {
            message: "denied by policy".into(),
        },
        3 => ApiError::Invalid {
            message: "spec.x: Invalid value".into(),
        },
        4 => ApiError::Timeout {
            message: "context deadline exceeded".into(),
        },
        _ => ApiError::Conflict {
            message: "the object has been modified".into(),
        },
    };
    if variant == 7 {
        return FaultError::Delay {
            duration: Duration::from_secs(120),
        };
    }
    match kind {
        EffectKind::ResolveSource if variant.is_multiple_of(3) => FaultError::Source {
            error: SourceError::NotReady {
                message: "reconciling".into(),
            },
        },
        EffectKind::FetchArtifact => FaultError::Fetch {
            error: match variant % 4 {
                0 => FetchError::Http { status: 503 },
                1 => FetchError::Timeout,
                2 => FetchError::Connection {
                    message: "connection refused".into(),
                },
                _ => FetchError::DigestMismatch {
                    expected: "a".into(),
                    actual: "b".into(),
                },
            },
        },
        EffectKind::Render => FaultError::Render {
            error: match variant % 3 {
                0 => RenderError::RegistryUnreachable {
                    message: "cannot do HTTP request".into(),
                },
                1 => RenderError::Timeout {
                    message: "cue timed out".into(),
                },
                _ => RenderError::Io {
                    message: "no space left".into(),
                },
            },
        },
        _ => FaultError::api(api(variant)),
    }
}

fn values(variant: u8) -> Value {
    match variant {
        0 => Value::Null,
        1 => json!({"replicas": 2}),
        2 => json!({"message": "changed"}),
        3 => json!({"replicas": 3, "image": "nginx:1.28"}),
        // Not in the closed #config: a RenderFailed stall.
        _ => json!({"bogus": true}),
    }
}

fn tamper_target(r: usize) -> ResourceId {
    let name = ["a", "b", "c", "d"][r % 4];
    if r == 2 {
        return ResourceId {
            kind: "ConfigMap".into(),
            namespace: NS.into(),
            name: "c-cm0".into(),
            version: "v1".into(),
            ..Default::default()
        };
    }
    ResourceId {
        kind: "ConfigMap".into(),
        namespace: NS.into(),
        name: format!("{name}-config"),
        version: "v1".into(),
        ..Default::default()
    }
}

impl Ev {
    pub fn to_world(&self, now: Timestamp) -> WorldEvent {
        let keys = release_keys();
        match self {
            Ev::Values { r, variant } => {
                let k = keys[*r].clone();
                if k.kind == Kind::Release {
                    let path = if *variant == 4 { "./missing" } else { "./app" };
                    WorldEvent::EditSpec {
                        key: k,
                        patch: json!({"path": path}),
                    }
                } else {
                    WorldEvent::EditSpec {
                        key: k,
                        patch: json!({"values": values(*variant)}),
                    }
                }
            }
            Ev::Version { r, variant } => {
                let v = ["v0.2.1", "v0.2.0", "v9.9.9"][*variant as usize % 3];
                let k = keys[*r].clone();
                if k.kind == Kind::Release {
                    WorldEvent::EditSpec {
                        key: k,
                        patch: json!({"interval": (["5m", "1m", "10m"][*variant as usize % 3])}),
                    }
                } else {
                    WorldEvent::EditSpec {
                        key: k,
                        patch: json!({"module": {"version": v}}),
                    }
                }
            }
            Ev::Artifact {
                revision,
                n,
                broken,
            } => WorldEvent::NewArtifact {
                source: source(),
                artifact: artifact(*revision, *n, *broken),
            },
            Ev::Fault {
                kind,
                error,
                secs,
                times,
            } => {
                let mut f = Fault::always(*kind, fault_error(*kind, *error))
                    .between(now, now + Duration::from_secs(u64::from(*secs)));
                f.times = *times;
                WorldEvent::Fault { fault: f }
            }
            Ev::Delete { r } => WorldEvent::Delete {
                key: keys[*r].clone(),
            },
            Ev::Suspend { r } => WorldEvent::Suspend {
                key: keys[*r].clone(),
            },
            Ev::Resume { r } => WorldEvent::Resume {
                key: keys[*r].clone(),
            },
            Ev::DependencyReady { ready } => WorldEvent::DependencyReady {
                key: external_key(),
                ready: *ready,
            },
            Ev::DeleteSa => WorldEvent::DeleteServiceAccount {
                namespace: NS.into(),
                name: "deployer".into(),
            },
            Ev::CreateSa => WorldEvent::CreateServiceAccount {
                namespace: NS.into(),
                name: "deployer".into(),
                grants: vec![],
            },
            Ev::Revoke => WorldEvent::RevokeGrants {
                namespace: NS.into(),
                name: "deployer".into(),
            },
            Ev::Tamper { r, value } => WorldEvent::TamperObject {
                id: tamper_target(*r),
                manager: "kubectl-edit".into(),
                field: FieldPath::new("data", if *r == 2 { "rev" } else { "message" }),
                value: json!(format!("tampered-{value}")),
            },
            Ev::DeleteObject { r } => WorldEvent::DeleteObject {
                id: tamper_target(*r),
            },
            Ev::Restart => WorldEvent::OperatorRestart,
            Ev::Request { r, token } => WorldEvent::RequestReconcile {
                key: keys[*r].clone(),
                token: token.to_string(),
            },
        }
    }
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
        });
        c.drift_detection = Some(opm_core::api::DriftDetection {
            mode: opm_core::api::DriftMode::Correct,
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
    ];
    if !w.rbac().account_exists(NS, "deployer") {
        evs.push(WorldEvent::CreateServiceAccount {
            namespace: NS.into(),
            name: "deployer".into(),
            grants: vec![],
        });
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
