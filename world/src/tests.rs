//! Executor and queue tests: effects in, result inputs out, against the world's state.

use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use opm_core::constants::FINALIZER;
use opm_core::effect::{ApplyStage, Deletion, Effect, EffectKind, SourceLocator};
use opm_core::input::{ApiError, ApplyAction, FetchError, InputKind, SourceError};
use opm_core::object::{DesiredObject, ResourceId};

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn world() -> (World, ReleaseKey) {
    let mut w = World::new(
        Config::default().with_operator_identity(opm_core::config::AllowOperatorIdentity::Cluster),
        t(0),
        9,
    );
    w.add_module("example.com/modules/web@v0", "v0.2.1", ModuleDef::web());
    let key = w
        .create_release(fixtures::module_release(
            "demo",
            "app",
            "example.com/modules/web@v0",
            "v0.2.1",
        ))
        .unwrap();
    (w, key)
}

fn cm(name: &str, data: &str) -> DesiredObject {
    DesiredObject {
        id: ResourceId {
            kind: "ConfigMap".into(),
            namespace: "demo".into(),
            name: name.into(),
            version: "v1".into(),
            ..Default::default()
        },
        component: "config".into(),
        manifest: json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "demo",
                "labels": {"app.kubernetes.io/managed-by": "opm-controller"}},
            "data": {"k": data}}),
        policy: Default::default(),
    }
}

fn apply(objs: Vec<DesiredObject>, identity: Option<opm_core::effect::Impersonation>) -> Effect {
    Effect::Apply {
        cluster: None,
        stages: vec![ApplyStage {
            stage: 3,
            objects: objs,
        }],
        field_manager: "opm-controller".into(),
        force: false,
        identity,
    }
}

