//! Core rules of issue 15: Correct forces its re-apply, the drift message names fields and
//! managers, per-object policies (SPEC §28) shape the effects, the render digest covers
//! them, and deletion policies (SPEC §12) decide the deletion path.

mod support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use opm_core::api::{DeletionPolicy, DriftDetection, DriftMode, IgnoreRule, ModuleRelease};
use opm_core::effect::Effect;
use opm_core::fields::FieldDrift;
use opm_core::input::{DriftReport, ObjectDrift, RenderOutput};
use opm_core::{EffectKind, Outcome, ResourceId};
use serde_json::{Value, json};
use support::*;

fn cm_id(name: &str) -> ResourceId {
    ResourceId {
        kind: "ConfigMap".into(),
        namespace: "demo".into(),
        name: name.into(),
        version: "v1".into(),
        ..Default::default()
    }
}

fn with_render(extra: Value) -> Canned {
    Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: exported(extra),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    }
}

fn applied(canned: &Canned) -> ModuleRelease {
    let first = run_mr(&operator_cfg(), module_release(), canned);
    assert_eq!(first.outcome, Outcome::Applied);
    let mut mr = module_release();
    mr.status = Some(first.status);
    mr
}

fn drift_mode(mr: &mut ModuleRelease, mode: DriftMode, ignore: Vec<IgnoreRule>) {
    mr.spec.common.drift_detection = Some(DriftDetection { mode, ignore });
}

fn drifted_cm(manager: &str) -> DriftReport {
    DriftReport {
        drifted: vec![cm_id("web-config")],
        errors: vec![],
        details: vec![ObjectDrift {
            id: cm_id("web-config"),
            missing: false,
            fields: vec![
                FieldDrift {
                    path: "/data/message".into(),
                    manager: manager.into(),
                },
                FieldDrift {
                    path: "/data/a".into(),
                    manager: manager.into(),
                },
                FieldDrift {
                    path: "/data/b".into(),
                    manager: String::new(),
                },
                FieldDrift {
                    path: "/data/c".into(),
                    manager: String::new(),
                },
            ],
        }],
    }
}

#[test]
fn correct_forces_the_reapply_and_warn_names_fields_and_managers() {
    let mut mr = applied(&Canned::default());
    let canned = Canned {
        drift: drifted_cm("kubectl-edit"),
        ..Default::default()
    };
    drift_mode(&mut mr, DriftMode::Warn, vec![]);
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::NoOp);
    let msg = "1 resource(s) drifted from desired state: ConfigMap/demo/web-config \
               (/data/message changed by kubectl-edit, /data/a changed by kubectl-edit, /data/b, …)";
    assert_eq!(r.cond3("Drifted"), c3("True", "DriftDetected", msg));

    drift_mode(&mut mr, DriftMode::Correct, vec![]);
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::Applied);
    match r.find(EffectKind::Apply) {
        Some(Effect::Apply { force, .. }) => assert!(force, "Correct re-applies with force"),
        other => panic!("no apply: {other:?}"),
    }
    // A render change skips the drift check; in Correct mode its apply forces too, so an
    // edited field is taken back in that attempt rather than stalling on the conflict.
    let changed = with_render(
        json!({"extra": {"x": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}}}),
    );
    let r = run_mr(&operator_cfg(), mr.clone(), &changed);
    assert!(
        r.find(EffectKind::CheckDrift).is_none(),
        "changed digests: no drift check"
    );
    match r.find(EffectKind::Apply) {
        Some(Effect::Apply { force, .. }) => assert!(force, "Correct: a change forces too"),
        other => panic!("no apply: {other:?}"),
    }
    // Warn mode: a render change applies without force (another manager's field is a
    // conflict the owner is told about, not taken).
    drift_mode(&mut mr, DriftMode::Warn, vec![]);
    let r = run_mr(&operator_cfg(), mr, &changed);
    match r.find(EffectKind::Apply) {
        Some(Effect::Apply { force, .. }) => assert!(!force, "Warn: no force"),
        other => panic!("no apply: {other:?}"),
    }
}

