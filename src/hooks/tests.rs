use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::health::{Assessment, HealthStatus};
use crate::object::{DesiredObject, ResourceId};

const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn job_id(name: &str) -> ResourceId {
    ResourceId {
        group: "batch".into(),
        kind: "Job".into(),
        namespace: "demo".into(),
        name: name.into(),
        version: "v1".into(),
    }
}

fn obj(id: ResourceId, hook: Option<&str>) -> DesiredObject {
    let mut meta = json!({"name": id.name, "namespace": id.namespace});
    if let Some(h) = hook {
        meta["annotations"] = json!({ HOOK_ANNOTATION: h });
    }
    DesiredObject {
        manifest: json!({"apiVersion": id.api_version(), "kind": id.kind, "metadata": meta, "spec": {}}),
        id,
        component: "c".into(),
        policy: Default::default(),
    }
}

fn cm(name: &str, hook: Option<&str>) -> DesiredObject {
    obj(
        ResourceId {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: "demo".into(),
            name: name.into(),
            version: "v1".into(),
        },
        hook,
    )
}

fn now() -> jiff::Timestamp {
    "2026-03-01T10:10:00Z".parse().unwrap()
}

fn judging(retry_due: bool, after_write: bool) -> Judging<'static> {
    Judging {
        render_digest: D1,
        now: now(),
        timeout: Duration::from_secs(300),
        retry_due,
        after_write,
    }
}

fn live_job(digest: &str, start: &str, suspend: bool) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "m", "namespace": "demo", "uid": "u-1",
            "creationTimestamp": "2026-03-01T10:00:00Z",
            "annotations": {HOOK_ANNOTATION: "pre-apply", HOOK_DIGEST_ANNOTATION: digest}},
        "spec": {"suspend": suspend},
        "status": {"startTime": start}})
}

fn a(status: HealthStatus, msg: &str) -> Assessment {
    Assessment {
        status,
        message: msg.into(),
    }
}

