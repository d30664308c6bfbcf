//! SPEC §3 step 17 and §26: the health wait, step by step with canned health reads.

mod support;

use opm_core::api::HealthCheckExpr;
use opm_core::effect::{Effect, EffectKind, EventType, Metric};
use opm_core::input::ApiError;
use opm_core::{Outcome, ReleaseObject};
use serde_json::{Value, json};
use support::*;

fn deployment(status: Value) -> Result<Option<Value>, ApiError> {
    Ok(Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo", "generation": 1},
        "spec": {"replicas": 2}, "status": status})))
}

fn rolling() -> Result<Option<Value>, ApiError> {
    deployment(
        json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
        "readyReplicas": 0, "availableReplicas": 0}),
    )
}

fn stuck() -> Result<Option<Value>, ApiError> {
    deployment(
        json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                        "message": "ReplicaSet \"web-7d4\" has timed out progressing."}]}),
    )
}

fn canned_with(web: Result<Option<Value>, ApiError>) -> Canned {
    let mut c = Canned::default();
    c.health.insert("Deployment/web".into(), web);
    c
}

/// The release after a first attempt that applied while `web` was rolling out.
fn waiting() -> (opm_core::api::ModuleRelease, Run) {
    let r = run_mr(&operator_cfg(), module_release(), &canned_with(rolling()));
    let mut mr = module_release();
    mr.status = Some(r.status.clone());
    (mr, r)
}

#[test]
fn an_applied_release_waits_for_its_deployment_without_holding_a_worker() {
    let (_, r) = waiting();
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::Applied, "Progressing")
    );
    let msg = "waiting for 1 of 3 resources: Deployment/demo/web (0 of 2 replicas available)";
    assert_eq!(r.cond3("Ready"), c3("Unknown", "Progressing", msg));
    assert_eq!(r.cond3("Healthy"), c3("Unknown", "Progressing", msg));
    assert_eq!(r.cond3("Reconciling"), c3("True", "Progressing", msg));
    assert_eq!(r.requeue, Some(secs(10)));
    // The apply is recorded: the next attempt only re-reads health.
    let s = &r.status;
    assert!(s.inventory.as_ref().is_some_and(|i| i.count == 3));
    assert!(s.last_applied_at.is_some());
    assert!(s.next_retry_at.is_some());
    let h = s.health.as_ref().unwrap();
    assert_eq!((h.total, h.current, h.in_progress), (3, 2, 1));
    assert_eq!(h.objects[0].name, "web");
    // Only the Deployment is read (the ConfigMap is Current once applied; the Service is
    // read because a LoadBalancer one waits for its address).
    match r.find(EffectKind::AssessHealth) {
        Some(Effect::AssessHealth { targets, .. }) => {
            let kinds: Vec<&str> = targets.iter().map(|t| t.id.kind.as_str()).collect();
            assert_eq!(kinds, ["Service", "Deployment"]);
            assert!(targets.iter().all(|t| !t.pods));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        r.events()
            .iter()
            .all(|e| e.reason != "ReconciliationSucceeded")
    );
    assert!(
        r.metrics()
            .contains(&Metric::ReleaseHealthy { healthy: false })
    );
}

#[test]
fn the_next_attempt_after_a_restart_resumes_the_wait_and_ends_ready() {
    let (mr, first) = waiting();
    let start = first.finished_at.checked_add(secs(10)).unwrap();
    let r = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &Canned::default(),
        start,
    );
    assert_eq!((r.outcome, r.reason.as_str()), (Outcome::NoOp, "NoOp"));
    assert!(r.find(EffectKind::Apply).is_none(), "nothing re-applied");
    assert_eq!(r.cond3("Ready").unwrap().0, "True");
    assert_eq!(
        r.cond3("Healthy"),
        c3("True", "Succeeded", "all 3 resources are healthy")
    );
    assert!(r.cond("Reconciling").is_none());
    assert_eq!(r.status.next_retry_at, None);
    let waited = r
        .metrics()
        .into_iter()
        .find_map(|m| match m {
            Metric::HealthWait { duration } => Some(duration),
            _ => None,
        })
        .expect("wait measured");
    assert!(waited >= secs(10), "{waited:?}");
    assert!(
        r.events()
            .iter()
            .any(|e| e.reason == "ReconciliationSucceeded")
    );
}

