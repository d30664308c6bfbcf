use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::HealthCheckExpr;

fn judge(v: Value) -> Assessment {
    assess(&v, &HealthRules::default())
}

fn deploy(generation: i64, status: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "demo", "generation": generation},
           "spec": {"replicas": 3}, "status": status})
}

#[test]
fn deployment_rolls_out_then_is_current() {
    let a = judge(deploy(2, json!({})));
    assert_eq!(a.status, HealthStatus::InProgress, "{a:?}");
    let a = judge(deploy(
        2,
        json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
               "readyReplicas": 1, "availableReplicas": 1}),
    ));
    assert_eq!(a.status, HealthStatus::InProgress);
    assert_eq!(a.message, "1 of 3 replicas available");
    let done = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
        "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{"type": "Available", "status": "True"},
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]});
    assert_eq!(judge(deploy(2, done.clone())).status, HealthStatus::Current);
    // The same status for an older generation is not Current.
    let a = judge(deploy(3, done));
    assert_eq!(a.status, HealthStatus::InProgress);
    assert!(a.message.contains("generation 3"), "{}", a.message);
}

#[test]
fn deployment_past_its_progress_deadline_fails() {
    let a = judge(deploy(
        1,
        json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
               "conditions": [{"type": "Progressing", "status": "False",
                 "reason": "ProgressDeadlineExceeded",
                 "message": "ReplicaSet \"web-7d4\" has timed out progressing."}]}),
    ));
    assert_eq!(a.status, HealthStatus::Failed);
    assert!(
        a.message.contains("progress deadline exceeded"),
        "{}",
        a.message
    );
    assert!(a.message.contains("web-7d4"), "{}", a.message);
}

#[test]
fn jobs_complete_or_fail() {
    let job = |conds: Value| {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "generation": 1},
               "status": {"conditions": conds, "active": 1}})
    };
    assert_eq!(
        judge(job(json!([{"type": "Complete", "status": "True"}]))).status,
        HealthStatus::Current
    );
    let a = judge(job(
        json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit"}]),
    ));
    assert_eq!(a.status, HealthStatus::Failed);
    assert!(a.message.contains("BackoffLimitExceeded"));
    assert_eq!(judge(job(json!([]))).status, HealthStatus::InProgress);
}

#[test]
fn pods_pvcs_services_namespaces_crds() {
    let pod = |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": status});
    assert_eq!(
        judge(pod(
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
        ))
        .status,
        HealthStatus::Current
    );
    let crash = pod(json!({"phase": "Running", "containerStatuses": [
        {"name": "c", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}}]}));
    assert_eq!(judge(crash.clone()).status, HealthStatus::Failed);
    assert_eq!(
        pod_detail(&[crash]).as_deref(),
        Some("pod p CrashLoopBackOff: back-off 5m0s")
    );
    let pull = pod(json!({"phase": "Pending", "containerStatuses": [
        {"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "image not found"}}}]}));
    assert_eq!(judge(pull).status, HealthStatus::InProgress);
    assert_eq!(
        judge(pod(json!({"phase": "Failed"}))).status,
        HealthStatus::Failed
    );

    let pvc = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "d"}, "status": {"phase": phase}});
    assert_eq!(judge(pvc("Bound")).status, HealthStatus::Current);
    assert_eq!(judge(pvc("Pending")).status, HealthStatus::InProgress);

    let lb = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer"}, "status": {}});
    assert_eq!(judge(lb).status, HealthStatus::InProgress);
    let lb = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
    assert_eq!(judge(lb).status, HealthStatus::Current);
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}});
    assert_eq!(judge(svc).status, HealthStatus::Current);

    let crd = |c: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "x.example.com", "generation": 1}, "status": {"conditions": c}})
    };
    assert_eq!(
        judge(crd(json!([{"type": "Established", "status": "True"}]))).status,
        HealthStatus::Current
    );
    assert_eq!(judge(crd(json!([]))).status, HealthStatus::InProgress);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": "Terminating"}});
    assert_eq!(judge(ns).status, HealthStatus::InProgress);
}

