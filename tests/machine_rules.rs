//! SPEC §13 (suspend/resume), §14 (dependencies ready), §15 (impersonation), §19 (apply
//! request), the drain protocol, determinism and trace replay (§23).

mod support;

use opm_core::api::{Condition, DependencyRef, Rollout};
use opm_core::effect::{Effect, EffectKind, EventType};
use opm_core::input::{DependencyReport, InputName, ReleaseSnapshot};
use opm_core::trace::replay;
use opm_core::{
    Attempt, Config, Input, InputError, InputKind, Kind, Outcome, ReleaseKey, ReleaseObject,
};
use support::*;

#[test]
fn suspend_marks_ready_false_once_and_keeps_the_rest() {
    let (mut mr, first) = applied_module_release(&Canned::default());
    mr.spec.common.suspend = true;
    mr.metadata.generation = Some(2);
    let r = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::NoOp, "Suspended", None)
    );
    assert_eq!(r.awaited(), vec![EffectKind::PatchStatus]);
    assert_eq!(
        r.cond3("Ready"),
        c3("False", "Suspended", "Reconciliation is suspended")
    );
    assert_eq!(r.cond("Reconciling"), None);
    assert_eq!(
        r.event_tuples(),
        vec![ev(
            EventType::Normal,
            "Suspended",
            "Reconcile",
            "Reconciliation is suspended"
        )]
    );
    assert_eq!(r.status.observed_generation, 2);
    assert_eq!(r.status.inventory, first.status.inventory);
    assert_eq!(r.status.history, first.status.history);
    assert_eq!(
        r.status.last_applied_render_digest,
        first.status.last_applied_render_digest
    );
    // Still suspended: no event, no write.
    mr.status = Some(r.status.clone());
    let again = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert!(again.events().is_empty());
    assert!(again.written.is_none());
    assert_eq!(
        again.kinds(),
        vec![EffectKind::RecordMetric, EffectKind::Done]
    );
    // Resume: event, then a normal attempt.
    mr.spec.common.suspend = false;
    mr.status = Some(r.status);
    let resumed = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(resumed.events()[0].reason, "Resumed");
    assert_eq!(resumed.events()[0].note, "Reconciliation resumed");
    assert_eq!(
        resumed.cond3("Ready"),
        c3(
            "True",
            "ReconciliationSucceeded",
            "Reconciliation succeeded"
        )
    );
}

#[test]
fn suspend_removes_stalled_and_reconciling() {
    let mut mr = module_release();
    let stalled = |t: &str| Condition {
        type_: t.into(),
        status: "True".into(),
        reason: "RenderFailed".into(),
        message: "m".into(),
        ..Default::default()
    };
    mr.status = Some(opm_core::api::ReleaseStatus {
        conditions: vec![stalled("Stalled"), stalled("Reconciling")],
        ..Default::default()
    });
    mr.spec.common.suspend = true;
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(r.cond_types(), vec!["Ready"]);
}

