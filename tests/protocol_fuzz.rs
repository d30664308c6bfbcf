//! The machine never panics, always finishes, keeps the batch shape, writes status at most
//! once, and replays byte for byte, whatever results the effects report.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use opm_core::api::{DependencyRef, ModuleRef, ModuleRelease, ModuleReleaseSpec, ReleaseStatus};
use opm_core::effect::Effect;
use opm_core::input::*;
use opm_core::machine::batch_shape_ok;
use opm_core::trace::{Recorder, TraceHeader, replay};
use opm_core::{Attempt, Config, Input, InputKind, Outcome, ReleaseObject};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::json;

/// The operator identity allowed everywhere: these scenarios are about something else.
fn operator_cfg() -> Config {
    Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster)
}

fn api_error(c: u8) -> ApiError {
    let message = format!("m{c}");
    match c % 8 {
        0 => ApiError::Forbidden { message },
        1 => ApiError::NotFound { message },
        2 => ApiError::Conflict { message },
        3 => ApiError::Invalid { message },
        4 => ApiError::Unavailable { message },
        5 => ApiError::TooManyRequests {
            message,
            retry_after_secs: None,
        },
        6 => ApiError::Timeout { message },
        _ => ApiError::Other { code: 418, message },
    }
}

fn render_value(c: u8) -> serde_json::Value {
    let obj =
        |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    match c % 7 {
        0 => json!({"kind": "ModuleRelease", "components": {"a": {"x": obj("x"), "y": obj("y")}}}),
        1 => json!({"kind": "ModuleRelease", "components": {"a": {"x": obj("x")}}}),
        2 => json!({"kind": "ModuleRelease", "components": {}}),
        3 => json!([1, 2, 3]),
        4 => json!({"kind": "Other"}),
        5 => json!({"kind": "ModuleRelease", "components": {"a": {"x": {"kind": 3}}}}),
        _ => {
            json!({"kind": "ModuleRelease", "components": {"a": {"x": obj("x")}, "b": {"x": obj("x")}}})
        }
    }
}

/// A result for `effect` chosen by `c`.
fn respond(effect: &Effect, c: u8) -> InputKind {
    let err = c % 4 == 3;
    match effect {
        Effect::AddFinalizer { .. } => InputKind::FinalizerAdded {
            result: if err { Err(api_error(c)) } else { Ok(()) },
        },
        Effect::RemoveFinalizer { .. } => InputKind::FinalizerRemoved {
            result: if err { Err(api_error(c)) } else { Ok(()) },
        },
        Effect::CheckDependencies { refs, .. } => InputKind::DependenciesChecked {
            result: if err {
                Err(api_error(c))
            } else {
                Ok(DependencyReport {
                    releases: refs
                        .iter()
                        .map(|k| ReleaseSnapshot {
                            key: k.clone(),
                            generation: 1,
                            observed_generation: i64::from(c % 2),
                            ready: if c.is_multiple_of(3) {
                                "False".into()
                            } else {
                                "True".into()
                            },
                            depends_on: vec![],
                            deleting: false,
                        })
                        .collect(),
                    objects: Vec::new(),
                })
            },
        },
        Effect::ListDependents { release } => InputKind::DependentsListed {
            result: if err {
                Err(api_error(c))
            } else {
                Ok(DependencyReport {
                    releases: (0..c % 3)
                        .map(|i| ReleaseSnapshot {
                            key: opm_core::ReleaseKey {
                                name: format!("dependent-{i}"),
                                ..release.clone()
                            },
                            generation: 1,
                            observed_generation: 1,
                            ready: String::new(),
                            depends_on: vec![release.clone()],
                            deleting: c.is_multiple_of(2),
                        })
                        .collect(),
                    objects: Vec::new(),
                })
            },
        },
        Effect::ResolveSource { .. } => InputKind::SourceResolved {
            result: Err(SourceError::NoArtifact),
        },
        Effect::FetchArtifact { digest, .. } => InputKind::ArtifactFetched {
            result: Ok(FetchedArtifact {
                digest: digest.clone(),
                size: 1,
            }),
        },
        Effect::Render { .. } => InputKind::Rendered {
            result: if err {
                Err(RenderError::Evaluation {
                    message: "bad".into(),
                })
            } else {
                Ok(RenderOutput {
                    bytes: 0,
                    value: render_value(c / 4),
                    cluster_scoped: vec![],
                    platform: String::new(),
                })
            },
        },
        Effect::CheckServiceAccount { .. } => InputKind::ServiceAccountChecked {
            result: if err {
                Err(api_error(c))
            } else {
                Ok(c.is_multiple_of(2))
            },
        },
        Effect::CheckDrift { objects, .. } => InputKind::DriftChecked {
            report: DriftReport {
                drifted: objects
                    .iter()
                    .take(usize::from(c % 3))
                    .map(|o| o.id.clone())
                    .collect(),
                errors: if err {
                    vec![ObjectResult {
                        id: objects[0].id.clone(),
                        result: Err(api_error(c)),
                    }]
                } else {
                    vec![]
                },
                details: Vec::new(),
            },
        },
        Effect::Apply { stages, .. } => InputKind::Applied {
            report: ApplyReport {
                objects: stages
                    .iter()
                    .flat_map(|s| s.objects.iter())
                    .enumerate()
                    .map(|(i, o)| AppliedObject {
                        id: o.id.clone(),
                        result: if err && i == 0 {
                            Err(api_error(c / 4))
                        } else {
                            Ok(ApplyAction::Updated)
                        },
                    })
                    .collect(),
            },
        },
        Effect::InspectOwners { targets, .. } => InputKind::OwnersInspected {
            objects: targets
                .iter()
                .map(|t| LiveObject {
                    id: t.clone(),
                    result: if err { Err(api_error(c)) } else { Ok(None) },
                })
                .collect(),
        },
        Effect::InspectStale { targets, .. } => InputKind::StaleInspected {
            objects: targets
                .iter()
                .map(|t| LiveObject {
                    id: t.clone(),
                    result: if err {
                        Err(api_error(c))
                    } else {
                        Ok(Some(LiveMeta {
                            uid: "u".into(),
                            labels: Default::default(),
                        }))
                    },
                })
                .collect(),
        },
        Effect::Prune { deletions, .. } => InputKind::Pruned {
            results: deletions
                .iter()
                .map(|d| ObjectResult {
                    id: d.id.clone(),
                    result: if err { Err(api_error(c)) } else { Ok(()) },
                })
                .collect(),
        },
        Effect::PatchStatus { .. } => InputKind::StatusPatched {
            result: if err { Err(api_error(c)) } else { Ok(()) },
        },
        _ => unreachable!("only awaited effects are answered"),
    }
}

