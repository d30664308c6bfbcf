//! SPEC §32 hooks on a cluster where Jobs really run: the real kube-controller-manager and
//! kube-scheduler, and kwok's fake nodes ([`opm_testenv::workloads::Workloads`]).
//!
//! A pod that fits no node stays Pending; a node label added later lets it run. That is
//! how these tests hold a hook (or a workload) back long enough to see what the operator
//! does meanwhile, then let it finish.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use opm_core::api::Release;
use opm_testenv::workloads::Workloads;
use serde_json::{Value, json};

use crate::harness::*;

const HOOK: &str = "releases.opmodel.dev/hook";

fn job(name: &str, hook: &str, pod_extra: Value, spec_extra: Value) -> Value {
    let mut pod = json!({"restartPolicy": "Never",
        "containers": [{"name": "job", "image": "registry.invalid/job:1"}]});
    if let (Some(p), Value::Object(e)) = (pod.as_object_mut(), pod_extra) {
        p.extend(e);
    }
    let mut spec = json!({"backoffLimit": 0, "template": {"spec": pod}});
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), spec_extra) {
        s.extend(e);
    }
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": {HOOK: hook}}, "spec": spec})
}

fn deployment(name: &str, pod_extra: Value) -> Value {
    let mut pod = json!({"containers": [{"name": "app", "image": "registry.invalid/app:1"}]});
    if let (Some(p), Value::Object(e)) = (pod.as_object_mut(), pod_extra) {
        p.extend(e);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod}}})
}

/// Hooks run beside prune (a `pre-delete` hook before it): every release here prunes.
async fn release_of_pruned(
    ns: &opm_testenv::TestNamespace,
    pkg: &Package,
    name: &str,
    components: Value,
    mut spec: Value,
) {
    spec["prune"] = json!(true);
    release_of(ns, pkg, name, components, spec).await;
}