#[test]
fn ready_dependencies_let_the_attempt_proceed() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![
        DependencyRef {
            name: "db".into(),
            namespace: String::new(),
            kind: String::new(),
            ..Default::default()
        },
        DependencyRef {
            name: "net".into(),
            namespace: "infra".into(),
            kind: "Release".into(),
            ..Default::default()
        },
    ];
    let db = ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "db".into(),
    };
    let net = ReleaseKey {
        kind: Kind::Release,
        namespace: "infra".into(),
        name: "net".into(),
    };
    let snap = |key: ReleaseKey| ReleaseSnapshot {
        key,
        generation: 4,
        observed_generation: 4,
        ready: "True".into(),
        depends_on: vec![],
        deleting: false,
    };
    let canned = Canned {
        deps: Ok(DependencyReport {
            releases: vec![snap(db.clone()), snap(net.clone())],
            objects: Vec::new(),
        }),
        ..Default::default()
    };
    let cfg = Config {
        allow_cross_namespace_refs: true,
        ..operator_cfg()
    };
    let r = run_mr(&cfg, mr, &canned);
    assert_eq!(r.outcome, Outcome::Applied);
    match r.find(EffectKind::CheckDependencies) {
        Some(Effect::CheckDependencies {
            namespace, refs, ..
        }) => {
            assert_eq!(namespace, "demo");
            assert_eq!(refs, &vec![db, net]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn service_account_identity_is_used_for_apply_drift_and_prune() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    mr.spec.common.service_account_name = Some("deployer".into());
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(r.outcome, Outcome::NoOp);
    match r.find(EffectKind::CheckServiceAccount) {
        Some(Effect::CheckServiceAccount {
            namespace, name, ..
        }) => {
            assert_eq!((namespace.as_str(), name.as_str()), ("demo", "deployer"))
        }
        other => panic!("{other:?}"),
    }
    match r.find(EffectKind::CheckDrift) {
        Some(Effect::CheckDrift {
            identity: Some(i),
            field_manager,
            objects,
            ..
        }) => {
            // The user alone: the API server adds the ServiceAccount's groups (SPEC §15).
            assert_eq!(i.user, "system:serviceaccount:demo:deployer");
            assert_eq!(field_manager, "opm-controller");
            assert_eq!(objects.len(), 3);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn default_service_account_applies_when_spec_has_none() {
    let cfg = Config {
        default_service_account: Some("tenant".into()),
        ..Default::default()
    };
    let r = run_mr(&cfg, module_release(), &Canned::default());
    match r.find(EffectKind::Apply) {
        Some(Effect::Apply {
            identity: Some(i), ..
        }) => assert_eq!(i.user, "system:serviceaccount:demo:tenant"),
        other => panic!("{other:?}"),
    }
    // Without either, no check and the operator's own identity.
    let r = run_mr(&operator_cfg(), module_release(), &Canned::default());
    assert!(r.find(EffectKind::CheckServiceAccount).is_none());
    assert!(matches!(
        r.find(EffectKind::Apply),
        Some(Effect::Apply { identity: None, .. })
    ));
}

#[test]
fn apply_request_carries_stages_manager_and_force() {
    let mut mr = module_release();
    mr.spec.common.rollout = Some(Rollout {
        force_conflicts: true,
        adopt_existing: false,
    });
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    match r.find(EffectKind::Apply) {
        Some(Effect::Apply {
            stages,
            field_manager,
            force,
            ..
        }) => {
            assert!(*force);
            assert_eq!(field_manager, "opm-controller");
            assert_eq!(stages.len(), 1);
            let kinds: Vec<&str> = stages[0]
                .objects
                .iter()
                .map(|o| o.id.kind.as_str())
                .collect();
            assert_eq!(kinds, vec!["ConfigMap", "Service", "Deployment"]);
            let labels = &stages[0].objects[0].manifest["metadata"]["labels"];
            assert_eq!(labels["component.opmodel.dev/name"], "config");
        }
        other => panic!("{other:?}"),
    }
}

fn observed() -> Input {
    let mr = module_release();
    Input::new(
        t0(),
        InputKind::Observed {
            key: ReleaseKey {
                kind: Kind::ModuleRelease,
                namespace: "demo".into(),
                name: "web".into(),
            },
            object: Some(Box::new(ReleaseObject::ModuleRelease(mr))),
        },
    )
}

#[test]
fn wrong_inputs_are_refused_without_changing_anything() {
    let (mut a, batch) = Attempt::start(&operator_cfg(), observed());
    assert!(matches!(batch.last(), Some(Effect::Render { .. })));
    let before = format!("{a:?}");
    let wrong = Input::new(t0(), InputKind::StatusPatched { result: Ok(()) });
    assert!(!a.accepts(&wrong));
    assert_eq!(
        a.step(wrong),
        Err(InputError::Unexpected {
            expected: InputName::Rendered,
            got: InputName::StatusPatched
        })
    );
    assert_eq!(format!("{a:?}"), before);
    let again = Input::new(t0(), observed().kind);
    assert!(matches!(a.step(again), Err(InputError::Unexpected { .. })));
    assert_eq!(a.deadline(), t0().checked_add(secs(300)).unwrap());
}

#[test]
fn a_finished_attempt_refuses_input_and_start_needs_observed() {
    let key = ReleaseKey {
        kind: Kind::Release,
        namespace: "demo".into(),
        name: "x".into(),
    };
    let (mut a, _) = Attempt::start(
        &operator_cfg(),
        Input::new(t0(), InputKind::Observed { key, object: None }),
    );
    assert_eq!(
        a.step(Input::new(
            t0(),
            InputKind::StatusPatched { result: Ok(()) }
        )),
        Err(InputError::Finished)
    );
    let (b, batch) = Attempt::start(
        &operator_cfg(),
        Input::new(t0(), InputKind::FinalizerAdded { result: Ok(()) }),
    );
    assert!(b.is_finished());
    assert!(
        matches!(&batch[..], [Effect::Done { reason, requeue_after: None, .. }] if *reason == opm_core::Reason::InvalidInput)
    );
}

#[test]
fn time_going_backwards_is_clamped() {
    let (mut a, _) = Attempt::start(&operator_cfg(), observed());
    let past = t0().checked_sub(secs(3600)).unwrap();
    let batch = a
        .step(Input::new(
            past,
            InputKind::Rendered {
                result: Ok(opm_core::input::RenderOutput {
                    bytes: 0,
                    value: exported(serde_json::json!({})),
                    cluster_scoped: vec![],
                    platform: String::new(),
                }),
            },
        ))
        .unwrap();
    // A first apply reads the owners of its objects first (SPEC §25).
    assert!(matches!(batch.last(), Some(Effect::InspectOwners { .. })));
}

#[test]
fn same_inputs_give_byte_identical_traces() {
    let a = run_mr(&operator_cfg(), module_release(), &Canned::default());
    let b = run_mr(&operator_cfg(), module_release(), &Canned::default());
    assert_eq!(a.trace, b.trace);
    assert!(a.trace[0].contains("\"coreVersion\""));
    assert!(
        a.trace[1].starts_with("{\"seq\":0,\"in\":{\"now\":\"2026-03-01T10:00:00Z\""),
        "{}",
        a.trace[1]
    );
}

#[test]
fn replay_names_the_first_divergence() {
    let r = run_mr(&operator_cfg(), module_release(), &Canned::default());
    let mut lines = r.trace.clone();
    let idx = lines
        .iter()
        .position(|l| l.contains("\"type\":\"apply\""))
        .unwrap();
    lines[idx] = lines[idx].replace("\"force\":false", "\"force\":true");
    let err = replay(lines.iter().map(String::as_str)).unwrap_err();
    assert_eq!(err.seq, idx as u64 - 1);
    assert!(err.expected.contains("\"force\":true") && err.got.contains("\"force\":false"));
    // A missing effect at the end is also a divergence.
    let truncated = &r.trace[..r.trace.len() - 1];
    assert!(replay(truncated.iter().map(String::as_str)).is_err());
    assert!(replay(r.trace.iter().map(String::as_str)).is_ok());
    assert!(replay([].into_iter()).is_err());
}

#[test]
fn remaining_time_shrinks_to_zero_at_the_deadline() {
    let mut mr = module_release();
    mr.spec.common.timeout = Some("1m".into());
    let (a, _) = Attempt::start(
        &operator_cfg(),
        Input::observed(t0(), ReleaseObject::ModuleRelease(mr)),
    );
    assert_eq!(a.remaining(t0()), secs(60));
    assert_eq!(a.remaining(t0().checked_add(secs(45)).unwrap()), secs(15));
    assert_eq!(a.remaining(t0().checked_add(secs(90)).unwrap()), secs(0));
    let (g, batch) = Attempt::start(
        &operator_cfg(),
        Input::gone(
            t0(),
            ReleaseKey {
                kind: Kind::Release,
                namespace: "d".into(),
                name: "n".into(),
            },
        ),
    );
    assert!(g.is_finished() && batch.len() == 1);
}

#[test]
fn finishing_effects_outlive_the_deadline_and_the_rest_share_it() {
    let mut mr = module_release();
    mr.spec.common.timeout = Some("1m".into());
    let (a, _) = Attempt::start(
        &operator_cfg(),
        Input::observed(t0(), ReleaseObject::ModuleRelease(mr)),
    );
    let later = t0().checked_add(secs(45)).unwrap();
    let past = t0().checked_add(secs(90)).unwrap();
    let fetch = Effect::FetchArtifact {
        url: "http://a/b.tgz".into(),
        digest: "sha256:0".into(),
        revision: "r".into(),
    };
    assert_eq!(a.bound(later, &fetch), secs(15));
    assert_eq!(a.bound(past, &fetch), secs(0));
    let finishing = [
        Effect::RemoveFinalizer {
            finalizer: "f".into(),
        },
        Effect::PatchStatus {
            patch: serde_json::json!({}),
            status: Box::default(),
        },
    ];
    for e in &finishing {
        assert_eq!(a.bound(past, e), opm_core::machine::FINISH_BOUND, "{e:?}");
    }
    let wait = Effect::AwaitTermination {
        cluster: None,
        targets: Vec::new(),
        identity: None,
        until: t0().checked_add(secs(20)).unwrap(),
    };
    assert_eq!(a.bound(later, &wait), secs(0), "its own `until` has passed");
    assert_eq!(a.bound(t0(), &wait), secs(20));
}

#[test]
fn timeout_during_deletion_keeps_the_finalizer() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    mr.spec.common.prune = true;
    mr.spec.common.timeout = Some("10s".into());
    mr.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    let canned = Canned {
        slow: Some((EffectKind::InspectStale, secs(30))),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::FailedTransient, "ReconcileTimeout", Some(secs(5)))
    );
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    assert!(r.find(EffectKind::Prune).is_none());
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "False",
            "ReconcileTimeout",
            "reconcile attempt exceeded timeout of 10s"
        )
    );
}

#[test]
fn persistent_warn_drift_is_quiet_and_writes_nothing() {
    let (mr, _) = applied_module_release(&Canned::default());
    let id = opm_core::ResourceId {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "demo".into(),
        name: "web".into(),
        version: "v1".into(),
    };
    let canned = Canned {
        drift: opm_core::input::DriftReport {
            drifted: vec![id],
            errors: vec![],
            details: Vec::new(),
        },
        ..Default::default()
    };
    let first = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert!(first.written.is_some());
    let mut again = mr;
    again.status = Some(first.status);
    let second = run_mr(&operator_cfg(), again, &canned);
    assert_eq!(second.outcome, Outcome::NoOp);
    assert!(second.written.is_none());
    assert_eq!(
        second.event_tuples(),
        vec![ev(
            EventType::Normal,
            "NoOp",
            "Reconcile",
            "No changes detected"
        )]
    );
}

#[test]
fn transient_failures_keep_reconciling_ltt_and_warn_once() {
    let canned = Canned {
        render: Err(opm_core::input::RenderError::RegistryUnreachable {
            message: "cannot do HTTP request".into(),
        }),
        ..Default::default()
    };
    let first = run_mr(&operator_cfg(), module_release(), &canned);
    let mut mr = module_release();
    mr.status = Some(first.status.clone());
    let second = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &canned,
        t0().checked_add(secs(5)).unwrap(),
    );
    assert!(second.events().is_empty());
    assert_eq!(second.requeue, Some(secs(10)));
    for t in ["Reconciling", "Ready"] {
        assert_eq!(
            second.cond(t).unwrap().last_transition_time,
            first.cond(t).unwrap().last_transition_time
        );
    }
}

#[test]
#[ignore = "prints a sample trace for reading"]
fn print_sample_trace() {
    let r = run_rel(&operator_cfg(), release(), &Canned::default());
    for l in &r.trace {
        println!("{l}");
    }
}

fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                out.push(k.clone());
                keys(v, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

#[test]
fn trace_json_uses_camel_case_keys() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    mr.spec.common.service_account_name = Some("deployer".into());
    mr.spec.common.prune = true;
    let runs = [
        run_rel(&operator_cfg(), release(), &Canned::default()),
        run_mr(
            &Config {
                default_service_account: Some("x".into()),
                ..Default::default()
            },
            mr,
            &Canned::default(),
        ),
    ];
    let mut all = Vec::new();
    for r in &runs {
        for line in &r.trace {
            keys(&serde_json::from_str(line).unwrap(), &mut all);
        }
    }
    let snake: Vec<&String> = all.iter().filter(|k| k.contains('_')).collect();
    assert!(snake.is_empty(), "{snake:?}");
    assert!(all.iter().any(|k| k == "requeueAfter"));
    assert!(all.iter().any(|k| k == "fieldManager"));
}