fn applied(r: Option<InputKind>) -> Vec<Result<ApplyAction, ApiError>> {
    match r {
        Some(InputKind::Applied { report }) => {
            report.objects.into_iter().map(|o| o.result).collect()
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn new_release_is_due_now_and_triggers_are_recorded() {
    let (w, key) = world();
    assert_eq!(w.due(&key), Some(t(0)));
    assert_eq!(w.triggers().len(), 1);
    assert_eq!(w.triggers()[0].why, "created");
    assert!(w.store().namespace_exists("demo"));
}

#[test]
fn apply_creates_then_reports_unchanged() {
    let (mut w, key) = world();
    let e = apply(vec![cm("a", "1"), cm("b", "1")], None);
    assert_eq!(
        applied(w.execute(&key, &e)),
        vec![Ok(ApplyAction::Created); 2]
    );
    assert_eq!(
        applied(w.execute(&key, &e)),
        vec![Ok(ApplyAction::Unchanged); 2]
    );
    assert_eq!(w.store().len(), 3); // the namespace and two ConfigMaps
}

#[test]
fn apply_fault_fails_first_object_and_stops_after_the_stage() {
    let (mut w, key) = world();
    w.add_fault(Fault::always(EffectKind::Apply, FaultError::unavailable()).times(1))
        .unwrap();
    let e = Effect::Apply {
        cluster: None,
        stages: vec![
            ApplyStage {
                stage: 1,
                objects: vec![cm("a", "1"), cm("b", "1")],
            },
            ApplyStage {
                stage: 3,
                objects: vec![cm("c", "1")],
            },
        ],
        field_manager: "opm-controller".into(),
        force: false,
        identity: None,
    };
    let r = applied(w.execute(&key, &e));
    assert_eq!(r.len(), 2);
    assert!(matches!(r[0], Err(ApiError::Unavailable { .. })));
    assert_eq!(r[1], Ok(ApplyAction::Created));
    assert_eq!(applied(w.execute(&key, &e)).len(), 3);
}

#[test]
fn impersonated_apply_and_prune_follow_rbac() {
    let (mut w, key) = world();
    let who = opm_core::impersonation::impersonation("demo", "deployer");
    let r = applied(w.execute(&key, &apply(vec![cm("a", "1")], Some(who.clone()))));
    assert!(matches!(r[0], Err(ApiError::Forbidden { .. })));
    w.add_service_account(
        "demo",
        "deployer",
        vec![Grant {
            verbs: BTreeSet::from([Verb::Get, Verb::Apply]),
            kinds: None,
            cluster_wide: false,
        }],
    );
    assert_eq!(
        applied(w.execute(&key, &apply(vec![cm("a", "1")], Some(who.clone())))),
        vec![Ok(ApplyAction::Created)]
    );
    let live = w.object(&cm("a", "1").id).unwrap().clone();
    let prune = Effect::Prune {
        cluster: None,
        deletions: vec![Deletion {
            id: live.id.clone(),
            uid: live.uid.clone(),
            orphan: false,
            resume: false,
        }],
        identity: Some(who),
    };
    match w.execute(&key, &prune) {
        Some(InputKind::Pruned { results }) => {
            assert!(matches!(results[0].result, Err(ApiError::Forbidden { .. })))
        }
        other => panic!("{other:?}"),
    }
    // As the operator, with a stale uid: a conflict, and nothing deleted.
    let stale = Effect::Prune {
        cluster: None,
        deletions: vec![Deletion {
            id: live.id.clone(),
            uid: "old".into(),
            orphan: false,
            resume: false,
        }],
        identity: None,
    };
    match w.execute(&key, &stale) {
        Some(InputKind::Pruned { results }) => {
            assert!(matches!(results[0].result, Err(ApiError::Conflict { .. })))
        }
        other => panic!("{other:?}"),
    }
    assert!(w.object(&live.id).is_some());
}

#[test]
fn stale_inspection_reports_uid_labels_or_absence() {
    let (mut w, key) = world();
    w.execute(&key, &apply(vec![cm("a", "1")], None));
    let e = Effect::InspectStale {
        cluster: None,
        targets: vec![cm("a", "1").id, cm("gone", "1").id],
        identity: None,
    };
    match w.execute(&key, &e) {
        Some(InputKind::StaleInspected { objects }) => {
            let meta = objects[0].result.clone().unwrap().unwrap();
            assert_eq!(meta.uid, w.object(&cm("a", "1").id).unwrap().uid);
            assert_eq!(
                meta.labels["app.kubernetes.io/managed-by"],
                "opm-controller"
            );
            assert_eq!(objects[1].result, Ok(None));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn drift_check_sees_tampering() {
    let (mut w, key) = world();
    w.execute(&key, &apply(vec![cm("a", "1")], None));
    let check = Effect::CheckDrift {
        cluster: None,
        objects: vec![cm("a", "1")],
        field_manager: "opm-controller".into(),
        identity: None,
    };
    match w.execute(&key, &check) {
        Some(InputKind::DriftChecked { report }) => assert!(report.drifted.is_empty()),
        other => panic!("{other:?}"),
    }
    w.apply_event(WorldEvent::TamperObject {
        id: cm("a", "1").id,
        manager: "kubectl-edit".into(),
        field: FieldPath::new("data", "k"),
        value: json!("2"),
    })
    .unwrap();
    match w.execute(&key, &check) {
        Some(InputKind::DriftChecked { report }) => {
            assert_eq!(report.drifted, vec![cm("a", "1").id])
        }
        other => panic!("{other:?}"),
    }
    // Re-applying now conflicts with the other manager.
    let r = applied(w.execute(&key, &apply(vec![cm("a", "1")], None)));
    assert!(matches!(r[0], Err(ApiError::Conflict { .. })));
}

#[test]
fn sources_fetch_and_render() {
    let (mut w, key) = world();
    let src = SourceId::new("OCIRepository", "demo", "repo");
    let loc = SourceLocator {
        api_version: "source.toolkit.fluxcd.io/v1".into(),
        kind: "OCIRepository".into(),
        namespace: "demo".into(),
        name: "repo".into(),
    };
    let resolve = Effect::ResolveSource { source: loc };
    assert_eq!(
        w.execute(&key, &resolve),
        Some(InputKind::SourceResolved {
            result: Err(SourceError::NotFound)
        })
    );
    let adv = w.publish(
        &src,
        ArtifactDef::package("v1", "./app", "app", "demo", json!({})),
    );
    assert_eq!(
        w.execute(&key, &resolve),
        Some(InputKind::SourceResolved {
            result: Ok(adv.clone())
        })
    );
    let fetch = Effect::FetchArtifact {
        url: adv.url.clone(),
        digest: adv.digest.clone(),
        revision: adv.revision.clone(),
    };
    assert!(matches!(
        w.execute(&key, &fetch),
        Some(InputKind::ArtifactFetched { result: Ok(_) })
    ));
    let wrong = Effect::FetchArtifact {
        url: adv.url.clone(),
        digest: opm_core::digest::EMPTY_DIGEST.into(),
        revision: adv.revision.clone(),
    };
    assert!(matches!(
        w.execute(&key, &wrong),
        Some(InputKind::ArtifactFetched {
            result: Err(FetchError::DigestMismatch { .. })
        })
    ));
    let render = Effect::Render {
        request: opm_core::effect::RenderRequest::Artifact {
            artifact_digest: adv.digest.clone(),
            artifact_url: adv.url.clone(),
            path: "./app".into(),
        },
    };
    assert!(matches!(
        w.execute(&key, &render),
        Some(InputKind::Rendered { result: Ok(_) })
    ));
}

#[test]
fn delay_fault_moves_the_clock_and_overrun_is_a_timeout() {
    let (mut w, key) = world();
    w.add_fault(Fault::always(
        EffectKind::CheckServiceAccount,
        FaultError::Delay {
            duration: Duration::from_secs(400),
        },
    ))
    .unwrap();
    w.current.deadline = Some(t(300));
    let e = Effect::CheckServiceAccount {
        cluster: None,
        namespace: "demo".into(),
        name: "x".into(),
    };
    assert!(matches!(
        w.execute(&key, &e),
        Some(InputKind::ServiceAccountChecked {
            result: Err(ApiError::Timeout { .. })
        })
    ));
    assert_eq!(w.now(), t(400));
}

#[test]
fn finalizers_status_and_fire_and_forget() {
    let (mut w, key) = world();
    let add = Effect::AddFinalizer {
        finalizer: FINALIZER.into(),
    };
    assert_eq!(
        w.execute(&key, &add),
        Some(InputKind::FinalizerAdded { result: Ok(()) })
    );
    let status = opm_core::api::ReleaseStatus {
        observed_generation: 1,
        ..Default::default()
    };
    let patch = Effect::PatchStatus {
        patch: json!({"observedGeneration": 1}),
        status: Box::new(status),
    };
    assert_eq!(
        w.execute(&key, &patch),
        Some(InputKind::StatusPatched { result: Ok(()) })
    );
    assert_eq!(w.current.status_mismatches, 0);
    let bad = Effect::PatchStatus {
        patch: json!({"observedGeneration": 2}),
        status: Box::default(),
    };
    w.execute(&key, &bad);
    assert_eq!(w.current.status_mismatches, 1);
    let ev = Effect::EmitEvent {
        event: opm_core::effect::Event {
            event_type: opm_core::effect::EventType::Normal,
            reason: opm_core::Reason::NoOp,
            action: "Reconcile".into(),
            note: "No changes detected".into(),
        },
    };
    assert_eq!(w.execute(&key, &ev), None);
    assert_eq!(w.events().len(), 1);
    w.apply_event(WorldEvent::Delete { key: key.clone() })
        .unwrap();
    assert!(w.release(&key).is_some());
    let rm = Effect::RemoveFinalizer {
        finalizer: FINALIZER.into(),
    };
    assert_eq!(
        w.execute(&key, &rm),
        Some(InputKind::FinalizerRemoved { result: Ok(()) })
    );
    assert!(w.release(&key).is_none());
}

#[test]
fn scheduled_events_and_queue_order() {
    let (mut w, key) = world();
    let src = SourceId::new("OCIRepository", "demo", "repo");
    w.schedule(
        t(10),
        WorldEvent::NewArtifact {
            source: src,
            artifact: ArtifactDef::package("v1", ".", "x", "demo", json!({})),
        },
    );
    assert_eq!(w.next_wakeup(), Some(t(0)));
    w.clear_due(&key);
    assert_eq!(w.next_wakeup(), Some(t(10)));
    assert_eq!(w.step().unwrap(), Step::Event(t(10)));
    assert_eq!(w.now(), t(10));
    assert_eq!(w.step().unwrap(), Step::Idle);
    w.schedule_after(
        Duration::from_secs(5),
        WorldEvent::RequestReconcile {
            key: key.clone(),
            token: "1".into(),
        },
    );
    w.drive_until(t(14)).unwrap();
    assert_eq!(w.due(&key), None);
    w.step().unwrap();
    assert_eq!(w.due(&key), Some(t(15)));
}

/// The operator's trace sink appends attempts to one file: `trace::replay` must replay
/// each header's attempt, and still catch a change in a later one.
#[test]
fn several_attempts_in_one_trace_replay_and_a_later_change_is_caught() {
    let (mut w, key) = world();
    w.run_attempt(&key).unwrap();
    w.run_attempt(&key).unwrap();
    let mut lines = Vec::new();
    for log in w.logs() {
        lines.extend(log.trace_lines(w.config()));
    }
    let headers = lines.iter().filter(|l| l.contains("coreVersion")).count();
    assert_eq!(headers, 2);
    assert!(lines[0].contains("\"attempt\":0"), "{}", lines[0]);
    opm_core::trace::replay(lines.iter().map(String::as_str)).unwrap();
    let last = lines.len() - 1;
    assert!(lines[last].contains("\"type\":\"done\""), "{}", lines[last]);
    // A reason is typed: the tampered one must still be a reason to reach the comparison.
    assert!(
        lines[last].contains("\"reason\":\"NoOp\""),
        "{}",
        lines[last]
    );
    lines[last] = lines[last].replace("\"reason\":\"NoOp\"", "\"reason\":\"Gone\"");
    let err = opm_core::trace::replay(lines.iter().map(String::as_str)).unwrap_err();
    assert!(err.expected.contains("Gone"), "{err}");
    assert!(!err.got.contains("Gone"), "{err}");
}

/// Two releases of a module whose ConfigMap has a fixed name (SPEC §25): the second never
/// writes it, however often it runs, and the first keeps it labelled as its own.
#[test]
fn a_second_release_of_a_fixed_name_object_is_refused_every_time() {
    let mut w = World::new(
        Config::default().with_operator_identity(opm_core::config::AllowOperatorIdentity::On),
        t(0),
        9,
    );
    w.add_module(
        "example.com/modules/fixed@v0",
        "v0.1.0",
        ModuleDef {
            components: json!({"config": {"cm": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "shared"}, "data": {"owner": "${release.name}"}}}}),
            defaults: Default::default(),
            closed: false,
            error: None,
            opm: false,
        },
    );
    let mut keys = Vec::new();
    for name in ["first", "second"] {
        keys.push(
            w.create_release(fixtures::module_release(
                "demo",
                name,
                "example.com/modules/fixed@v0",
                "v0.1.0",
            ))
            .unwrap(),
        );
    }
    let id = cm("shared", "").id;
    let first_uuid = opm_core::render_value::release_uuid(
        opm_core::object::Kind::ModuleRelease,
        "demo",
        "first",
    );
    for _ in 0..3 {
        for key in &keys {
            let log = w.run_attempt(key).unwrap().clone();
            if key.name == "second" {
                assert_eq!(log.reason, "OwnershipConflict", "{log:?}");
                let wrote = log
                    .batches
                    .iter()
                    .flatten()
                    .any(|e| matches!(e, Effect::Apply { .. }));
                assert!(!wrote, "the second release wrote");
            }
            let live = w.object(&id).unwrap();
            assert_eq!(
                live.label(opm_core::constants::labels::RELEASE_UUID),
                Some(first_uuid.as_str())
            );
        }
    }
    // Orphaning (prune: disabled) removes the release labels and keeps the object.
    let uid = w.object(&id).unwrap().uid.clone();
    let orphan = Effect::Prune {
        cluster: None,
        deletions: vec![Deletion {
            id: id.clone(),
            uid,
            orphan: true,
            resume: false,
        }],
        identity: None,
    };
    match w.execute(&keys[0], &orphan) {
        Some(InputKind::Pruned { results }) => assert_eq!(results[0].result, Ok(())),
        other => panic!("{other:?}"),
    }
    let live = w.object(&id).unwrap();
    assert!(
        live.labels()
            .keys()
            .all(|k| !opm_core::constants::labels::STAMPED.contains(&k.as_str()))
    );
    assert_eq!(
        live.fields.get(&FieldPath::new("data", "owner")),
        Some(&json!("first"))
    );
}

#[test]
fn timeline_retention_keeps_no_events_or_triggers_but_the_same_history() {
    let run = |r: Retention| {
        let (w, key) = world();
        let mut w = w.with_retention(r);
        w.schedule(
            t(600),
            WorldEvent::EditSpec {
                key,
                patch: json!({"values": {"replicas": 2}}),
            },
        );
        w.drive_until(t(3600)).unwrap();
        w
    };
    let full = run(Retention::Full);
    let lean = run(Retention::Timeline);
    assert!(!full.events().is_empty());
    assert!(lean.events().is_empty());
    // Creation triggered before the retention was chosen; the edit's trigger is not kept.
    assert_eq!(full.triggers().len(), 2);
    assert_eq!(lean.triggers().len(), 1);
    assert_eq!(lean.timeline(), full.timeline());
    assert_eq!(lean.releases(), full.releases());
    assert!(lean.logs().len() <= 1 && full.logs().len() == full.timeline().len());
}

/// The world bounds each effect as the operator does (`Attempt::bound`): an attempt whose
/// render overran the deadline still writes its status, because the status patch has its
/// own allowance past the deadline. Before, the world timed the patch out too, and the
/// simulated release kept no record of the failure the live one shows.
#[test]
fn an_attempt_past_its_deadline_still_writes_its_status_as_the_operator_does() {
    let (mut w, key) = world();
    w.add_fault(Fault::always(
        EffectKind::Render,
        FaultError::Delay {
            duration: Duration::from_secs(3600),
        },
    ))
    .unwrap();
    w.run_attempt(&key).unwrap();
    let status = w
        .release(&key)
        .and_then(|r| r.status())
        .expect("the status was written");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "False", "{ready:?}");
}

/// Answering unchanged NoOps from the memo (`Retention::Timeline`) changes nothing: the
/// same timeline, releases, objects and metrics as running every attempt, through a spec
/// edit, tampering, a deleted object, a slow rollout, windowed and probabilistic faults,
/// a new ServiceAccount and a restart.
#[test]
fn memoised_attempts_change_nothing() {
    let deployment = |name: &str| ResourceId {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "demo".into(),
        name: name.into(),
        version: "v1".into(),
    };
    let run = |memo: bool| {
        let (w, key) = world();
        let mut w = w
            .with_retention(Retention::Timeline)
            .with_attempt_memo(memo)
            .with_jitter(true);
        let slow = w
            .create_release(fixtures::module_release(
                "demo",
                "slow",
                "example.com/modules/web@v0",
                "v0.2.1",
            ))
            .unwrap();
        w.simulate_rollout(
            "slow",
            SimRollout {
                after_secs: 900,
                fails: false,
            },
        );
        w.add_fault(Fault {
            per_mille: Some(200),
            ..Fault::always(EffectKind::Apply, FaultError::unavailable())
        })
        .unwrap();
        w.add_fault(
            Fault::always(EffectKind::CheckDrift, FaultError::unavailable())
                .between(t(3000), t(3700)),
        )
        .unwrap();
        w.add_fault(Fault {
            per_mille: Some(500),
            ..Fault::always(EffectKind::AssessHealth, FaultError::unavailable())
                .for_release(slow.clone())
                .times(3)
        })
        .unwrap();
        w.schedule(
            t(600),
            WorldEvent::EditSpec {
                key: key.clone(),
                patch: json!({"values": {"replicas": 2}}),
            },
        );
        w.schedule(
            t(1800),
            WorldEvent::TamperObject {
                id: deployment("app"),
                manager: "kubectl-edit".into(),
                field: FieldPath::new("spec", "replicas"),
                value: json!(5),
            },
        );
        w.schedule(
            t(2400),
            WorldEvent::DeleteObject {
                id: deployment("slow"),
            },
        );
        w.schedule(
            t(5000),
            WorldEvent::CreateServiceAccount {
                namespace: "demo".into(),
                name: "deployer".into(),
                grants: Vec::new(),
            },
        );
        w.schedule(t(9000), WorldEvent::OperatorRestart);
        w.drive_until(t(6 * 3600)).unwrap();
        w
    };
    let (plain, memo) = (run(false), run(true));
    assert_eq!(plain.memoised_attempts(), 0);
    assert!(
        memo.memoised_attempts() > memo.attempts_run() / 4,
        "{} of {} attempts memoised",
        memo.memoised_attempts(),
        memo.attempts_run()
    );
    assert_eq!(memo.timeline(), plain.timeline());
    assert_eq!(memo.releases(), plain.releases());
    assert_eq!(memo.store(), plain.store());
    assert_eq!(memo.metrics(), plain.metrics());
    assert_eq!(memo.now(), plain.now());
}
