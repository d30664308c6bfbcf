//! SPEC §32 hooks, attempt by attempt with canned reads: the order of the phases, when a
//! hook is done, failed or run again, and the stalls a tenant's annotation can cause.

mod support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use opm_core::api::ModuleRelease;
use opm_core::effect::{Effect, EffectKind};
use opm_core::hooks::{HOOK_ANNOTATION, HOOK_DIGEST_ANNOTATION};
use opm_core::input::{ApiError, RenderOutput};
use opm_core::{Outcome, ResourceId};
use serde_json::{Value, json};
use support::*;

fn job(name: &str, hook: &str) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": {HOOK_ANNOTATION: hook}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}})
}

fn canned_with(hooks: Value) -> Canned {
    Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: exported(json!({ "hooks": hooks })),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    }
}

/// A live Job as its controller writes it, stamped with `digest`.
fn live_job(
    name: &str,
    hook: &str,
    digest: &str,
    status: Value,
) -> Result<Option<Value>, ApiError> {
    Ok(Some(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "demo", "uid": format!("uid-{name}"),
            "labels": {"module-release.opmodel.dev/uuid": uuid()},
            "creationTimestamp": "2026-03-01T09:59:00Z",
            "annotations": {HOOK_ANNOTATION: hook, HOOK_DIGEST_ANNOTATION: digest}},
        "spec": {"suspend": false},
        "status": status})))
}

fn uuid() -> String {
    opm_core::render_value::release_uuid(opm_core::Kind::ModuleRelease, "demo", "web")
}

fn complete() -> Value {
    json!({"startTime": "2026-03-01T09:59:00Z",
        "conditions": [{"type": "Complete", "status": "True"}]})
}

fn failed() -> Value {
    json!({"startTime": "2026-03-01T09:59:00Z",
        "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit"}]})
}

