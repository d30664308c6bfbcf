//! SPEC §32 ordered teardown on the machine: a deleting release waits for the releases that
//! depend on it (`DependentsExist`), a cycle never blocks, `opm.dev/force-delete-orphan`
//! lets it go with its objects orphaned, and nothing is listed when nothing is deleted.

mod support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use opm_core::api::ModuleRelease;
use opm_core::effect::{Effect, EffectKind, EventType};
use opm_core::input::{ApiError, DependencyReport, ReleaseSnapshot};
use opm_core::{Kind, Outcome, ReleaseKey};
use serde_json::json;
use support::*;

/// An applied release (3 objects in its inventory, `prune: true`) now being deleted.
fn deleting() -> ModuleRelease {
    let first = run_mr(&operator_cfg(), module_release(), &Canned::default());
    let mut mr = module_release();
    mr.status = Some(first.status);
    mr.spec.common.prune = true;
    mr.metadata.deletion_timestamp = Some(Time(t0()));
    mr
}

fn key(ns: &str, name: &str) -> ReleaseKey {
    ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: ns.into(),
        name: name.into(),
    }
}

fn me() -> ReleaseKey {
    let mr = module_release();
    key(
        mr.metadata.namespace.as_deref().unwrap(),
        mr.metadata.name.as_deref().unwrap(),
    )
}

fn snap(k: ReleaseKey, deps: Vec<ReleaseKey>, deleting: bool) -> ReleaseSnapshot {
    ReleaseSnapshot {
        key: k,
        generation: 1,
        observed_generation: 1,
        ready: "True".into(),
        depends_on: deps,
        deleting,
    }
}

fn with_dependents(releases: Vec<ReleaseSnapshot>) -> Canned {
    Canned {
        dependents: Ok(DependencyReport {
            releases,
            objects: Vec::new(),
        }),
        ..Default::default()
    }
}

#[test]
fn a_dependent_holds_the_deletion_back_with_its_finalizer_and_objects() {
    let mr = deleting();
    let canned = with_dependents(vec![
        snap(key("demo", "app"), vec![me()], true),
        snap(key("other", "unrelated"), vec![key("other", "x")], false),
    ]);
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    let msg = "waiting for dependents to be deleted: ModuleRelease demo/app (deleting); \
               delete them, remove this release from their dependsOn, or set the annotation \
               opm.dev/force-delete-orphan: \"true\" to orphan this release's objects";
    assert_soft(
        &r,
        "DependentsExist",
        "Delete",
        msg,
        mr.status.as_ref().unwrap(),
    );
    assert_eq!(
        r.awaited(),
        vec![EffectKind::ListDependents, EffectKind::PatchStatus]
    );
    match r.find(EffectKind::ListDependents) {
        Some(Effect::ListDependents { release }) => assert_eq!(release, &me()),
        other => panic!("{other:?}"),
    }
    assert!(r.find(EffectKind::InspectStale).is_none(), "nothing pruned");
    assert!(
        r.find(EffectKind::RemoveFinalizer).is_none(),
        "finalizer kept"
    );
    assert_eq!(
        r.status.inventory,
        mr.status.as_ref().unwrap().inventory,
        "inventory kept"
    );

    // The dependent gone: the deletion proceeds and prunes.
    let mut again = mr;
    again.status = Some(r.status);
    let r2 = run_mr(&operator_cfg(), again, &Canned::default());
    assert_eq!(
        r2.awaited(),
        vec![
            EffectKind::ListDependents,
            EffectKind::InspectStale,
            EffectKind::Prune,
            EffectKind::RemoveFinalizer
        ]
    );
    assert_eq!((r2.outcome, r2.reason.as_str()), (Outcome::NoOp, "Deleted"));
}

#[test]
fn a_cycle_through_the_release_never_blocks_its_deletion() {
    let mut mr = deleting();
    mr.spec.common.depends_on = serde_json::from_value(json!([{"name": "b"}])).unwrap();
    // web -> b -> c -> web: c depends on web, but web reaches c.
    let canned = with_dependents(vec![
        snap(key("demo", "b"), vec![key("demo", "c")], true),
        snap(key("demo", "c"), vec![me()], true),
    ]);
    let r = run_mr(&operator_cfg(), mr, &canned);
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
fn the_orphan_annotation_lets_a_release_with_dependents_go_and_orphans_its_objects() {
    let mut mr = deleting();
    mr.metadata.annotations = Some(
        [(
            "opm.dev/force-delete-orphan".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let canned = with_dependents(vec![snap(key("demo", "app"), vec![me()], false)]);
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(
        r.event_tuples(),
        vec![ev(
            EventType::Warning,
            "OrphanedOnDeletion",
            "Delete",
            "Orphaned 3 managed resources; dependents still exist (ModuleRelease demo/app) and opm.dev/force-delete-orphan annotation set"
        )]
    );
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::ListDependents,
            EffectKind::PatchStatus,
            EffectKind::RemoveFinalizer
        ]
    );
    match r.find(EffectKind::PatchStatus) {
        Some(Effect::PatchStatus { patch, .. }) => assert_eq!(patch, &json!({"inventory": null})),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.reason, "Deleted");

    // Any other value does not count.
    mr.metadata.annotations =
        Some([("opm.dev/force-delete-orphan".to_string(), "yes".to_string())].into());
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.reason, "DependentsExist");
}

#[test]
fn nothing_is_listed_when_the_deletion_deletes_nothing() {
    let mut mr = deleting();
    mr.spec.common.prune = false;
    let canned = with_dependents(vec![snap(key("demo", "app"), vec![me()], false)]);
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.awaited(), vec![EffectKind::RemoveFinalizer]);
    assert_eq!(r.reason, "Deleted");
}

#[test]
fn a_failed_listing_is_retried_with_backoff_keeping_everything() {
    let mr = deleting();
    let canned = Canned {
        dependents: Err(ApiError::Unavailable {
            message: "etcd leader changed".into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.outcome, Outcome::FailedTransient);
    assert_eq!(r.reason, "DependentsExist");
    let (_, _, message) = r.cond3("Ready").unwrap();
    assert!(
        message.starts_with("listing the releases that depend on this one failed: "),
        "{message}"
    );
    assert_eq!(r.requeue, Some(opm_core::backoff::compute_backoff(1)));
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
}

#[test]
fn a_dependent_in_another_namespace_blocks_only_with_cross_namespace_refs() {
    let mr = deleting();
    let canned = with_dependents(vec![snap(key("tenant-b", "app"), vec![me()], false)]);
    // Off (the default): a dependency the operator does not honour holds nothing back.
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.reason, "Deleted");
    assert!(r.find(EffectKind::Prune).is_some());
    // On: it waits for it.
    let mut cfg = operator_cfg();
    cfg.allow_cross_namespace_refs = true;
    let r = run_mr(&cfg, mr, &canned);
    assert_eq!(r.reason, "DependentsExist");
    let (_, _, message) = r.cond3("Ready").unwrap();
    assert!(message.contains("ModuleRelease tenant-b/app"), "{message}");
}
