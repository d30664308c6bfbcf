//! SPEC §26 on a cluster where workloads really roll out: the real kube-controller-manager
//! and kube-scheduler, and kwok's fake nodes ([`opm_testenv::workloads::Workloads`]).
//!
//! A pod that fits no node (a `nodeSelector` no fake node has) stays Pending: that is how
//! these tests make a rollout stick, with the scheduler's own `Unschedulable` reason.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use opm_core::api::Release;
use opm_testenv::workloads::Workloads;
use serde_json::{Value, json};

use crate::harness::*;

fn deployment(name: &str, replicas: i64, extra_pod_spec: Value, extra_spec: Value) -> Value {
    let mut pod = json!({"containers": [{"name": "app", "image": "registry.invalid/app:1"}]});
    if let (Some(p), Value::Object(e)) = (pod.as_object_mut(), extra_pod_spec) {
        p.extend(e);
    }
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
    });
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra_spec) {
        s.extend(e);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec})
}

fn job(name: &str, extra_pod_spec: Value, extra_spec: Value) -> Value {
    let mut pod = json!({"restartPolicy": "Never",
        "containers": [{"name": "job", "image": "registry.invalid/job:1"}]});
    if let (Some(p), Value::Object(e)) = (pod.as_object_mut(), extra_pod_spec) {
        p.extend(e);
    }
    let mut spec = json!({"backoffLimit": 0, "template": {"spec": pod}});
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra_spec) {
        s.extend(e);
    }
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec})
}

fn ready_msg(o: &Release) -> String {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_completes_and_ready_comes_only_after_the_pods_are_ready() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "roll",
        json!({"app": {"d": deployment("roll", 3, json!({}), json!({}))}}),
        json!({}),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "roll", "Ready", is_ready_rel).await;
    let s = got.status.unwrap();
    assert_eq!(
        condition(&s, "Healthy").map(|c| c.status.as_str()),
        Some("True")
    );
    // Ready was decided from a status the controllers wrote: every replica is available.
    let d = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
        .get("roll")
        .await
        .unwrap();
    let st = d.status.unwrap();
    assert_eq!(st.available_replicas, Some(3), "{st:?}");
    assert_eq!(st.ready_replicas, Some(3));
    let h = s.health.expect("status.health");
    assert_eq!(h.total, h.current);
    // The first attempt applied and waited; its history entry says so.
    assert!(
        s.history.iter().any(|e| e.phase == "progressing") || h.total > 0,
        "{:?}",
        s.history
    );
    let m = op.rt.metrics.render();
    assert!(m.contains("opm_controller_release_healthy{"), "{m}");
    assert!(
        m.contains("opm_controller_health_wait_seconds_count{"),
        "{m}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_fails_fast_naming_the_deployment_and_the_pod_reason() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "stuck",
        json!({"app": {"d": deployment("stuck", 1,
            json!({"nodeSelector": {"opm-test/no-such-node": "true"}}),
            json!({"progressDeadlineSeconds": 5}))}}),
        // Far longer than the deadline: the failure must not wait for it.
        json!({"timeout": "10m"}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "stuck",
        "HealthCheckFailed",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    let want = format!("Deployment/{}/stuck (progress deadline exceeded", ns.name);
    assert!(msg.contains(&want), "{msg}");
    assert!(msg.contains("Unschedulable"), "the pod's reason: {msg}");
    let s = got.status.unwrap();
    assert_eq!(
        condition(&s, "Healthy").map(|c| c.status.as_str()),
        Some("False")
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_healthy_within_the_timeout_fails() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "slow",
        json!({"app": {"d": deployment("slow", 1,
            json!({"nodeSelector": {"opm-test/no-such-node": "true"}}), json!({}))}}),
        json!({"timeout": "12s"}),
    )
    .await;
    let waiting = wait_rel(
        &ns.client,
        &ns.name,
        "slow",
        "Progressing",
        reason_is_rel("Progressing"),
    )
    .await;
    assert!(
        ready_msg(&waiting).starts_with("waiting for 1 of 1 resources"),
        "{}",
        ready_msg(&waiting)
    );
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "slow",
        "timeout",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    assert!(
        msg.starts_with("not healthy within 12s of the apply"),
        "{msg}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_complete_or_fail() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "done",
        json!({"batch": {"j": job("done", json!({}), json!({}))}}),
        json!({}),
    )
    .await;
    release_of(
        &ns,
        &pkg,
        "doomed",
        json!({"batch": {"j": job("doomed",
            json!({"nodeSelector": {"opm-test/no-such-node": "true"}}),
            json!({"activeDeadlineSeconds": 3}))}}),
        json!({}),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "done", "Ready", is_ready_rel).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "doomed",
        "HealthCheckFailed",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    assert!(
        msg.contains(&format!("Job/{}/doomed (job failed", ns.name)),
        "{msg}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_false_is_ready_while_the_rollout_is_stuck() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "nowait",
        json!({"app": {"d": deployment("nowait", 1,
            json!({"nodeSelector": {"opm-test/no-such-node": "true"}}), json!({}))}}),
        json!({"wait": false}),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "nowait", "Ready", is_ready_rel).await;
    let s = got.status.unwrap();
    assert!(condition(&s, "Healthy").is_none());
    assert!(s.health.is_none());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regression_after_ready_flips_ready_and_recovers_by_itself() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "regress",
        json!({"app": {"d": deployment("regress", 1, json!({}), json!({}))}}),
        json!({"timeout": "10s"}),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "regress", "Ready", is_ready_rel).await;
    // Someone else pins the pods to a node that does not exist: a new rollout that never
    // completes (drift is only reported in Warn mode, so the operator leaves it).
    let deps = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    let pin = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "regress"},
        "spec": {"template": {"spec": {"nodeSelector": {"opm-test/no-such-node": "true"}}}}});
    deps.patch(
        "regress",
        &PatchParams::apply("someone-else"),
        &Patch::Apply(&pin),
    )
    .await
    .unwrap();
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "regress",
        "HealthCheckFailed",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let s = got.status.unwrap();
    assert_eq!(
        condition(&s, "Healthy").map(|c| c.status.as_str()),
        Some("False")
    );
    // They take it back: the release recovers without any change to it.
    let unpin =
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "regress"}});
    deps.patch(
        "regress",
        &PatchParams::apply("someone-else"),
        &Patch::Apply(&unpin),
    )
    .await
    .unwrap();
    wait_rel(&ns.client, &ns.name, "regress", "Ready again", is_ready_rel).await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expression_that_does_not_compile_stalls_at_once() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "badcel",
        json!({"c": {"cm": configmap("badcel", json!({"k": "v"}))}}),
        json!({"healthCheckExprs": [{"apiVersion": "example.com/v1", "kind": "Widget",
            "current": "status.phase =="}]}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "badcel",
        "stall",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let s = got.status.unwrap();
    let stalled = condition(&s, "Stalled").expect("Stalled");
    assert_eq!(stalled.status, "True");
    assert!(
        stalled
            .message
            .starts_with("healthCheckExprs[0] (example.com/v1 Widget) current: "),
        "{}",
        stalled.message
    );
    op.stop().await;
}

