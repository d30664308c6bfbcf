//! SPEC §12 (deletion), §9 (prune guards on deletion), §3 steps 1-3 (gone, finalizer 2×2).

mod support;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use opm_core::api::ModuleRelease;
use opm_core::effect::{Effect, EffectKind, EventType};
use opm_core::input::{ApiError, LiveMeta, RenderOutput};
use opm_core::{Input, InputKind, Kind, Outcome, ReleaseKey};
use serde_json::json;
use support::*;

/// An applied release (with a Namespace in its inventory) now being deleted.
fn deleting(prune: bool, sa: Option<&str>) -> ModuleRelease {
    let canned = Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: exported(
                json!({"ns": {"n": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra"}}}}),
            ),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let first = run_mr(&operator_cfg(), module_release(), &canned);
    assert_eq!(first.status.inventory.as_ref().unwrap().count, 4);
    let mut mr = module_release();
    mr.status = Some(first.status);
    mr.spec.common.prune = prune;
    mr.spec.common.service_account_name = sa.map(str::to_string);
    mr.metadata.deletion_timestamp = Some(Time(t0()));
    mr
}

#[test]
fn object_gone_is_done_without_requeue() {
    let key = ReleaseKey {
        kind: Kind::Release,
        namespace: "demo".into(),
        name: "x".into(),
    };
    let (a, batch) = opm_core::Attempt::start(
        &operator_cfg(),
        Input::new(t0(), InputKind::Observed { key, object: None }),
    );
    assert!(a.is_finished());
    assert_eq!(
        batch,
        vec![Effect::Done {
            outcome: Outcome::NoOp,
            reason: opm_core::Reason::Gone,
            requeue_after: None
        }]
    );
}

#[test]
fn deleting_without_our_finalizer_is_left_alone() {
    let mut mr = deleting(true, None);
    mr.metadata.finalizers = Some(vec!["someone.else/finalizer".into()]);
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(r.kinds(), vec![EffectKind::Done]);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::NoOp, "Deleted", None)
    );
}

#[test]
fn prune_false_orphans_and_removes_the_finalizer() {
    let r = run_mr(&operator_cfg(), deleting(false, None), &Canned::default());
    assert_eq!(r.awaited(), vec![EffectKind::RemoveFinalizer]);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::NoOp, "Deleted", None)
    );
    assert!(r.events().is_empty());
}

#[test]
fn empty_inventory_removes_the_finalizer() {
    let mut mr = module_release();
    mr.spec.common.prune = true;
    mr.metadata.deletion_timestamp = Some(Time(t0()));
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(r.awaited(), vec![EffectKind::RemoveFinalizer]);
}

#[test]
fn prune_on_deletion_deletes_everything_owned_except_namespaces() {
    let r = run_mr(&operator_cfg(), deleting(true, None), &Canned::default());
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::ListDependents,
            EffectKind::InspectStale,
            EffectKind::Prune,
            EffectKind::RemoveFinalizer
        ]
    );
    match r.find(EffectKind::InspectStale) {
        Some(Effect::InspectStale {
            targets, identity, ..
        }) => {
            let names: Vec<String> = targets.iter().map(|t| t.display()).collect();
            // Reverse apply order: workloads, services, config; the Namespace is never a target.
            assert_eq!(
                names,
                vec![
                    "Deployment/demo/web",
                    "Service/demo/web",
                    "ConfigMap/demo/web-config"
                ]
            );
            assert_eq!(identity, &None);
        }
        other => panic!("{other:?}"),
    }
    match r.find(EffectKind::Prune) {
        Some(Effect::Prune { deletions, .. }) => {
            assert_eq!(deletions.len(), 3);
            assert_eq!(deletions[0].uid, "live-web");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.event_tuples(),
        vec![
            ev(
                EventType::Warning,
                "PruneSkipped",
                "Prune",
                "Skipped pruning 1 resource(s) that are never deleted: Namespace/extra"
            ),
            ev(
                EventType::Normal,
                "Pruned",
                "Prune",
                "Pruned 3 stale resources"
            ),
        ]
    );
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::NoOp, "Deleted", None)
    );
    assert!(r.find(EffectKind::PatchStatus).is_none());
}

#[test]
fn deletion_runs_even_when_suspended() {
    let mut mr = deleting(true, None);
    mr.spec.common.suspend = true;
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::ListDependents,
            EffectKind::InspectStale,
            EffectKind::Prune,
            EffectKind::RemoveFinalizer
        ]
    );
}

