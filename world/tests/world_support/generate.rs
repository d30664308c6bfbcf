//! Generated world events: a small enum that shrinks well, and what each becomes.

use std::time::Duration;

use jiff::Timestamp;
use opm_core::input::{ApiError, FetchError, RenderError, SourceError};
use opm_core::opm::platform::Evaluation;
use opm_core::{EffectKind, Kind, ResourceId};
use opm_world::{Fault, FaultError, FieldPath, PlatformDef, WorldEvent};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{NS, artifact, external_key, release_keys, source};

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
    /// The Platform (SPEC §30): 0 created Ready at v2.0.0, 1 bumped to v2.1.0, 2 its
    /// evaluation fails (not Ready), 3 deleted.
    Platform {
        variant: u8,
    },
}

/// What a fault can hit: every effect the machine waits on.
const FAULT_KINDS: [EffectKind; EffectKind::AWAITED.len()] = EffectKind::AWAITED;

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
        3 => (r.clone(), 0u8..4).prop_map(|(r, variant)| Ev::Version { r, variant }),
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
        1 => (0u8..4).prop_map(|variant| Ev::Platform { variant }),
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
            retry_after_secs: None,
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
                // v0.3.0 is the OPM module: rendered through the Platform.
                let v = ["v0.2.1", "v0.2.0", "v9.9.9", super::OPM_VERSION][*variant as usize % 4];
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
            Ev::Platform { variant } => match variant % 4 {
                0 => WorldEvent::CreatePlatform {
                    platform: super::platform("v2.0.0"),
                },
                1 => WorldEvent::ChangePlatform {
                    platform: super::platform("v2.1.0"),
                },
                2 => WorldEvent::ChangePlatform {
                    platform: PlatformDef {
                        evaluation: Some(Evaluation::Failed {
                            message: "cannot find module providing package".into(),
                            transient: false,
                        }),
                        ..super::platform("v2.1.0")
                    },
                },
                _ => WorldEvent::DeletePlatform,
            },
        }
    }
}