/// A tenant's CEL that walks a big object in nested loops is stopped at its budget of
/// steps (SPEC §24): the object fails at once, naming the budget, and stays applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expression_too_costly_for_its_object_is_stopped_at_its_budget() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let data: serde_json::Map<String, Value> = (0..20_000)
        .map(|i| (format!("k{i:05}"), json!("v")))
        .collect();
    release_of(
        &ns,
        &pkg,
        "costly",
        json!({"c": {"cm": configmap("costly", Value::Object(data))}}),
        json!({"timeout": "10m", "healthCheckExprs": [{"apiVersion": "v1", "kind": "ConfigMap",
            "current": "data.all(k, data.exists(j, k == j))"}]}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "costly",
        "HealthCheckFailed",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    assert!(
        msg.contains("health expression of ConfigMap stopped after 100000")
            && msg.contains("the budget of one evaluation is 1000000 steps and 8388608 bytes"),
        "{msg}"
    );
    // Failed at once, not at the ten-minute timeout.
    let s = got.status.unwrap();
    let applied = s.last_applied_at.clone().expect("applied").0;
    let failed = condition(&s, "Ready")
        .expect("Ready")
        .last_transition_time
        .clone()
        .expect("time")
        .0;
    assert!(
        failed.duration_since(applied).as_secs_f64() < 60.0,
        "failed {failed} after the apply at {applied}"
    );
    // Nothing lost: the object is there.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(ns.client.clone(), &ns.name);
    assert_eq!(cms.get("costly").await.unwrap().data.unwrap().len(), 20_000);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_judged_by_cel_gates_ready_and_its_dependents() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    // The CRD is the cluster's (installed by the test), with a status subresource that only
    // "its controller" (this test) writes.
    let group = format!("{}.health.opmodel.dev", ns.name);
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
        .unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(ns.client.clone());
    crds.create(&Default::default(), &crd).await.unwrap();
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Gadget"),
        "gadgets",
    );
    let gadgets =
        Api::<kube::api::DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &ar);
    eventually("the Gadget kind is served", || async {
        gadgets.list(&Default::default()).await.is_ok()
    })
    .await;
    let cr = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 1}});
    release_of(
        &ns,
        &pkg,
        "gadget",
        json!({"app": {"g": cr}}),
        json!({"healthCheckExprs": [{"apiVersion": format!("{group}/v1"), "kind": "Gadget",
            "current": "status.phase == 'Running'", "failed": "status.phase == 'Broken'"}]}),
    )
    .await;
    // A dependent: Ready only once the gadget release is, so once the gadget is healthy.
    let src = "dependent-src";
    pkg.publish(
        &ns.client,
        &ns.name,
        src,
        &release_package(
            "dependent",
            &json!({"c": {"cm": configmap("dependent", json!({"k": "v"}))}}),
        ),
    )
    .await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "dependent",
            src,
            ".",
            json!({"dependsOn": [{"name": "gadget"}]}),
        ),
    )
    .await;
    let waiting = wait_rel(
        &ns.client,
        &ns.name,
        "gadget",
        "Progressing",
        reason_is_rel("Progressing"),
    )
    .await;
    let msg = ready_msg(&waiting);
    assert!(
        msg.contains(&format!(
            "Gadget/{}/g1 (healthCheckExprs: current is not true yet",
            ns.name
        )),
        "{msg}"
    );
    wait_rel(
        &ns.client,
        &ns.name,
        "dependent",
        "DependenciesNotReady",
        reason_is_rel("DependenciesNotReady"),
    )
    .await;

    // "Its controller" reports it running: the status change moves its resourceVersion, the
    // managed-object watch re-triggers the release at once (the wait's own re-check is 10s
    // or more away), and the dependent follows.
    let patched = std::time::Instant::now();
    gadgets
        .patch_status(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    let got = wait_rel(&ns.client, &ns.name, "gadget", "Ready", is_ready_rel).await;
    let took = patched.elapsed();
    assert!(
        took < std::time::Duration::from_secs(8),
        "Ready {took:?} after the status change"
    );
    let s = got.status.unwrap();
    assert_eq!(
        condition(&s, "Healthy").map(|c| c.status.as_str()),
        Some("True")
    );
    wait_rel(&ns.client, &ns.name, "dependent", "Ready", is_ready_rel).await;

    // Broken: Failed ends in HealthCheckFailed at once.
    gadgets
        .patch_status(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Broken"}})),
        )
        .await
        .unwrap();
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "gadget",
        "HealthCheckFailed",
        reason_is_rel("HealthCheckFailed"),
    )
    .await;
    assert!(
        ready_msg(&got).contains("healthCheckExprs: failed is true"),
        "{}",
        ready_msg(&got)
    );
    op.stop().await;
    crds.delete(&format!("gadgets.{group}"), &Default::default())
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sigkilled_mid_wait_is_replaced_by_one_that_resumes_the_wait_from_status() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    // The built binary in its own process, so the kill is a real SIGKILL.
    let op = OperatorProcess::spawn(env, &ns.name).await;
    let pkg = Package::start().await;
    // Schedulable only on a node carrying this label, which no node has yet.
    let label = format!("opm-test/{}", ns.name);
    release_of(
        &ns,
        &pkg,
        "resume",
        json!({"app": {"d": deployment("resume", 1,
            json!({"nodeSelector": {label.clone(): "yes"}}), json!({}))}}),
        json!({"timeout": "5m"}),
    )
    .await;
    let waiting = wait_rel(
        &ns.client,
        &ns.name,
        "resume",
        "Progressing",
        reason_is_rel("Progressing"),
    )
    .await;
    let before = waiting.status.unwrap();
    // SIGKILLed: nothing finishes, nothing is written on the way out.
    op.sigkill().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    // The pods can now be placed: the new operator's wait ends Ready.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ns.client.clone());
    let add = json!({"metadata": {"labels": {label.clone(): "yes"}}});
    nodes
        .patch("kwok-node-0", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .unwrap();
    let got = wait_rel(&ns.client, &ns.name, "resume", "Ready", is_ready_rel).await;
    let s = got.status.unwrap();
    // Resumed, not restarted: the same apply (time, inventory revision), no second apply.
    assert_eq!(s.last_applied_at, before.last_applied_at);
    assert_eq!(
        s.inventory.as_ref().map(|i| i.revision),
        before.inventory.as_ref().map(|i| i.revision)
    );
    assert_eq!(
        condition(&s, "Healthy").map(|c| c.status.as_str()),
        Some("True")
    );
    op.stop().await;
    let remove = json!({"metadata": {"labels": {label: null}}});
    nodes
        .patch(
            "kwok-node-0",
            &PatchParams::default(),
            &Patch::Merge(&remove),
        )
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_revision_during_a_wait_pre_empts_it() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of(
        &ns,
        &pkg,
        "revise",
        json!({"app": {"d": deployment("revise", 1,
            json!({"nodeSelector": {"opm-test/no-such-node": "true"}}), json!({}))}}),
        json!({"timeout": "5m"}),
    )
    .await;
    let waiting = wait_rel(
        &ns.client,
        &ns.name,
        "revise",
        "Progressing",
        reason_is_rel("Progressing"),
    )
    .await;
    let first = waiting.status.unwrap().last_applied_at;
    // Revision 2 drops the impossible nodeSelector: applied at once, and that wait ends Ready.
    pkg.publish(
        &ns.client,
        &ns.name,
        "revise-src",
        &release_package(
            "revise",
            &json!({"app": {"d": deployment("revise", 1, json!({}), json!({}))}}),
        ),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "revise", "Ready", is_ready_rel).await;
    let s = got.status.unwrap();
    // `lastAppliedAt` has one-second precision: the second apply may share the first's
    // second, so the revision is what proves revision 2 was applied during the wait.
    assert!(
        s.last_applied_at >= first,
        "{:?} vs {first:?}",
        s.last_applied_at
    );
    assert_eq!(s.inventory.map(|i| i.revision), Some(2));
    op.stop().await;
}