#[test]
fn still_rolling_on_a_later_attempt_is_progressing() {
    let (mr, first) = waiting();
    let start = first.finished_at.checked_add(secs(40)).unwrap();
    let r = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &canned_with(rolling()),
        start,
    );
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::Progressing, "Progressing")
    );
    assert_eq!(r.cond3("Ready").unwrap().0, "Unknown");
    assert_eq!(r.requeue, Some(secs(40)));
    assert!(r.events().is_empty(), "{:?}", r.events());
}

#[test]
fn a_stuck_rollout_fails_at_once_naming_the_deployment_and_the_pod_reason() {
    let mut canned = canned_with(stuck());
    canned.pods.insert(
        "web".into(),
        vec![json!({"metadata": {"name": "web-7d4-abc"}, "status": {"phase": "Pending",
            "containerStatuses": [{"name": "web", "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image \"nginx:nope\""}}}]}})],
    );
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    let msg = "1 of 3 resources failed: Deployment/demo/web (progress deadline exceeded: ReplicaSet \"web-7d4\" has timed out progressing.; pod web-7d4-abc ImagePullBackOff: Back-off pulling image \"nginx:nope\")";
    assert_transient(&r, "HealthCheckFailed", "Health", msg, 1);
    assert_eq!(r.cond3("Healthy"), c3("False", "HealthCheckFailed", msg));
    // Two reads: every object, then the failed workload with its pods.
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::Render,
            EffectKind::InspectOwners,
            EffectKind::Apply,
            EffectKind::AssessHealth,
            EffectKind::AssessHealth,
            EffectKind::PatchStatus
        ]
    );
    // The objects are applied whatever their health: the next attempt does not re-apply.
    assert!(r.status.last_applied_at.is_some());
    assert!(r.status.inventory.is_some());
}

#[test]
fn not_healthy_within_the_timeout_of_the_apply_fails() {
    let (mut mr, first) = waiting();
    mr.spec.common.timeout = Some("2m".into());
    // The timeout changed nothing that is rendered: the digests still match.
    let start = first.finished_at.checked_add(secs(121)).unwrap();
    let r = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &canned_with(rolling()),
        start,
    );
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::FailedTransient, "HealthCheckFailed")
    );
    let (status, reason, msg) = r.cond3("Ready").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "HealthCheckFailed")
    );
    assert!(
        msg.starts_with(
            "not healthy within 2m0s of the apply: 1 of 3 resources not ready: Deployment/demo/web"
        ),
        "{msg}"
    );
    assert!(
        r.events()
            .iter()
            .any(|e| e.event_type == EventType::Warning && e.reason == "HealthCheckFailed")
    );
}

#[test]
fn a_regression_after_ready_flips_ready_once_and_recovers() {
    let (mr, first) = waiting();
    let later = first.finished_at.checked_add(secs(20)).unwrap();
    let ready = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &Canned::default(),
        later,
    );
    assert_eq!(ready.cond3("Ready").unwrap().0, "True");
    let mut mr = module_release();
    mr.status = Some(ready.status.clone());
    // An hour later a pod dies: the Deployment is no longer available.
    let t = later.checked_add(secs(3600)).unwrap();
    let bad = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr.clone()),
        &canned_with(rolling()),
        t,
    );
    assert_eq!(bad.reason, "HealthCheckFailed");
    assert_eq!(bad.cond3("Healthy").unwrap().0, "False");
    let warnings = bad
        .events()
        .iter()
        .filter(|e| e.event_type == EventType::Warning)
        .count();
    assert_eq!(warnings, 1);
    // The same state again: no second Warning.
    mr.status = Some(bad.status.clone());
    let t2 = t.checked_add(secs(10)).unwrap();
    let again = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr.clone()),
        &canned_with(rolling()),
        t2,
    );
    assert_eq!(again.reason, "HealthCheckFailed");
    assert!(
        again
            .events()
            .iter()
            .all(|e| e.event_type != EventType::Warning)
    );
    // Recovered by itself.
    let t3 = t2.checked_add(secs(10)).unwrap();
    let ok = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &Canned::default(),
        t3,
    );
    assert_eq!(ok.outcome, Outcome::NoOp);
    assert_eq!(ok.cond3("Ready").unwrap().0, "True");
    assert_eq!(ok.cond3("Healthy").unwrap().0, "True");
    assert_eq!(ok.status.failure_counters.reconcile, 0);
}

