//! `dependsOn` on any object, on the real API server: a release waits for a Secret to
//! exist, a CRD to be Established and a custom resource's `readyExpr` to be true, in order,
//! naming the first blocker; a hostile `readyExpr` is stopped at its bound and stalls; a
//! dependency the release's ServiceAccount may not read says so.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use opm_core::api::ModuleRelease;
use serde_json::{Value, json};

use crate::harness::*;

fn ready_message(o: &ModuleRelease) -> String {
    o.status
        .as_ref()
        .and_then(|s| condition(s, "Ready"))
        .map(|c| format!("{} {}: {}", c.status, c.reason, c.message))
        .unwrap_or_default()
}

fn message_contains(want: String) -> impl Fn(&ModuleRelease) -> bool {
    move |o| ready_message(o).contains(&want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_waits_for_a_secret_a_crd_and_a_custom_resource_in_order() {
    let (env, ns) = namespace().await;
    // Re-checked every 2 s here (30 s by default, `--requeue-dependency`).
    let op = Operator::start(env, &ns.name, |a| {
        a.requeue_dependency = Duration::from_secs(2);
    })
    .await;
    let group = format!("{}.opm.test", ns.name);
    let crd_name = format!("widgets.{group}");
    let mr = module_release(
        &ns.name,
        "app",
        json!({}),
        json!({"dependsOn": [
            {"apiVersion": "v1", "kind": "Secret", "name": "creds"},
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "name": crd_name},
            {"apiVersion": format!("{group}/v1"), "kind": "Widget", "name": "w1",
             "readyExpr": "dep.status.phase == 'Ready' && self.spec.size > 0"},
        ]}),
    );
    let started = Instant::now();
    create_mr(&ns.client, &mr).await;
    let secret_missing = format!(
        "waiting for dependency v1 Secret {}/creds: not found",
        ns.name
    );
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "app",
        "waiting for the Secret",
        message_contains(secret_missing),
    )
    .await;
    assert!(ready_message(&got).starts_with("False DependenciesNotReady"));
    assert!(
        got.status.as_ref().unwrap().inventory.is_none(),
        "nothing applied while waiting"
    );

    // The Secret appears: next, the CRD.
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds"}, "stringData": {"password": "p"}}))
    .unwrap();
    Api::<Secret>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    wait_mr(
        &ns.client,
        &ns.name,
        "app",
        "waiting for the CRD",
        message_contains(format!("CustomResourceDefinition {}/{crd_name}", ns.name)),
    )
    .await;

    // The CRD is created (the API server establishes it): next, the Widget.
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .unwrap();
    let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    wait_mr(
        &ns.client,
        &ns.name,
        "app",
        "waiting for the Widget",
        message_contains(format!("Widget {}/w1: not found", ns.name)),
    )
    .await;

    // The Widget exists but is not Ready: the expression is false.
    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &ApiResource::from_gvk(&gvk));
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 1}, "status": {"phase": "Pending"}}))
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    wait_mr(
        &ns.client,
        &ns.name,
        "app",
        "readyExpr false",
        message_contains("Widget".to_string() + &format!(" {}/w1: readyExpr is false", ns.name)),
    )
    .await;
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    wait_mr(&ns.client, &ns.name, "app", "Ready", is_ready_mr).await;
    eprintln!(
        "depends-on-objects e2e: Ready {:?} after creation",
        started.elapsed()
    );
    let _ = crds.delete(&crd_name, &Default::default()).await;
    // Every attempt, with the objects read and the expressions judged, replays.
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_ready_expr_is_stopped_and_an_unreadable_dependency_says_who_may_not_read_it() {
    let (env, ns) = namespace().await;
    let other = env.namespace().await.expect("second namespace");
    let op = Operator::start(env, &ns.name, |a| {
        a.requeue_dependency = Duration::from_secs(2);
        a.allow_cross_namespace_refs = true;
    })
    .await;
    // A ConfigMap that exists, so that the expression runs.
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flag"},
        "data": {"ready": "yes"}}))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let list = "[1,2,3,4,5,6,7,8,9,10]";
    let hostile = format!(
        "{list}.all(a, {list}.all(b, {list}.all(c, {list}.all(d, {list}.all(e, \
         {list}.all(f, {list}.all(g, a + b + c + d + e + f + g > 0)))))))"
    );
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "hostile",
            json!({}),
            json!({"dependsOn": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "flag",
                                  "readyExpr": hostile}]}),
        ),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "hostile",
        "Stalled",
        reason_is_mr("DependenciesNotReady"),
    )
    .await;
    let msg = ready_message(&got);
    assert!(
        msg.contains(&format!(
            "readyExpr of dependency v1 ConfigMap {}/flag stopped after",
            ns.name
        )),
        "{msg}"
    );
    let stalled = condition(got.status.as_ref().unwrap(), "Stalled").map(|c| c.status.clone());
    assert_eq!(
        stalled.as_deref(),
        Some("True"),
        "a hostile expression stalls"
    );

    // The CRD refuses an expression over its length bound.
    let long = module_release(
        &ns.name,
        "too-long",
        json!({}),
        json!({"dependsOn": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "flag",
                              "readyExpr": "true && ".repeat(200) + "true"}]}),
    );
    let err = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &long)
        .await
        .expect_err("refused by the CRD");
    assert!(err.to_string().contains("readyExpr"), "{err}");
    // And an entry of another kind without its apiVersion.
    let no_version = module_release(
        &ns.name,
        "no-version",
        json!({}),
        json!({"dependsOn": [{"kind": "ConfigMap", "name": "flag"}]}),
    );
    let err = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &no_version)
        .await
        .expect_err("refused by the CRD");
    assert!(err.to_string().contains("needs apiVersion"), "{err}");

    // A ServiceAccount without rights in the other namespace cannot read the dependency.
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "deployer"}})).unwrap();
    Api::<ServiceAccount>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "nosy",
            json!({}),
            json!({"serviceAccountName": "deployer",
                   "dependsOn": [{"apiVersion": "v1", "kind": "Secret", "name": "creds",
                                  "namespace": other.name}]}),
        ),
    )
    .await;
    let want = format!(
        "cannot read dependency v1 Secret {}/creds as system:serviceaccount:{}:deployer: forbidden",
        other.name, ns.name
    );
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "nosy",
        "forbidden",
        message_contains(want),
    )
    .await;
    let msg: Value = json!(ready_message(&got));
    assert!(
        msg.as_str()
            .unwrap()
            .starts_with("False DependenciesNotReady"),
        "{msg}"
    );
    op.stop().await;
}