fn applied_names(r: &Run) -> Vec<Vec<String>> {
    r.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Apply { stages, .. } => Some(
                stages
                    .iter()
                    .flat_map(|s| s.objects.iter().map(|o| o.id.name.clone()))
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// The render digest this render gets (from the status of a first attempt whose hook
/// apply fails, which records the digests it knew).
fn render_digest(c: &Canned) -> String {
    let mut c = c.clone();
    c.health.clear();
    for name in ["migrate", "smoke", "cleanup"] {
        c.health.insert(format!("Job/{name}"), Ok(None));
        c.apply_errors.insert(
            name.into(),
            ApiError::Timeout {
                message: "t".into(),
            },
        );
    }
    let r = run_mr(&operator_cfg(), module_release(), &c);
    assert!(!r.status.last_attempted_render_digest.is_empty(), "{r:?}");
    r.status.last_attempted_render_digest.clone()
}

#[test]
fn a_pre_apply_hook_is_applied_alone_and_waited_for_before_anything_else() {
    let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
    c.health.insert("Job/migrate".into(), Ok(None));
    let r = run_mr(&operator_cfg(), module_release(), &c);
    // Only the hook is written; the Deployment, Service and ConfigMap are not.
    assert_eq!(applied_names(&r), vec![vec!["migrate".to_string()]]);
    assert_eq!(r.outcome, Outcome::Progressing);
    let msg = "waiting for 1 pre-apply hook(s): Job/demo/migrate (not found)";
    assert_eq!(r.cond3("Ready"), c3("Unknown", "Progressing", msg));
    // Nothing recorded as applied: the next attempt runs the phase again.
    assert!(r.status.last_applied_render_digest.is_empty());
    assert!(r.status.inventory.is_none());
    // The hook carries the render digest it ran for.
    let Some(Effect::Apply { stages, .. }) = r.find(EffectKind::Apply) else {
        panic!("no apply")
    };
    let hook = &stages[0].objects[0].manifest;
    assert_eq!(
        hook["metadata"]["annotations"][HOOK_DIGEST_ANNOTATION],
        json!(render_digest(&c))
    );
    assert_eq!(
        hook["metadata"]["annotations"][HOOK_ANNOTATION],
        json!("pre-apply")
    );
}

#[test]
fn a_complete_pre_apply_job_of_this_render_lets_the_main_apply_run_without_it() {
    let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
    let d = render_digest(&c);
    c.health.insert(
        "Job/migrate".into(),
        live_job("migrate", "pre-apply", &d, complete()),
    );
    let r = run_mr(&operator_cfg(), module_release(), &c);
    assert_eq!(r.outcome, Outcome::Applied, "{:?}", r.cond3("Ready"));
    let applied = applied_names(&r);
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert!(!applied[0].contains(&"migrate".to_string()));
    assert!(applied[0].contains(&"web".to_string()));
    // The hook is in the inventory like any object.
    let inv = r.status.inventory.as_ref().unwrap();
    assert!(
        inv.entries
            .iter()
            .any(|e| e.kind == "Job" && e.name == "migrate")
    );
    assert_eq!(r.cond3("Ready").unwrap().1, "ReconciliationSucceeded");
}

#[test]
fn a_failed_pre_apply_job_is_hook_failed_and_nothing_else_is_applied() {
    let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
    let d = render_digest(&c);
    c.health.insert(
        "Job/migrate".into(),
        live_job("migrate", "pre-apply", &d, failed()),
    );
    let r = run_mr(&operator_cfg(), module_release(), &c);
    let msg = "pre-apply hook failed: Job/demo/migrate (job failed: BackoffLimitExceeded: Job has reached the specified backoff limit); the rest of the pre-apply phase is not applied";
    assert_transient(&r, "HookFailed", "Hook", msg, 1);
    assert!(applied_names(&r).is_empty());
    assert!(r.status.last_applied_render_digest.is_empty());
}

#[test]
fn a_failed_job_runs_again_once_its_backoff_has_passed() {
    let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
    let d = render_digest(&c);
    c.health.insert(
        "Job/migrate".into(),
        live_job("migrate", "pre-apply", &d, failed()),
    );
    let first = run_mr(&operator_cfg(), module_release(), &c);
    assert_eq!(first.reason, "HookFailed");
    let mut mr = module_release();
    mr.status = Some(first.status.clone());
    // Before the backoff: HookFailed again, nothing deleted.
    let early = run_mr(&operator_cfg(), mr.clone(), &c);
    assert_eq!(early.reason, "HookFailed");
    assert!(early.find(EffectKind::Prune).is_none());
    // After it: the Job is deleted with its uid as precondition, then created.
    let later = run(
        &operator_cfg(),
        opm_core::ReleaseObject::ModuleRelease(mr),
        &c,
        t0().checked_add(secs(60)).unwrap(),
    );
    let Some(Effect::Prune { deletions, .. }) = later.find(EffectKind::Prune) else {
        panic!("no delete: {:?}", later.kinds())
    };
    assert_eq!(deletions.len(), 1);
    assert_eq!(deletions[0].id.name, "migrate");
    assert_eq!(deletions[0].uid, "uid-migrate");
    assert!(!deletions[0].resume);
    assert_eq!(applied_names(&later), vec![vec!["migrate".to_string()]]);
    let kinds = later.awaited();
    let del = kinds.iter().position(|k| *k == EffectKind::Prune).unwrap();
    let app = kinds.iter().position(|k| *k == EffectKind::Apply).unwrap();
    assert!(del < app, "{kinds:?}");
}

#[test]
fn a_job_of_another_render_is_deleted_with_its_uid_then_created() {
    let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
    c.health.insert(
        "Job/migrate".into(),
        live_job(
            "migrate",
            "pre-apply",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            complete(),
        ),
    );
    let r = run_mr(&operator_cfg(), module_release(), &c);
    let Some(Effect::Prune { deletions, .. }) = r.find(EffectKind::Prune) else {
        panic!("no delete: {:?}", r.kinds())
    };
    assert_eq!(deletions[0].uid, "uid-migrate");
    // Read back still showing the old run (a cache behind): waited for, not trusted.
    assert_eq!(applied_names(&r), vec![vec!["migrate".to_string()]]);
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "Unknown",
            "Progressing",
            "waiting for 1 pre-apply hook(s): Job/demo/migrate (not yet updated)"
        )
    );
}