#[test]
fn objects_not_ours_are_not_deleted() {
    let mut canned = Canned::default();
    canned.live.insert(
        "web-config".into(),
        Ok(Some(LiveMeta {
            uid: "u".into(),
            labels: BTreeMap::from([("app.kubernetes.io/managed-by".into(), "helm".into())]),
        })),
    );
    canned.live.insert(
        "web".into(),
        Ok(Some(LiveMeta {
            uid: "u2".into(),
            labels: ours("another-release-uuid"),
        })),
    );
    let r = run_mr(&operator_cfg(), deleting(true, None), &canned);
    // Nothing left to delete: no Prune effect at all.
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::ListDependents,
            EffectKind::InspectStale,
            EffectKind::RemoveFinalizer
        ]
    );
}

#[test]
fn missing_service_account_blocks_deletion_with_the_ways_out() {
    let canned = Canned {
        sa_exists: Ok(false),
        ..Default::default()
    };
    let mr = deleting(true, Some("deployer"));
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    let msg = opm_core::deletion::sa_missing_message("demo", Some("deployer"), 4);
    assert!(
        msg.contains("restore the ServiceAccount")
            && msg.contains("spec.prune: false")
            && msg.contains("opm.dev/force-delete-orphan")
    );
    assert_stall(&r, "DeletionSAMissing", "Delete", &msg);
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    assert_eq!(
        r.status.inventory,
        mr.status.as_ref().unwrap().inventory,
        "inventory kept"
    );
    assert_eq!(r.status.history[0].phase, "deletion");
    // Warned once: the next attempt stays quiet.
    let mut again = mr;
    again.status = Some(r.status);
    let r2 = run_mr(&operator_cfg(), again, &canned);
    assert_eq!(r2.reason, "DeletionSAMissing");
    assert!(r2.events().is_empty());
}

#[test]
fn orphan_annotation_clears_inventory_and_lets_go() {
    let canned = Canned {
        sa_exists: Ok(false),
        ..Default::default()
    };
    let mut mr = deleting(true, Some("deployer"));
    mr.metadata.annotations = Some(
        [(
            "opm.dev/force-delete-orphan".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(
        r.event_tuples(),
        vec![ev(
            EventType::Warning,
            "OrphanedOnDeletion",
            "Delete",
            "Orphaned 4 managed resources; ServiceAccount \"deployer\" missing and opm.dev/force-delete-orphan annotation set"
        )]
    );
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::ListDependents,
            EffectKind::CheckServiceAccount,
            EffectKind::PatchStatus,
            EffectKind::RemoveFinalizer
        ]
    );
    match r.find(EffectKind::PatchStatus) {
        Some(Effect::PatchStatus { patch, .. }) => assert_eq!(patch, &json!({"inventory": null})),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.reason, "Deleted");
    // Only the exact string "true" counts.
    mr.metadata.annotations = Some(
        [(
            "opm.dev/force-delete-orphan".to_string(),
            "True".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        run_mr(&operator_cfg(), mr, &canned).reason,
        "DeletionSAMissing"
    );
}

#[test]
fn forbidden_prune_while_impersonating_stalls_deletion() {
    let mut canned = Canned::default();
    canned.prune_errors.insert(
        "web".into(),
        ApiError::Forbidden {
            message: "cannot delete deployments".into(),
        },
    );
    let r = run_mr(&operator_cfg(), deleting(true, Some("deployer")), &canned);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (
            Outcome::FailedStalled,
            "ImpersonationFailed",
            Some(secs(1800))
        )
    );
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    match r.find(EffectKind::Prune) {
        Some(Effect::Prune {
            identity: Some(i), ..
        }) => assert_eq!(i.user, "system:serviceaccount:demo:deployer"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_prune_errors_on_deletion_retry_with_backoff() {
    let mut canned = Canned::default();
    canned.prune_errors.insert(
        "web-config".into(),
        ApiError::Unavailable {
            message: "etcd".into(),
        },
    );
    let r = run_mr(&operator_cfg(), deleting(true, None), &canned);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::FailedTransient, "PruneFailed", Some(secs(5)))
    );
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    assert_eq!(r.status.failure_counters.prune, 1);
}

#[test]
fn missing_finalizer_is_added_and_the_attempt_continues() {
    let mut mr = module_release();
    mr.metadata.finalizers = None;
    let r = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::AddFinalizer,
            EffectKind::Render,
            EffectKind::InspectOwners,
            EffectKind::Apply,
            EffectKind::AssessHealth,
            EffectKind::PatchStatus
        ]
    );
    assert_eq!(r.outcome, Outcome::Applied);
    match r.find(EffectKind::AddFinalizer) {
        Some(Effect::AddFinalizer { finalizer }) => assert_eq!(finalizer, FINALIZER),
        other => panic!("{other:?}"),
    }
    let canned = Canned {
        finalizer_added: Err(ApiError::Conflict {
            message: "changed".into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::FailedTransient, "FinalizerFailed", Some(secs(5)))
    );
    assert!(r.written.is_none());
}