#[test]
fn statefulsets_and_daemonsets() {
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": 1},
        "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
        "updatedReplicas": 2, "currentRevision": "a", "updateRevision": "b"}});
    assert_eq!(judge(sts).status, HealthStatus::InProgress);
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": 1},
        "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "replicas": 2, "readyReplicas": 2,
        "updatedReplicas": 2, "currentRevision": "b", "updateRevision": "b"}});
    assert_eq!(judge(sts).status, HealthStatus::Current);
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d", "generation": 1},
        "status": {"observedGeneration": 1, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
        "updatedNumberScheduled": 3, "numberAvailable": 2, "numberReady": 3}});
    let a = judge(ds);
    assert_eq!(
        (a.status, a.message.as_str()),
        (HealthStatus::InProgress, "2 of 3 pods available")
    );
}

#[test]
fn generic_conditions_and_plain_objects() {
    let cr = |conds: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "generation": 1}, "status": {"observedGeneration": 1, "conditions": conds}})
    };
    assert_eq!(
        judge(cr(json!([{"type": "Ready", "status": "True"}]))).status,
        HealthStatus::Current
    );
    assert_eq!(
        judge(cr(json!([{"type": "Ready", "status": "False"}]))).status,
        HealthStatus::InProgress
    );
    let a = judge(cr(
        json!([{"type": "Ready", "status": "False"}, {"type": "Stalled", "status": "True", "reason": "Broken"}]),
    ));
    assert_eq!(a.status, HealthStatus::Failed);
    assert!(a.message.contains("Broken"));
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(judge(cm).status, HealthStatus::Current);
    assert!(!needs_assessment("", "ConfigMap"));
    assert!(!needs_assessment("rbac.authorization.k8s.io", "Role"));
    assert!(needs_assessment("apps", "Deployment"));
    assert!(needs_assessment("example.com", "Widget"));
}

#[test]
fn ill_typed_fields_are_unknown() {
    let a = judge(deploy(1, json!({"observedGeneration": "one"})));
    assert_eq!(a.status, HealthStatus::Unknown);
    assert!(
        a.message.contains("status.observedGeneration"),
        "{}",
        a.message
    );
    let a = judge(deploy(
        1,
        json!({"observedGeneration": 1, "availableReplicas": [3]}),
    ));
    assert_eq!(a.status, HealthStatus::Unknown);
    assert_eq!(judge(json!("a string")).status, HealthStatus::Unknown);
}

fn widget_exprs() -> Vec<HealthCheckExpr> {
    vec![HealthCheckExpr {
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        current: "status.phase == 'Running'".into(),
        in_progress: Some("status.phase == 'Starting'".into()),
        failed: Some("status.phase == 'Broken'".into()),
    }]
}

#[test]
fn cel_expressions_decide_their_kind_in_spec_order() {
    let rules = compile(&widget_exprs()).expect("compiles");
    let w = |status: Value| {
        json!({"apiVersion": "example.com/v2", "kind": "Widget",
        "metadata": {"name": "w"}, "status": status})
    };
    let judge = |v: Value| assess(&v, &rules);
    assert_eq!(
        judge(w(json!({"phase": "Running"}))).status,
        HealthStatus::Current
    );
    assert_eq!(
        judge(w(json!({"phase": "Broken"}))).status,
        HealthStatus::Failed
    );
    assert_eq!(
        judge(w(json!({"phase": "Starting"}))).status,
        HealthStatus::InProgress
    );
    // No status yet: every expression errors, the verdict waits and says why.
    let a =
        judge(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}));
    assert_eq!(a.status, HealthStatus::InProgress);
    assert!(a.message.contains("current"), "{}", a.message);
    // A CEL rule overrides the generic conditions, but not the generation guard.
    let a = judge(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "generation": 2},
        "status": {"observedGeneration": 1, "phase": "Running"}}));
    assert_eq!(a.status, HealthStatus::InProgress);
    // Another kind is not affected.
    let other = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    assert_eq!(judge(other).status, HealthStatus::InProgress);
    // `self` names the whole object.
    let rules = compile(&[HealthCheckExpr {
        current: "self.metadata.name == 'w'".into(),
        ..widget_exprs()[0].clone()
    }])
    .unwrap();
    assert_eq!(assess(&w(json!({})), &rules).status, HealthStatus::Current);
}