#[test]
fn a_hook_that_never_completes_fails_at_the_timeout() {
    let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
    let d = render_digest(&c);
    c.health.insert(
        "Job/migrate".into(),
        live_job(
            "migrate",
            "pre-apply",
            &d,
            json!({"startTime": "2026-03-01T09:50:00Z", "active": 1}),
        ),
    );
    let r = run_mr(&operator_cfg(), module_release(), &c);
    assert_eq!(r.reason, "HookFailed");
    let msg = r.cond3("Ready").unwrap().2;
    assert!(
        msg.contains("Job/demo/migrate (not done within the timeout (5m0s)"),
        "{msg}"
    );
    assert!(applied_names(&r).is_empty());
}

#[test]
fn a_post_apply_hook_runs_after_everything_else_is_healthy() {
    let mut c = canned_with(json!({"smoke": job("smoke", "post-apply")}));
    c.health.insert("Job/smoke".into(), Ok(None));
    let r = run_mr(&operator_cfg(), module_release(), &c);
    let applied = applied_names(&r);
    assert_eq!(applied.len(), 2, "{applied:?}");
    assert!(!applied[0].contains(&"smoke".to_string()));
    assert_eq!(applied[1], vec!["smoke".to_string()]);
    // Health of the rest was read before the hook was applied.
    let kinds = r.awaited();
    let first_apply = kinds.iter().position(|k| *k == EffectKind::Apply).unwrap();
    let health = kinds
        .iter()
        .position(|k| *k == EffectKind::AssessHealth)
        .unwrap();
    let hook_apply = kinds.iter().rposition(|k| *k == EffectKind::Apply).unwrap();
    assert!(first_apply < health && health < hook_apply, "{kinds:?}");
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "Unknown",
            "Progressing",
            "waiting for 1 post-apply hook(s): Job/demo/smoke (not found)"
        )
    );
    // Everything else is healthy, and Healthy says so while the hook runs.
    assert_eq!(r.cond3("Healthy").unwrap().0, "True");
    // The main apply is recorded: the next attempt is a NoOp that reads the hook again.
    assert!(!r.status.last_applied_render_digest.is_empty());
    let mut mr = module_release();
    mr.status = Some(r.status.clone());
    let d = r.status.last_applied_render_digest.clone();
    c.health.insert(
        "Job/smoke".into(),
        live_job("smoke", "post-apply", &d, complete()),
    );
    let next = run_mr(&operator_cfg(), mr, &c);
    assert_eq!(next.outcome, Outcome::NoOp);
    assert_eq!(next.cond3("Ready").unwrap().1, "ReconciliationSucceeded");
    assert!(applied_names(&next).is_empty());
}

#[test]
fn a_post_apply_hook_not_applied_when_the_rest_is_unhealthy() {
    let mut c = canned_with(json!({"smoke": job("smoke", "post-apply")}));
    c.health.insert(
        "Deployment/web".into(),
        Ok(Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "demo", "generation": 1},
            "spec": {"replicas": 2},
            "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2}}))),
    );
    let r = run_mr(&operator_cfg(), module_release(), &c);
    assert_eq!(applied_names(&r).len(), 1);
    assert!(!applied_names(&r)[0].contains(&"smoke".to_string()));
    // The hook's health is not waited for by the health wait.
    let msg = r.cond3("Ready").unwrap().2;
    assert!(msg.starts_with("waiting for 1 of 3 resources"), "{msg}");
}

fn with_pre_delete() -> (Canned, ModuleRelease) {
    let c = canned_with(json!({"cleanup": job("cleanup", "pre-delete")}));
    let first = run_mr(&operator_cfg(), module_release(), &c);
    assert_eq!(
        first.outcome,
        Outcome::Applied,
        "{:?}",
        first.cond3("Ready")
    );
    let mut mr = module_release();
    mr.status = Some(first.status.clone());
    mr.spec.common.prune = true;
    mr.metadata.deletion_timestamp = Some(Time(t0()));
    (c, mr)
}