#[test]
fn a_missing_object_is_named_missing() {
    let mut mr = applied(&Canned::default());
    drift_mode(&mut mr, DriftMode::Warn, vec![]);
    let canned = Canned {
        drift: DriftReport {
            drifted: vec![cm_id("web-config")],
            errors: vec![],
            details: vec![ObjectDrift {
                id: cm_id("web-config"),
                missing: true,
                fields: vec![],
            }],
        },
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(
        r.cond("Drifted").unwrap().message,
        "1 resource(s) drifted from desired state: ConfigMap/demo/web-config (missing)"
    );
}

fn annotated_cm(name: &str, annotations: Value) -> Value {
    json!({"extra": {"p": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": annotations}, "data": {"k": "v"}}}})
}

#[test]
fn ssa_policies_decide_what_is_checked_written_and_counted_as_drift() {
    let render = json!({"extra": {
        "i": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ign",
            "annotations": {"releases.opmodel.dev/ssa": "Ignore"}}},
        "n": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ifnp",
            "annotations": {"releases.opmodel.dev/ssa": "IfNotPresent"}}},
        "m": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mrg",
            "annotations": {"releases.opmodel.dev/ssa": "Merge"}}}
    }});
    let canned = with_render(render.clone());
    let first = run_mr(&operator_cfg(), module_release(), &canned);
    assert_eq!(first.outcome, Outcome::Applied);
    let Some(Effect::Apply { stages, .. }) = first.find(EffectKind::Apply) else {
        panic!("no apply");
    };
    let applied: Vec<&str> = stages
        .iter()
        .flat_map(|s| s.objects.iter())
        .map(|o| o.id.name.as_str())
        .collect();
    assert!(!applied.contains(&"ign"), "Ignore is never written");
    assert!(applied.contains(&"ifnp") && applied.contains(&"mrg"));
    for o in stages.iter().flat_map(|s| s.objects.iter()) {
        assert!(
            o.manifest.pointer("/metadata/annotations").is_none(),
            "{} keeps a policy annotation",
            o.id.name
        );
    }
    let mut mr = module_release();
    mr.status = Some(first.status);
    drift_mode(&mut mr, DriftMode::Correct, vec![]);
    // Drift on fields of the IfNotPresent object, and on an other-owned field of the
    // Merge object: neither counts.
    let field = |m: &str| FieldDrift {
        path: "/data/k".into(),
        manager: m.into(),
    };
    let report = DriftReport {
        drifted: vec![cm_id("ifnp"), cm_id("mrg")],
        errors: vec![],
        details: vec![
            ObjectDrift {
                id: cm_id("ifnp"),
                missing: false,
                fields: vec![field("someone")],
            },
            ObjectDrift {
                id: cm_id("mrg"),
                missing: false,
                fields: vec![field("someone")],
            },
        ],
    };
    let canned2 = Canned {
        drift: report,
        ..canned.clone()
    };
    let r = run_mr(&operator_cfg(), mr.clone(), &canned2);
    assert_eq!(r.outcome, Outcome::NoOp);
    assert!(r.cond("Drifted").is_none());
    let Some(Effect::CheckDrift { objects, .. }) = r.find(EffectKind::CheckDrift) else {
        panic!("no drift check");
    };
    assert!(
        !objects.iter().any(|o| o.id.name == "ign"),
        "Ignore is never checked"
    );
    // The IfNotPresent object gone: that is drift, and Correct re-creates it.
    let canned3 = Canned {
        drift: DriftReport {
            drifted: vec![cm_id("ifnp")],
            errors: vec![],
            details: vec![ObjectDrift {
                id: cm_id("ifnp"),
                missing: true,
                fields: vec![],
            }],
        },
        ..canned
    };
    let r = run_mr(&operator_cfg(), mr, &canned3);
    assert_eq!(r.outcome, Outcome::Applied);
}