fn ready_msg(o: &Release) -> String {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// A node label no node has yet, unique to this test's namespace.
fn gate(ns: &str) -> String {
    format!("opm-test/hook-{ns}")
}

async fn open_gate(client: &kube::Client, label: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let add = json!({"metadata": {"labels": {label: "yes"}}});
    nodes
        .patch("kwok-node-0", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .unwrap();
}

async fn close_gate(client: &kube::Client, label: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
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

fn created(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> jiff::Timestamp {
    meta.creation_timestamp.as_ref().expect("created").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_apply_job_completes_before_the_deployment_is_created() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let label = gate(&ns.name);
    release_of_pruned(
        &ns,
        &pkg,
        "pre",
        json!({
            "db": {"migrate": job("migrate", "pre-apply",
                json!({"nodeSelector": {label.clone(): "yes"}}), json!({}))},
            "app": {"web": deployment("web", json!({}))}
        }),
        json!({"timeout": "5m"}),
    )
    .await;
    // The hook runs (its pod cannot be placed yet): the release waits for it, and nothing
    // else of the release exists.
    let waiting = wait_rel(&ns.client, &ns.name, "pre", "waiting for the hook", |o| {
        ready_msg(o).contains("pre-apply hook")
    })
    .await;
    assert!(
        ready_msg(&waiting).contains(&format!("Job/{}/migrate", ns.name)),
        "{}",
        ready_msg(&waiting)
    );
    let jobs = Api::<Job>::namespaced(ns.client.clone(), &ns.name);
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    let migrate = jobs.get("migrate").await.expect("the hook Job is created");
    assert!(
        migrate.metadata.annotations.as_ref().unwrap()["releases.opmodel.dev/hook-render-digest"]
            .starts_with("sha256:")
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        deployments.get_opt("web").await.unwrap().is_none(),
        "the Deployment must not exist while the pre-apply Job runs"
    );
    // The Job can run now: it completes, then the rest is applied.
    open_gate(&ns.client, &label).await;
    let got = wait_rel(&ns.client, &ns.name, "pre", "Ready", is_ready_rel).await;
    let migrate = jobs.get("migrate").await.unwrap();
    let done = migrate
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .expect("the hook Job completed")
        .0;
    let web = deployments
        .get("web")
        .await
        .expect("the Deployment is applied");
    assert!(
        created(&web.metadata) >= done,
        "Deployment created at {} before the Job completed at {done}",
        created(&web.metadata)
    );
    // The hook is in the inventory like any object.
    let inv = got.status.unwrap().inventory.unwrap();
    assert!(
        inv.entries
            .iter()
            .any(|e| e.kind == "Job" && e.name == "migrate")
    );
    op.stop().await;
    close_gate(&ns.client, &label).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pre_apply_job_is_hook_failed_and_nothing_else_is_applied() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    release_of_pruned(
        &ns,
        &pkg,
        "failing",
        json!({
            "db": {"migrate": job("doomed", "pre-apply",
                json!({"nodeSelector": {"opm-test/no-such-node": "true"}}),
                json!({"activeDeadlineSeconds": 3}))},
            "app": {"web": deployment("web", json!({})),
                    "cm": configmap("settings", json!({"a": "1"}))}
        }),
        json!({"timeout": "5m"}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "failing",
        "HookFailed",
        reason_is_rel("HookFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    assert!(
        msg.starts_with(&format!(
            "pre-apply hook failed: Job/{}/doomed (job failed",
            ns.name
        )),
        "{msg}"
    );
    let s = got.status.unwrap();
    assert!(s.next_retry_at.is_some(), "transient: retried with backoff");
    assert!(condition(&s, "Stalled").is_none());
    assert!(
        Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
            .get_opt("settings")
            .await
            .unwrap()
            .is_none()
    );
    let evs = events_with(&ns.client, &ns.name, "failing", &["HookFailed"]).await;
    assert!(reasons(&evs).contains(&"HookFailed".to_string()));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_apply_job_runs_only_after_the_rest_is_healthy() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let label = gate(&ns.name);
    release_of_pruned(
        &ns,
        &pkg,
        "post",
        json!({
            "app": {"web": deployment("web", json!({"nodeSelector": {label.clone(): "yes"}}))},
            "check": {"smoke": job("smoke", "post-apply", json!({}), json!({}))}
        }),
        json!({"timeout": "5m"}),
    )
    .await;
    // The Deployment cannot become available yet: the release waits for it, and the
    // post-apply Job is not created.
    wait_rel(&ns.client, &ns.name, "post", "waiting for health", |o| {
        ready_msg(o).contains(&format!("Deployment/{}/web", ns.name))
    })
    .await;
    let jobs = Api::<Job>::namespaced(ns.client.clone(), &ns.name);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        jobs.get_opt("smoke").await.unwrap().is_none(),
        "the post-apply Job must wait for the rest to be healthy"
    );
    open_gate(&ns.client, &label).await;
    let got = wait_rel(&ns.client, &ns.name, "post", "Ready", is_ready_rel).await;
    let smoke = jobs.get("smoke").await.expect("the post-apply Job ran");
    assert!(
        smoke
            .status
            .as_ref()
            .and_then(|s| s.completion_time.as_ref())
            .is_some(),
        "Ready only once the post-apply Job completed"
    );
    let web = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap();
    let available_at = web
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter().find(|c| {
                c.type_.as_deref() == Some("Available") && c.status.as_deref() == Some("True")
            })
        })
        .and_then(|c| c.last_transition_time.as_ref())
        .expect("available")
        .0;
    assert!(
        created(&smoke.metadata) >= available_at,
        "post-apply Job created at {} before the Deployment was available at {available_at}",
        created(&smoke.metadata)
    );
    assert_eq!(ready(&got.status.unwrap()).1, "ReconciliationSucceeded");
    op.stop().await;
    close_gate(&ns.client, &label).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_delete_job_runs_before_deletion_prunes_anything() {
    let (env, ns) = namespace().await;
    Workloads::global().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let label = gate(&ns.name);
    release_of_pruned(
        &ns,
        &pkg,
        "bye",
        json!({
            "app": {"cm": configmap("settings", json!({"a": "1"}))},
            "teardown": {"cleanup": job("cleanup", "pre-delete",
                json!({"nodeSelector": {label.clone(): "yes"}}), json!({}))}
        }),
        json!({"timeout": "5m"}),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "bye", "Ready", is_ready_rel).await;
    // Created with the release, suspended: it has not run.
    let jobs = Api::<Job>::namespaced(ns.client.clone(), &ns.name);
    let cleanup = jobs.get("cleanup").await.expect("created with the release");
    assert_eq!(cleanup.spec.as_ref().unwrap().suspend, Some(true));
    assert!(
        cleanup
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_none()
    );
    // Deleted: the Job is resumed, and while it runs nothing is pruned.
    Api::<Release>::namespaced(ns.client.clone(), &ns.name)
        .delete("bye", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pre-delete Job resumed", || async {
        jobs.get("cleanup")
            .await
            .is_ok_and(|j| j.spec.and_then(|s| s.suspend) == Some(false))
    })
    .await;
    let got = wait_rel(&ns.client, &ns.name, "bye", "waiting for the hook", |o| {
        ready_msg(o).contains("pre-delete hook")
    })
    .await;
    assert!(ready_msg(&got).contains(&format!("Job/{}/cleanup", ns.name)));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        cms.get_opt("settings").await.unwrap().is_some(),
        "nothing is pruned while the pre-delete Job runs"
    );
    // The Job can run: it completes, then everything goes, the release too.
    open_gate(&ns.client, &label).await;
    let rels = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    eventually("the release is gone", || async {
        rels.get_opt("bye").await.unwrap().is_none()
    })
    .await;
    assert!(cms.get_opt("settings").await.unwrap().is_none());
    op.stop().await;
    close_gate(&ns.client, &label).await;
}

/// Red team: the hook annotation is the tenant's. An unknown phase (a long one, cut in the
/// message) and more hooks than `--max-hooks` (32 by default) each stall `RenderFailed`
/// naming what is wrong, before anything of the release is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_bad_hook_annotation_or_too_many_hooks_stalls_before_any_write() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let mut odd = configmap("odd", json!({"a": "1"}));
    odd["metadata"]["annotations"] = json!({HOOK: "x".repeat(500)});
    release_of_pruned(
        &ns,
        &pkg,
        "unknown",
        json!({"app": {"odd": odd, "plain": configmap("plain", json!({"a": "1"}))}}),
        json!({}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "unknown",
        "RenderFailed",
        reason_is_rel("RenderFailed"),
    )
    .await;
    let msg = ready_msg(&got);
    assert!(
        msg.contains("/odd: annotation releases.opmodel.dev/hook: ")
            && msg.contains("is not one of pre-apply, post-apply, pre-delete"),
        "{msg}"
    );
    assert!(msg.len() < 300, "the tenant's value is cut: {msg}");
    let stalled = condition(got.status.as_ref().unwrap(), "Stalled").map(|c| c.status.clone());
    assert_eq!(stalled.as_deref(), Some("True"));

    let many: serde_json::Map<String, Value> = (0..33)
        .map(|i| {
            let mut cm = configmap(&format!("h{i}"), json!({"a": "1"}));
            cm["metadata"]["annotations"] = json!({HOOK: "pre-apply"});
            (format!("h{i}"), cm)
        })
        .collect();
    release_of_pruned(
        &ns,
        &pkg,
        "many",
        json!({"app": Value::Object(many)}),
        json!({}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "many",
        "RenderFailed",
        reason_is_rel("RenderFailed"),
    )
    .await;
    assert_eq!(
        ready_msg(&got),
        "rendered 33 hooks; the cap is 32 (--max-hooks)"
    );
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    for name in ["odd", "plain", "h0", "h32"] {
        assert!(
            cms.get_opt(name).await.unwrap().is_none(),
            "{name} was written"
        );
    }
    op.stop().await;
}