#[derive(Debug, Clone)]
struct Case {
    flags: u8,
    choices: Vec<u8>,
    jumps: Vec<i16>,
    previous: Option<u8>,
}

fn object(case: &Case, now: Timestamp) -> ModuleRelease {
    let f = case.flags;
    let mut mr = ModuleRelease {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("demo".into()),
            generation: Some(1),
            finalizers: if f & 1 == 0 {
                Some(vec!["releases.opmodel.dev/cleanup".into()])
            } else {
                None
            },
            deletion_timestamp: if f & 2 != 0 { Some(Time(now)) } else { None },
            ..Default::default()
        },
        spec: ModuleReleaseSpec {
            module: ModuleRef {
                path: "example.com/m@v0".into(),
                version: "v0.1.0".into(),
                secret_ref: None,
            },
            values: None,
            values_from: Vec::new(),
            common: Default::default(),
        },
        status: None,
    };
    let c = &mut mr.spec.common;
    c.suspend = f & 4 != 0;
    c.prune = f & 8 != 0;
    c.service_account_name = (f & 16 != 0).then(|| "sa".to_string());
    if f & 32 != 0 {
        c.depends_on = vec![DependencyRef {
            name: "db".into(),
            namespace: String::new(),
            kind: String::new(),
            ..Default::default()
        }];
    }
    c.timeout = Some("20s".into());
    if let Some(p) = case.previous {
        let entries = (0..p % 4)
            .map(|i| opm_core::api::InventoryEntry {
                kind: "ConfigMap".into(),
                namespace: "demo".into(),
                name: format!("old{i}"),
                v: "v1".into(),
                ..Default::default()
            })
            .collect::<Vec<_>>();
        mr.status = Some(ReleaseStatus {
            inventory: Some(opm_core::api::Inventory {
                cluster: String::new(),
                revision: 1,
                digest: opm_core::digest::inventory(&entries),
                count: entries.len() as i64,
                entries,
            }),
            failure_counters: opm_core::api::FailureCounters {
                reconcile: i64::from(p),
                ..Default::default()
            },
            ..Default::default()
        });
    }
    mr
}

fn drive(case: &Case) -> (Vec<String>, Outcome, Option<Duration>, usize) {
    let t0: Timestamp = "2026-03-01T10:00:00Z".parse().unwrap();
    let cfg = operator_cfg();
    let obj = ReleaseObject::ModuleRelease(object(case, t0));
    let key = obj.key();
    let mut rec = Recorder::new(&TraceHeader::new(&cfg, key.clone()));
    let first = Input::new(
        t0,
        InputKind::Observed {
            key,
            object: Some(Box::new(obj)),
        },
    );
    rec.input(&first);
    let (mut a, mut batch) = Attempt::start(&cfg, first);
    let mut now = t0;
    let mut patches = 0;
    for i in 0..64 {
        rec.effects(&batch);
        assert!(batch_shape_ok(&batch), "{batch:?}");
        patches += batch
            .iter()
            .filter(|e| matches!(e, Effect::PatchStatus { .. }))
            .count();
        let last = batch.last().unwrap().clone();
        if let Effect::Done {
            outcome,
            requeue_after,
            ..
        } = last
        {
            return (rec.lines().to_vec(), outcome, requeue_after, patches);
        }
        let c = case.choices.get(i).copied().unwrap_or(0);
        let jump = case.jumps.get(i).copied().unwrap_or(1);
        now = if jump >= 0 {
            now.checked_add(Duration::from_secs(jump as u64)).unwrap()
        } else {
            now.checked_sub(Duration::from_secs(u64::from(jump.unsigned_abs())))
                .unwrap()
        };
        let input = Input::new(now, respond(&last, c));
        rec.input(&input);
        batch = a.step(input).expect("answer accepted");
    }
    panic!("no Done after 64 steps");
}

fn cases() -> impl Strategy<Value = Case> {
    (
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..12),
        proptest::collection::vec(-30i16..30, 0..12),
        proptest::option::of(0u8..12),
    )
        .prop_map(|(flags, choices, jumps, previous)| Case {
            flags,
            choices,
            jumps,
            previous,
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/protocol_fuzz.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_attempt_finishes_cleanly(case in cases()) {
        let (trace, outcome, requeue, patches) = drive(&case);
        prop_assert!(patches <= 1);
        prop_assert!(replay(trace.iter().map(String::as_str)).is_ok());
        let (again, ..) = drive(&case);
        prop_assert_eq!(&trace, &again);
        if outcome == Outcome::FailedStalled {
            prop_assert_eq!(requeue, Some(Duration::from_secs(1800)));
        }
        if let Some(r) = requeue {
            prop_assert!(r >= Duration::from_secs(5) && r <= Duration::from_secs(1800));
        }
    }
}