#[test]
fn a_new_revision_during_a_wait_applies_and_restarts_it() {
    let (mut mr, first) = waiting();
    mr.spec.values = Some(json!({"replicas": 3}));
    mr.metadata.generation = Some(2);
    let start = first.finished_at.checked_add(secs(400)).unwrap();
    let r = run(
        &operator_cfg(),
        ReleaseObject::ModuleRelease(mr),
        &canned_with(rolling()),
        start,
    );
    assert!(r.find(EffectKind::Apply).is_some());
    // 400s after the first apply, but the wait runs from this apply: not a timeout.
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::Applied, "Progressing")
    );
    assert!(
        r.status.last_applied_at.as_ref().unwrap().0
            > first.status.last_applied_at.as_ref().unwrap().0
    );
}

#[test]
fn wait_false_is_ready_when_applied_and_reads_no_health() {
    let mut mr = module_release();
    mr.spec.common.wait = Some(false);
    let r = run_mr(&operator_cfg(), mr, &canned_with(stuck()));
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::Applied, "ReconciliationSucceeded")
    );
    assert!(r.find(EffectKind::AssessHealth).is_none());
    assert!(r.cond("Healthy").is_none());
    assert!(r.status.health.is_none());
}

fn widget() -> Value {
    json!({"widget": {"w": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "gizmo"}}}})
}

fn widget_expr(current: &str) -> HealthCheckExpr {
    HealthCheckExpr {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        current: current.into(),
        in_progress: None,
        failed: Some("status.phase == 'Broken'".into()),
    }
}

#[test]
fn a_custom_resource_is_judged_by_its_cel_expression() {
    let mut mr = module_release();
    mr.spec.common.health_check_exprs = vec![widget_expr("status.phase == 'Running'")];
    let mut canned = Canned::default();
    canned.render.as_mut().unwrap().value = exported(widget());
    let gizmo = |phase: &str| {
        Ok(Some(
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "gizmo", "namespace": "demo"}, "status": {"phase": phase}}),
        ))
    };
    canned.health.insert("gizmo".into(), gizmo("Starting"));
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.reason, "Progressing");
    assert!(
        r.cond3("Ready").unwrap().2.contains("Widget/demo/gizmo"),
        "{:?}",
        r.cond3("Ready")
    );
    canned.health.insert("gizmo".into(), gizmo("Running"));
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.cond3("Ready").unwrap().0, "True");
    canned.health.insert("gizmo".into(), gizmo("Broken"));
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.reason, "HealthCheckFailed");
}

#[test]
fn an_expression_that_does_not_compile_stalls_before_anything_is_applied() {
    let mut mr = module_release();
    mr.spec.common.health_check_exprs = vec![widget_expr("status.phase ==")];
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::FailedStalled, "HealthCheckFailed")
    );
    let (_, _, msg) = r.cond3("Stalled").unwrap();
    assert!(
        msg.starts_with("healthCheckExprs[0] (example.com/v1 Widget) current: "),
        "{msg}"
    );
    assert!(r.find(EffectKind::Apply).is_none());
    assert!(r.find(EffectKind::Render).is_none());
}