#[test]
fn changing_a_policy_annotation_changes_the_render_digest() {
    let digest = |ann: Value| {
        let r = run_mr(
            &operator_cfg(),
            module_release(),
            &with_render(annotated_cm("p", ann)),
        );
        r.status.last_applied_render_digest.clone()
    };
    let none = digest(json!({}));
    let ifnp = digest(json!({"releases.opmodel.dev/ssa": "IfNotPresent"}));
    let merge = digest(json!({"releases.opmodel.dev/ssa": "Merge"}));
    let force = digest(json!({"releases.opmodel.dev/force": "enabled"}));
    let prune = digest(json!({"releases.opmodel.dev/prune": "disabled"}));
    let all = [&none, &ifnp, &merge, &force, &prune];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn an_unknown_ssa_value_stalls_render_failed() {
    let r = run_mr(
        &operator_cfg(),
        module_release(),
        &with_render(annotated_cm(
            "p",
            json!({"releases.opmodel.dev/ssa": "Sometimes"}),
        )),
    );
    assert_eq!(r.outcome, Outcome::FailedStalled);
    let ready = r.cond("Ready").unwrap();
    assert_eq!(ready.reason, "RenderFailed");
    assert!(
        ready.message.contains("ConfigMap/demo/p"),
        "{}",
        ready.message
    );
    assert!(r.find(EffectKind::Apply).is_none());
}

#[test]
fn ignore_rules_travel_with_the_objects_they_select() {
    let mut mr = module_release();
    drift_mode(
        &mut mr,
        DriftMode::Warn,
        vec![IgnoreRule {
            paths: vec!["/spec/replicas".into()],
            target: Some(opm_core::api::IgnoreTarget {
                kind: "Deployment".into(),
                ..Default::default()
            }),
        }],
    );
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    let Some(Effect::Apply { stages, .. }) = r.find(EffectKind::Apply) else {
        panic!("no apply");
    };
    for o in stages.iter().flat_map(|s| s.objects.iter()) {
        let want: Vec<String> = if o.id.kind == "Deployment" {
            vec!["/spec/replicas".into()]
        } else {
            vec![]
        };
        assert_eq!(o.policy.ignore, want, "{}", o.id.name);
    }
}

fn deleting(prune: bool, policy: Option<DeletionPolicy>) -> ModuleRelease {
    let mut mr = applied(&Canned::default());
    mr.spec.common.prune = prune;
    mr.spec.common.deletion_policy = policy;
    mr.metadata.deletion_timestamp = Some(Time(t0()));
    mr
}

#[test]
fn deletion_policies_decide_whether_objects_are_deleted() {
    for (prune, policy, deletes) in [
        (true, None, true),
        (false, None, false),
        (false, Some(DeletionPolicy::Delete), true),
        (true, Some(DeletionPolicy::Orphan), false),
        (false, Some(DeletionPolicy::MirrorPrune), false),
    ] {
        let r = run_mr(&operator_cfg(), deleting(prune, policy), &Canned::default());
        assert_eq!(
            r.find(EffectKind::Prune).is_some(),
            deletes,
            "prune {prune}, {policy:?}"
        );
        assert!(r.find(EffectKind::RemoveFinalizer).is_some(), "{policy:?}");
        assert!(r.find(EffectKind::AwaitTermination).is_none());
    }
}

#[test]
fn wait_for_termination_keeps_the_finalizer_until_every_deleted_object_is_gone() {
    let mr = deleting(false, Some(DeletionPolicy::WaitForTermination));
    let r = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    let kinds = r.awaited();
    let wait = kinds
        .iter()
        .position(|k| *k == EffectKind::AwaitTermination)
        .expect("waits for termination");
    let removed = kinds
        .iter()
        .position(|k| *k == EffectKind::RemoveFinalizer)
        .expect("finalizer removed once gone");
    assert!(wait < removed);
    let Some(Effect::AwaitTermination { targets, .. }) = r.find(EffectKind::AwaitTermination)
    else {
        unreachable!()
    };
    assert_eq!(targets.len(), 3, "every deleted object is waited for");

    // One held by a finalizer past the timeout: PruneFailed naming it, finalizer kept.
    let canned = Canned {
        still_terminating: vec!["web-config".into()],
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.outcome, Outcome::FailedTransient);
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    let ready = r.cond("Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PruneFailed")
    );
    assert!(
        ready.message.contains("ConfigMap/demo/web-config")
            && ready.message.contains("WaitForTermination"),
        "{}",
        ready.message
    );
    assert!(r.requeue.is_some(), "retried with backoff");
}

/// SPEC §25: `ssa: Ignore` and `IfNotPresent` objects go through the ownership check like
/// any other. They are never written over, but they enter the inventory, and what the
/// inventory holds a later revision may write and prune: an object that fails the check
/// must stop the attempt before anything is written (issue 31 item 5).
#[test]
fn objects_never_updated_still_go_through_the_ownership_check() {
    let other =
        opm_core::render_value::release_uuid(opm_core::Kind::ModuleRelease, "demo", "other");
    for policy in ["Ignore", "IfNotPresent"] {
        let render = json!({"extra": {
            "i": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "theirs",
                "annotations": {"releases.opmodel.dev/ssa": policy}}}
        }});
        let mut canned = with_render(render.clone());
        canned.owners.insert(
            "theirs".into(),
            Ok(Some(opm_core::input::LiveMeta {
                uid: "u-1".into(),
                labels: [
                    (
                        opm_core::constants::labels::RELEASE_UUID.to_string(),
                        other.clone(),
                    ),
                    (
                        opm_core::constants::labels::RELEASE_NAME.to_string(),
                        "other".into(),
                    ),
                    (
                        opm_core::constants::labels::RELEASE_NAMESPACE.to_string(),
                        "demo".into(),
                    ),
                ]
                .into(),
            })),
        );
        let r = run_mr(&operator_cfg(), module_release(), &canned);
        let Some(Effect::InspectOwners { targets, .. }) = r.find(EffectKind::InspectOwners) else {
            panic!("{policy}: no ownership read");
        };
        assert!(
            targets.iter().any(|t| t.name == "theirs"),
            "{policy}: {targets:?}"
        );
        assert_eq!(
            r.outcome,
            Outcome::FailedStalled,
            "{policy}: {:?}",
            r.cond("Ready")
        );
        assert_eq!(r.reason.as_str(), "OwnershipConflict", "{policy}");
        assert!(
            r.cond("Ready").is_some_and(|c| c
                .message
                .contains("ConfigMap demo/theirs belongs to ModuleRelease demo/other")),
            "{policy}: {:?}",
            r.cond("Ready")
        );
        assert!(
            r.find(EffectKind::Apply).is_none(),
            "{policy}: nothing is written"
        );
        assert!(
            r.status.inventory.is_none(),
            "{policy}: never enters the inventory"
        );

        // Unowned: refused without adoptExisting too.
        let mut canned = with_render(render);
        canned.owners.insert(
            "theirs".into(),
            Ok(Some(opm_core::input::LiveMeta {
                uid: "u-1".into(),
                labels: Default::default(),
            })),
        );
        let r = run_mr(&operator_cfg(), module_release(), &canned);
        assert_eq!(r.reason.as_str(), "OwnershipConflict", "{policy} unowned");
    }
}