#[test]
fn the_three_phases_parse_exactly() {
    for p in HookPhase::ALL {
        assert_eq!(HookPhase::parse(p.as_str()), Some(p));
    }
    for bad in ["Pre-Apply", "pre-install", "", "pre-apply ", "post-delete"] {
        assert_eq!(HookPhase::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn an_unknown_phase_is_a_render_failed_stall_naming_the_object() {
    let mut objs = vec![cm("a", Some("pre-install"))];
    let f = extract(&mut objs, 32, D1).unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
    assert_eq!(f.class, crate::outcome::FailureClass::Stalled);
    assert_eq!(
        f.message,
        "ConfigMap/demo/a: annotation releases.opmodel.dev/hook: \"pre-install\" is not one of pre-apply, post-apply, pre-delete"
    );
}

#[test]
fn a_long_unknown_phase_is_cut_in_the_message() {
    let long = "x".repeat(10_000);
    let mut objs = vec![cm("a", Some(&long))];
    let f = extract(&mut objs, 32, D1).unwrap_err();
    assert!(f.message.len() < 300, "{}", f.message.len());
}

#[test]
fn a_non_string_annotation_is_refused_too() {
    let mut o = cm("a", None);
    o.manifest["metadata"]["annotations"] = json!({ HOOK_ANNOTATION: 3 });
    let f = extract(&mut [o], 32, D1).unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
}

#[test]
fn pre_delete_is_only_for_jobs() {
    let mut objs = vec![cm("a", Some("pre-delete"))];
    let f = extract(&mut objs, 32, D1).unwrap_err();
    assert!(
        f.message
            .contains("pre-delete is only for a Job (batch/v1)"),
        "{}",
        f.message
    );
}

#[test]
fn more_hooks_than_the_cap_stall_with_count_and_cap() {
    let mut objs: Vec<DesiredObject> = (0..4)
        .map(|i| cm(&format!("h{i}"), Some("post-apply")))
        .chain([cm("plain", None)])
        .collect();
    let f = extract(&mut objs, 3, D1).unwrap_err();
    assert_eq!(f.message, "rendered 4 hooks; the cap is 3 (--max-hooks)");
    assert!(extract(&mut objs, 4, D1).is_ok());
}

#[test]
fn hooks_are_stamped_with_the_digest_and_pre_delete_jobs_suspended() {
    let mut objs = vec![
        obj(job_id("down"), Some("pre-delete")),
        obj(job_id("up"), Some("pre-apply")),
        cm("plain", None),
    ];
    extract(&mut objs, 32, D1).unwrap();
    assert_eq!(live_digest(&objs[0].manifest), Some(D1));
    assert_eq!(objs[0].manifest["spec"]["suspend"], json!(true));
    assert_eq!(live_digest(&objs[1].manifest), Some(D1));
    assert_eq!(objs[1].manifest["spec"].get("suspend"), None);
    assert_eq!(live_digest(&objs[2].manifest), None);
    assert!(in_main_apply(&objs[0]));
    assert!(!in_main_apply(&objs[1]));
    assert!(in_main_apply(&objs[2]));
    assert_eq!(of_phase(&objs, HookPhase::PreApply).len(), 1);
}

#[test]
fn an_absent_hook_is_applied_and_after_the_write_waited_for() {
    let id = job_id("m");
    let x = a(HealthStatus::InProgress, "not found");
    assert_eq!(
        judge_apply_phase(&id, None, &x, &judging(false, false)),
        Verdict::Apply
    );
    assert_eq!(
        judge_apply_phase(&id, None, &x, &judging(false, true)),
        Verdict::Waiting("not found".into())
    );
}

#[test]
fn a_job_of_another_render_is_recreated_other_kinds_reapplied() {
    let live = live_job(D2, "2026-03-01T10:09:00Z", false);
    let done = a(HealthStatus::Current, "complete");
    assert_eq!(
        judge_apply_phase(&job_id("m"), Some(&live), &done, &judging(false, false)),
        Verdict::Recreate { uid: "u-1".into() }
    );
    let cm_id = cm("x", None).id;
    assert_eq!(
        judge_apply_phase(&cm_id, Some(&live), &done, &judging(false, false)),
        Verdict::Apply
    );
}

#[test]
fn a_complete_job_of_this_render_is_done() {
    let live = live_job(D1, "2026-03-01T10:09:00Z", false);
    let done = a(HealthStatus::Current, "complete");
    assert_eq!(
        judge_apply_phase(&job_id("m"), Some(&live), &done, &judging(false, false)),
        Verdict::Done
    );
}

#[test]
fn a_failed_job_fails_until_its_retry_is_due_then_is_recreated() {
    let live = live_job(D1, "2026-03-01T10:09:00Z", false);
    let failed = a(HealthStatus::Failed, "BackoffLimitExceeded");
    assert_eq!(
        judge_apply_phase(&job_id("m"), Some(&live), &failed, &judging(false, false)),
        Verdict::Failed("BackoffLimitExceeded".into())
    );
    assert_eq!(
        judge_apply_phase(&job_id("m"), Some(&live), &failed, &judging(true, false)),
        Verdict::Recreate { uid: "u-1".into() }
    );
    // Never twice in one attempt.
    assert_eq!(
        judge_apply_phase(&job_id("m"), Some(&live), &failed, &judging(true, true)),
        Verdict::Failed("BackoffLimitExceeded".into())
    );
}

#[test]
fn a_hook_running_longer_than_the_timeout_failed() {
    let running = a(HealthStatus::InProgress, "0 of 1 completions");
    let recent = live_job(D1, "2026-03-01T10:06:00Z", false);
    assert_eq!(
        judge_apply_phase(
            &job_id("m"),
            Some(&recent),
            &running,
            &judging(false, false)
        ),
        Verdict::Waiting("0 of 1 completions".into())
    );
    let old = live_job(D1, "2026-03-01T10:05:00Z", false);
    assert_eq!(
        judge_apply_phase(&job_id("m"), Some(&old), &running, &judging(false, false)),
        Verdict::Failed("not done within the timeout (5m0s): 0 of 1 completions".into())
    );
}

#[test]
fn a_pre_delete_job_is_resumed_then_waited_for_and_an_absent_one_is_done() {
    let suspended = live_job(D1, "2026-03-01T10:00:00Z", true);
    let x = a(HealthStatus::InProgress, "suspended");
    assert_eq!(
        judge_pre_delete(Some(&suspended), &x, &judging(false, false)),
        Verdict::Resume { uid: "u-1".into() }
    );
    assert_eq!(
        judge_pre_delete(Some(&suspended), &x, &judging(false, true)),
        Verdict::Waiting("resuming".into())
    );
    assert_eq!(
        judge_pre_delete(None, &x, &judging(false, false)),
        Verdict::Done
    );
    let running = live_job(D1, "2026-03-01T10:09:30Z", false);
    assert_eq!(
        judge_pre_delete(Some(&running), &x, &judging(false, false)),
        Verdict::Waiting("suspended".into())
    );
    let done = a(HealthStatus::Current, "complete");
    assert_eq!(
        judge_pre_delete(Some(&running), &done, &judging(false, false)),
        Verdict::Done
    );
}

#[test]
fn messages_name_the_phase_and_each_hook() {
    let f = failed_message(
        HookPhase::PreApply,
        &[(job_id("m"), "BackoffLimitExceeded".into())],
    );
    assert_eq!(
        f,
        "pre-apply hook failed: Job/demo/m (BackoffLimitExceeded); the rest of the pre-apply phase is not applied"
    );
    let w = waiting_message(HookPhase::PostApply, &[(job_id("m"), "running".into())]);
    assert_eq!(w, "waiting for 1 post-apply hook(s): Job/demo/m (running)");
}

proptest::proptest! {
    /// Whatever a tenant writes in the annotation: a known phase, or a RenderFailed stall,
    /// never a panic, and the cap holds for any count.
    #[test]
    fn any_annotation_value_is_a_phase_or_a_stall(v in ".{0,80}", n in 0usize..8, cap in 0u64..8) {
        let mut objs: Vec<DesiredObject> = (0..n).map(|i| cm(&format!("h{i}"), Some(&v))).collect();
        match extract(&mut objs, cap, D1) {
            Ok(()) => {
                proptest::prop_assert!(n == 0 || HookPhase::parse(&v).is_some());
                proptest::prop_assert!(n as u64 <= cap);
                proptest::prop_assert!(HookPhase::parse(&v) != Some(HookPhase::PreDelete) || n == 0);
            }
            Err(f) => proptest::prop_assert_eq!(f.reason, Reason::RenderFailed),
        }
    }

    /// After this attempt's own write, a hook is never written again in the same attempt.
    #[test]
    fn after_a_write_nothing_is_written_again(
        digest_same in proptest::bool::ANY,
        status in 0u8..4,
        retry in proptest::bool::ANY,
        present in proptest::bool::ANY,
        suspend in proptest::bool::ANY,
        start_min in 0i64..20,
    ) {
        let start = format!("2026-03-01T10:{start_min:02}:00Z");
        let live = live_job(if digest_same { D1 } else { D2 }, &start, suspend);
        let status = match status { 0 => HealthStatus::Current, 1 => HealthStatus::Failed,
            2 => HealthStatus::InProgress, _ => HealthStatus::Unknown };
        let x = a(status, "m");
        let j = judging(retry, true);
        let live = present.then_some(&live);
        let v1 = judge_apply_phase(&job_id("m"), live, &x, &j);
        let v2 = judge_pre_delete(live, &x, &j);
        for v in [v1, v2] {
            proptest::prop_assert!(
                matches!(v, Verdict::Done | Verdict::Waiting(_) | Verdict::Failed(_)),
                "{:?}", v
            );
        }
    }
}