#[test]
fn an_expression_that_does_not_compile_is_named() {
    let mut e = widget_exprs();
    e.push(HealthCheckExpr {
        api_version: "example.com/v1".into(),
        kind: "Gadget".into(),
        current: "status.phase == 'Running'".into(),
        in_progress: None,
        failed: Some("status.phase ==".into()),
    });
    let err = compile(&e).unwrap_err();
    assert_eq!(
        (err.index, err.field, err.kind.as_str()),
        (1, "failed", "Gadget")
    );
    let text = err.to_string();
    assert!(
        text.starts_with("healthCheckExprs[1] (example.com/v1 Gadget) failed: "),
        "{text}"
    );
    e[1].failed = Some(String::new());
    assert!(compile(&e).is_err());
}

#[test]
fn a_non_bool_result_is_not_current() {
    let rules = compile(&[HealthCheckExpr {
        current: "status.phase".into(),
        ..widget_exprs()[0].clone()
    }])
    .unwrap();
    let a = assess(
        &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "status": {"phase": "Running"}}),
        &rules,
    );
    assert_eq!(a.status, HealthStatus::InProgress);
    assert!(a.message.contains("not a bool"), "{}", a.message);
}

// ---- properties ----

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[A-Za-z]{0,8}".prop_map(Value::from),
        prop_oneof![
            Just("True"),
            Just("False"),
            Just("Unknown"),
            Just("Running"),
            Just("Ready"),
            Just("Available"),
            Just("Progressing"),
            Just("ProgressDeadlineExceeded"),
            Just("Complete"),
            Just("Failed"),
            Just("Stalled"),
            Just("Bound"),
            Just("LoadBalancer")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("type".to_string()),
                    Just("status".to_string()),
                    Just("reason".to_string()),
                    Just("replicas".to_string()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Service"),
    ("v1", "Namespace"),
    ("policy/v1", "PodDisruptionBudget"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("example.com/v1", "Widget"),
];

fn arb_count() -> impl Strategy<Value = Value> {
    prop_oneof![4 => (0i64..5).prop_map(Value::from), 1 => arb_json()]
}

fn arb_conditions() -> impl Strategy<Value = Value> {
    let cond = (
        prop_oneof![
            Just("Ready"),
            Just("Available"),
            Just("Progressing"),
            Just("Complete"),
            Just("Failed"),
            Just("Stalled"),
            Just("Reconciling"),
            Just("Established"),
            Just("PodScheduled"),
            Just("ReplicaFailure")
        ],
        prop_oneof![Just("True"), Just("False"), Just("Unknown")],
        prop_oneof![
            Just(""),
            Just("ProgressDeadlineExceeded"),
            Just("NewReplicaSetAvailable")
        ],
    )
        .prop_map(|(t, s, r)| json!({"type": t, "status": s, "reason": r}));
    prop_oneof![
        4 => prop::collection::vec(cond, 0..5).prop_map(Value::from),
        1 => arb_json(),
    ]
}

fn arb_object() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(KINDS),
        0i64..4,
        0i64..4,
        prop::collection::vec(
            (
                prop::sample::select(
                    &[
                        "replicas",
                        "updatedReplicas",
                        "readyReplicas",
                        "availableReplicas",
                        "fullyLabeledReplicas",
                        "desiredNumberScheduled",
                        "currentNumberScheduled",
                        "updatedNumberScheduled",
                        "numberAvailable",
                        "numberReady",
                        "active",
                        "succeeded",
                        "currentHealthy",
                        "desiredHealthy",
                    ][..],
                ),
                arb_count(),
            ),
            0..8,
        ),
        arb_conditions(),
        arb_json(),
        prop::option::of(arb_count()),
    )
        .prop_map(
            |((api, kind), generation, observed, counts, conds, extra, spec_replicas)| {
                let mut status = serde_json::Map::new();
                status.insert("observedGeneration".into(), observed.into());
                for (k, v) in counts {
                    status.insert(k.into(), v);
                }
                status.insert("conditions".into(), conds);
                status.insert("phase".into(), extra.clone());
                let mut spec = serde_json::Map::new();
                if let Some(r) = spec_replicas {
                    spec.insert("replicas".into(), r);
                }
                json!({"apiVersion": api, "kind": kind,
                   "metadata": {"name": "x", "generation": generation},
                   "spec": spec, "status": status})
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_current_while_the_generation_is_unobserved(obj in arb_object()) {
        let g = obj["metadata"]["generation"].as_i64().unwrap();
        let o = obj["status"]["observedGeneration"].as_i64().unwrap();
        let rules = compile(&widget_exprs()).unwrap();
        for r in [&HealthRules::default(), &rules] {
            let a = assess(&obj, r);
            if o < g {
                prop_assert_ne!(a.status, HealthStatus::Current, "{:?} for {}", a, obj);
            }
            prop_assert!(!a.message.is_empty());
        }
    }

    #[test]
    fn any_json_is_judged_without_a_panic(obj in arb_json(), k in prop::sample::select(KINDS)) {
        let mut obj = obj;
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), k.0.into());
            m.insert("kind".into(), k.1.into());
        }
        let rules = compile(&widget_exprs()).unwrap();
        let _ = assess(&obj, &rules);
        let _ = assess(&obj, &HealthRules::default());
        let _ = pod_detail(std::slice::from_ref(&obj));
    }

    #[test]
    fn any_expression_source_compiles_or_errs_without_a_panic(src in "[ -~]{0,40}") {
        let e = HealthCheckExpr { current: src, ..widget_exprs()[0].clone() };
        if let Ok(rules) = compile(&[e]) {
            let _ = assess(&json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"}, "status": {"phase": "Running"}}), &rules);
        }
    }
}