#[test]
fn health_checks_entries_are_read_too() {
    let mut mr = module_release();
    mr.spec.common.health_checks = vec![opm_core::api::HealthCheckRef {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "database".into(),
        namespace: String::new(),
    }];
    let mut canned = Canned::default();
    canned.health.insert("database".into(), Ok(None));
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.reason, "Progressing");
    assert!(
        r.cond3("Ready")
            .unwrap()
            .2
            .contains("Deployment/demo/database (not found)"),
        "{:?}",
        r.cond3("Ready")
    );
}

#[test]
fn a_failed_health_read_is_unknown_not_current() {
    let r = run_mr(
        &operator_cfg(),
        module_release(),
        &canned_with(Err(ApiError::Unavailable {
            message: "etcd down".into(),
        })),
    );
    assert_eq!(r.reason, "Progressing");
    let h = r.status.health.as_ref().unwrap();
    assert_eq!(h.unknown, 1);
    assert!(h.objects[0].message.contains("etcd down"));
}

fn check_in(namespace: &str) -> opm_core::api::HealthCheckRef {
    opm_core::api::HealthCheckRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "token".into(),
        namespace: namespace.into(),
    }
}

/// SPEC §26 (issue 31 item 3): a `healthChecks` entry is confined like every reference:
/// another namespace stalls `CrossNamespaceRefDenied` before anything is read or applied,
/// unless `--allow-cross-namespace-refs`; its own namespace (written or not) is fine.
#[test]
fn a_health_check_in_another_namespace_is_refused_unless_allowed() {
    let mut mr = module_release();
    mr.spec.common.health_checks = vec![check_in("demo"), check_in("victim")];
    let r = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str()),
        (Outcome::FailedStalled, "CrossNamespaceRefDenied")
    );
    assert_eq!(
        r.cond3("Stalled").unwrap().2,
        "cross-namespace health check of ConfigMap victim/token is not allowed (--allow-cross-namespace-refs is off)"
    );
    assert!(r.find(EffectKind::AssessHealth).is_none());
    assert!(r.find(EffectKind::Render).is_none());
    assert!(r.find(EffectKind::Apply).is_none());

    let allowed = opm_core::Config {
        allow_cross_namespace_refs: true,
        ..operator_cfg()
    };
    let r = run_mr(&allowed, mr, &Canned::default());
    assert_ne!(r.reason, "CrossNamespaceRefDenied");
    let mut own = module_release();
    own.spec.common.health_checks = vec![check_in("demo"), check_in("")];
    let r = run_mr(&operator_cfg(), own, &Canned::default());
    assert_ne!(r.reason, "CrossNamespaceRefDenied");
}

/// SPEC §24: what a tenant wrote reaches conditions, history and events without control
/// characters: a CUE error quoting a value with an ESC sequence and a carriage return.
#[test]
fn control_characters_never_reach_conditions_history_or_events() {
    let canned = Canned {
        render: Err(opm_core::input::RenderError::Evaluation {
            message: "values.message: conflicting values \"\u{1b}[2J\u{1b}]0;pwned\u{7}\" and int\r\nnext line\tok \u{202e}txt".into(),
        }),
        ..Canned::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_eq!(r.reason, "RenderFailed");
    let mut texts: Vec<String> = r
        .status
        .conditions
        .iter()
        .map(|c| c.message.clone())
        .collect();
    texts.extend(r.status.history.iter().map(|h| h.message.clone()));
    texts.extend(r.events().iter().map(|e| e.note.clone()));
    assert!(texts.iter().any(|t| t.contains("[2J]0;pwned")), "{texts:?}");
    for t in &texts {
        assert!(
            !t.chars()
                .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'),
            "{t:?}"
        );
    }
    assert!(
        texts.iter().any(|t| t.contains("int\nnext line\tok txt")),
        "newlines and tabs stay: {texts:?}"
    );
}