#[test]
fn a_pre_delete_job_is_created_suspended_with_the_release() {
    let c = canned_with(json!({"cleanup": job("cleanup", "pre-delete")}));
    let r = run_mr(&operator_cfg(), module_release(), &c);
    let Some(Effect::Apply { stages, .. }) = r.find(EffectKind::Apply) else {
        panic!()
    };
    let cleanup = stages
        .iter()
        .flat_map(|s| &s.objects)
        .find(|o| o.id.name == "cleanup")
        .expect("the pre-delete Job is in the main apply");
    assert_eq!(cleanup.manifest["spec"]["suspend"], json!(true));
}

#[test]
fn deletion_resumes_a_pre_delete_job_and_prunes_nothing_until_it_completes() {
    let (mut c, mr) = with_pre_delete();
    let d = mr
        .status
        .as_ref()
        .unwrap()
        .last_applied_render_digest
        .clone();
    let mut suspended = live_job("cleanup", "pre-delete", &d, json!({}));
    if let Ok(Some(v)) = &mut suspended {
        v["spec"]["suspend"] = json!(true);
    }
    c.health.insert("Job/cleanup".into(), suspended);
    let r = run_mr(&operator_cfg(), mr.clone(), &c);
    let Some(Effect::Prune { deletions, .. }) = r.find(EffectKind::Prune) else {
        panic!("{:?}", r.kinds())
    };
    assert_eq!(deletions.len(), 1);
    assert!(deletions[0].resume);
    assert_eq!(deletions[0].uid, "uid-cleanup");
    assert!(r.find(EffectKind::InspectStale).is_none());
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    assert_eq!(r.reason, "Progressing");
    // Complete: the whole inventory is pruned, then the finalizer goes.
    c.health.insert(
        "Job/cleanup".into(),
        live_job("cleanup", "pre-delete", &d, complete()),
    );
    let done = run_mr(&operator_cfg(), mr, &c);
    assert!(done.find(EffectKind::InspectStale).is_some());
    assert!(done.find(EffectKind::RemoveFinalizer).is_some());
    assert_eq!(done.reason, "Deleted");
}

#[test]
fn deletion_never_resumes_a_job_another_release_owns() {
    let (mut c, mr) = with_pre_delete();
    let mut other = live_job("cleanup", "pre-delete", "sha256:x", json!({}));
    if let Ok(Some(v)) = &mut other {
        v["spec"]["suspend"] = json!(true);
        v["metadata"]["labels"]["module-release.opmodel.dev/uuid"] = json!("someone-else");
    }
    c.health.insert("Job/cleanup".into(), other);
    let r = run_mr(&operator_cfg(), mr, &c);
    assert!(
        r.effects.iter().all(
            |e| !matches!(e, Effect::Prune { deletions, .. } if deletions.iter().any(|d| d.resume))
        ),
        "{:?}",
        r.kinds()
    );
    // The prune's own guards then leave it alone too.
    assert!(r.find(EffectKind::InspectStale).is_some());
}

#[test]
fn a_failed_pre_delete_job_keeps_everything() {
    let (mut c, mr) = with_pre_delete();
    let d = mr
        .status
        .as_ref()
        .unwrap()
        .last_applied_render_digest
        .clone();
    c.health.insert(
        "Job/cleanup".into(),
        live_job("cleanup", "pre-delete", &d, failed()),
    );
    let r = run_mr(&operator_cfg(), mr, &c);
    assert_eq!(r.reason, "HookFailed");
    assert_eq!(r.outcome, Outcome::FailedTransient);
    assert!(r.find(EffectKind::InspectStale).is_none());
    assert!(r.find(EffectKind::RemoveFinalizer).is_none());
    assert!(
        r.cond3("Ready")
            .unwrap()
            .2
            .starts_with("pre-delete hook failed: Job/demo/cleanup")
    );
}