#[test]
fn what_the_evaluator_does_not_implement_is_refused_when_compiled() {
    for (src, why) in [
        (
            "timestamp(status.at) > timestamp('2020-01-01T00:00:00Z')",
            "function timestamp is not supported",
        ),
        (
            "status.items.all(k, v, v > 0)",
            "function all is not supported",
        ),
        (
            "status.phase.matches('(')",
            "not a valid regular expression",
        ),
        (
            "[[[[[[[[[1]]]]]]]]] == status.items",
            "brackets nest 9 deep; the limit is 8",
        ),
        (
            "size(size(size(size(size(size(size(size(size(1))))))))) > 0",
            "brackets nest 9 deep",
        ),
    ] {
        let e = HealthCheckExpr {
            current: src.into(),
            ..widget_exprs()[0].clone()
        };
        let err = compile(&[e]).unwrap_err();
        assert!(err.message.contains(why), "{src}: {err}");
    }
}

#[test]
fn brackets_inside_string_literals_do_not_count_as_nesting() {
    let e = HealthCheckExpr {
        current: "status.phase != '((((((((((' && status.phase != \"[[[[[[[[[[\" \
                  && status.phase != r'\\((((((((((' && status.phase != '''{{{{{{{{{{'''"
            .into(),
        ..widget_exprs()[0].clone()
    };
    let rules = compile(&[e]).expect("compiles");
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "status": {"phase": "Running"}});
    assert_eq!(assess(&w, &rules).status, HealthStatus::Current);
}

#[test]
fn loops_nest_as_deep_as_written_and_the_budget_stops_them_while_they_run() {
    let rules = compile(&[HealthCheckExpr {
        current: "status.items.all(w, status.items.all(x, status.items.all(y, \
                  status.items.all(z, w + x + y + z >= 0))))"
            .into(),
        ..widget_exprs()[0].clone()
    }])
    .unwrap();
    let widget = |n: usize| {
        let items: Vec<u64> = (0..n as u64).collect();
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "status": {"items": items}})
    };
    // Small: evaluated, and true.
    assert_eq!(assess(&widget(5), &rules).status, HealthStatus::Current);
    // 100 items nested four deep: 10⁸ iterations, stopped at the first million steps.
    let a = assess(&widget(100), &rules);
    assert_eq!(a.status, HealthStatus::Failed);
    assert!(
        a.message
            .starts_with("health expression of Widget stopped after 100000")
            && a.message.contains(
                " steps / 0 bytes (current: the budget of one evaluation \
                is 1000000 steps and 8388608 bytes"
            ),
        "{}",
        a.message
    );
}