#[test]
fn an_unknown_hook_value_stalls_before_anything_is_written() {
    let c = canned_with(json!({"x": job("x", "pre-install")}));
    let r = run_mr(&operator_cfg(), module_release(), &c);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "Job/demo/x: annotation releases.opmodel.dev/hook: \"pre-install\" is not one of pre-apply, post-apply, pre-delete",
    );
    assert!(r.find(EffectKind::Apply).is_none());
}

#[test]
fn more_hooks_than_max_hooks_stall() {
    let hooks: serde_json::Map<String, Value> = (0..3)
        .map(|i| (format!("h{i}"), job(&format!("h{i}"), "post-apply")))
        .collect();
    let c = canned_with(Value::Object(hooks));
    let mut cfg = operator_cfg();
    cfg.max_hooks = 2;
    let r = run_mr(&cfg, module_release(), &c);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "rendered 3 hooks; the cap is 2 (--max-hooks)",
    );
}

#[test]
fn hooks_are_not_drift_checked() {
    let mut c = canned_with(json!({"smoke": job("smoke", "post-apply")}));
    let first = run_mr(&operator_cfg(), module_release(), &c);
    let d = first.status.last_attempted_render_digest.clone();
    c.health.insert(
        "Job/smoke".into(),
        live_job("smoke", "post-apply", &d, complete()),
    );
    let mut mr = module_release();
    mr.status = Some(first.status.clone());
    let second = run_mr(&operator_cfg(), mr, &c);
    let mut mr = module_release();
    mr.status = Some(second.status.clone());
    let third = run_mr(&operator_cfg(), mr, &c);
    let Some(Effect::CheckDrift { objects, .. }) = third.find(EffectKind::CheckDrift) else {
        panic!("{:?}", third.kinds())
    };
    assert!(objects.iter().all(|o| o.id.name != "smoke"));
    assert!(!objects.is_empty());
    let _ = ResourceId::default();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Whatever the pre-apply Job's live state, the rest of the release is written only
    /// when that Job is complete for this render, and a Job is only ever deleted by the
    /// uid that was read.
    #[test]
    fn nothing_else_is_written_before_the_pre_apply_job_completed_for_this_render(
        state in 0u8..6,
        retry in proptest::bool::ANY,
    ) {
        let mut c = canned_with(json!({"migrate": job("migrate", "pre-apply")}));
        let d = render_digest(&c);
        let old = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
        let live = match state {
            0 => Ok(None),
            1 => live_job("migrate", "pre-apply", &d, complete()),
            2 => live_job("migrate", "pre-apply", old, complete()),
            3 => live_job("migrate", "pre-apply", &d, failed()),
            4 => live_job("migrate", "pre-apply", &d, json!({"startTime": "2026-03-01T09:59:30Z", "active": 1})),
            _ => live_job("migrate", "pre-apply", &d, json!({"startTime": "2026-03-01T09:00:00Z", "active": 1})),
        };
        c.health.insert("Job/migrate".into(), live);
        let mut mr = module_release();
        if retry {
            let first = run_mr(&operator_cfg(), module_release(), &c);
            mr.status = Some(first.status.clone());
        }
        let start = if retry { t0().checked_add(secs(3600)).unwrap() } else { t0() };
        let r = run(&operator_cfg(), opm_core::ReleaseObject::ModuleRelease(mr), &c, start);
        let main_written = applied_names(&r).iter().any(|a| a.contains(&"web".to_string()));
        if main_written {
            proptest::prop_assert_eq!(state, 1, "{:?}", r.kinds());
        }
        // The first attempt (no status yet) that sees it complete goes on at once.
        if state == 1 && !retry {
            proptest::prop_assert!(main_written, "{:?}", r.kinds());
        }
        for e in &r.effects {
            if let Effect::Prune { deletions, .. } = e {
                for del in deletions {
                    proptest::prop_assert_eq!(&del.uid, "uid-migrate");
                }
            }
        }
    }
}