#[test]
fn the_interpreters_deadline_stops_an_evaluation_and_names_the_time() {
    let deadline = EvalDeadline::new(std::time::Duration::from_millis(1500));
    let rules = compile(&widget_exprs())
        .unwrap()
        .with_deadline(deadline.clone());
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "status": {"phase": "Running"}});
    assert_eq!(assess(&w, &rules).status, HealthStatus::Current);
    deadline.expire();
    let a = assess(&w, &rules);
    assert_eq!(a.status, HealthStatus::Failed);
    assert_eq!(
        a.message,
        "health expression of Widget stopped after 1 steps / 0 bytes (failed: this \
         attempt's expressions ran over 1.5s (--health-eval-timeout))"
    );
}

/// A deadline that stopped an evaluation is recorded as the attempt's step total, and a
/// replay given that total stops the same evaluations at the same place with the same
/// verdict, though no flag is ever raised (SPEC §23: traces replay byte for byte).
#[test]
fn a_deadline_replays_from_the_step_total_it_stopped_at() {
    let exprs = [HealthCheckExpr {
        current: "status.items.all(i, i >= 0)".into(),
        ..widget_exprs()[0].clone()
    }];
    let items: Vec<u64> = (0..5_000).collect();
    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "status": {"items": items}});
    // Live: two objects judged, then the flag rises; the third stops at its first step.
    let live = EvalDeadline::new(std::time::Duration::from_millis(7));
    let rules = compile(&exprs).unwrap().with_deadline(live.clone());
    assert_eq!(assess(&w, &rules).status, HealthStatus::Current);
    assert_eq!(assess(&w, &rules).status, HealthStatus::Current);
    assert_eq!(live.stopped_at(), None);
    live.expire();
    let cut = assess(&w, &rules);
    let at = live
        .stopped_at()
        .expect("the deadline stopped an evaluation");
    let later = assess(&w, &rules);
    // Replay: no flag, the recorded total.
    let replayed = EvalDeadline::new(std::time::Duration::from_millis(7));
    replayed.replay_stop_at(at);
    let rules = compile(&exprs).unwrap().with_deadline(replayed.clone());
    assert_eq!(assess(&w, &rules).status, HealthStatus::Current);
    assert_eq!(assess(&w, &rules).status, HealthStatus::Current);
    assert_eq!(assess(&w, &rules), cut);
    assert_eq!(assess(&w, &rules), later);
    assert_eq!(replayed.stopped_at(), Some(at));
    assert!(
        cut.message.contains("ran over 7ms (--health-eval-timeout)"),
        "{}",
        cut.message
    );
    // Stopped mid-evaluation: a replay cut inside the third object's walk.
    let mid = EvalDeadline::new(std::time::Duration::from_millis(7));
    mid.replay_stop_at(at + 100);
    let rules = compile(&exprs).unwrap().with_deadline(mid.clone());
    for _ in 0..2 {
        assess(&w, &rules);
    }
    let a = assess(&w, &rules);
    assert_eq!(a.status, HealthStatus::Failed);
    // Past the first steps, inside the walk (the `failed` expression ran first).
    assert!(
        !a.message.contains("stopped after 1 steps"),
        "{}",
        a.message
    );
    assert!(a.message.contains("ran over 7ms"), "{}", a.message);
    assert_eq!(mid.stopped_at(), Some(at + 100));
}

#[test]
fn the_budget_counts_what_an_evaluation_builds() {
    let rules = compile(&[HealthCheckExpr {
        current: "size(status.items.map(a, status.items.map(b, [a, b, a, b, a, b]))) > 0".into(),
        ..widget_exprs()[0].clone()
    }])
    .unwrap();
    let w = |n: usize| {
        let items: Vec<u64> = (0..n as u64).collect();
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "status": {"items": items}})
    };
    // 100 lists of 6: judged.
    assert_eq!(assess(&w(10), &rules).status, HealthStatus::Current);
    // A million lists of 6 would be hundreds of MiB, in far fewer steps than the budget's:
    // stopped at 8 MiB.
    let a = assess(&w(1000), &rules);
    assert_eq!(a.status, HealthStatus::Failed, "{}", a.message);
    let bytes: u64 = a
        .message
        .split(" steps / ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|b| b.parse().ok())
        .expect("bytes in the message");
    assert!(
        (8 * 1024 * 1024..9 * 1024 * 1024).contains(&bytes),
        "{}",
        a.message
    );
}
