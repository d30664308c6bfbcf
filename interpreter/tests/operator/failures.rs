//! Failure exits on the live cluster: 422, field conflicts, render and resolution errors,
//! dependencies, sources that are not ready yet.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use opm_testenv::flux::{self, SourceKind};
use serde_json::json;

use crate::harness::*;

fn is_stalled_mr(o: &opm_core::api::ModuleRelease) -> bool {
    o.status
        .as_ref()
        .is_some_and(|s| condition(s, "Stalled").is_some_and(|c| c.status == "True"))
}

fn is_stalled_rel(o: &opm_core::api::Release) -> bool {
    o.status
        .as_ref()
        .is_some_and(|s| condition(s, "Stalled").is_some_and(|c| c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_object_stalls_as_apply_failed() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let bad = json!({"c": {"a": configmap("Not_A_Valid_Name", json!({"k": "v"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &bad))
        .await;
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "ApplyFailed",
        reason_is_rel("ApplyFailed"),
    )
    .await;
    assert!(is_stalled_rel(&got), "422 must stall: {:?}", got.status);
    let s = got.status.unwrap();
    assert!(
        condition(&s, "Ready")
            .unwrap()
            .message
            .contains("Not_A_Valid_Name")
    );
    // At least this attempt; a source event may have started a second one meanwhile.
    assert!(s.failure_counters.apply >= 1);
    assert!(s.inventory.is_none());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_owned_by_another_manager_stalls_without_force_and_is_taken_with_it() {
    let (env, ns) = namespace().await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"k": "theirs"}});
    cms.patch(
        "shared",
        &PatchParams::apply("other-tool"),
        &Patch::Apply(&theirs),
    )
    .await
    .unwrap();
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let ours = json!({"c": {"a": configmap("shared", json!({"k": "ours"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &ours))
        .await;
    // The object exists without a release's uuid: adopting it is asked for (SPEC §25), so
    // what is left to refuse is the field conflict.
    let spec = json!({"rollout": {"adoptExisting": true}});
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", spec)).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "ApplyFailed",
        reason_is_rel("ApplyFailed"),
    )
    .await;
    assert!(is_stalled_rel(&got));
    let msg = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message
        .clone();
    assert!(
        msg.contains("other-tool"),
        "message names the other manager: {msg}"
    );
    assert_eq!(
        cms.get("shared").await.unwrap().data.unwrap()["k"],
        "theirs"
    );
    patch_rel(
        &ns.client,
        &ns.name,
        "r",
        json!({"spec": {"rollout": {"forceConflicts": true}}}),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "r", "Ready with force", is_ready_rel).await;
    assert_eq!(cms.get("shared").await.unwrap().data.unwrap()["k"], "ours");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_values_stall_as_render_failed_and_an_unknown_version_as_resolution_failed() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "badvalues",
            json!({"replicas": "many"}),
            json!({}),
        ),
    )
    .await;
    let mut unknown = module_release(&ns.name, "badversion", json!({}), json!({}));
    unknown.spec.module.version = "v0.9.9".into();
    create_mr(&ns.client, &unknown).await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "badvalues",
        "RenderFailed",
        reason_is_mr("RenderFailed"),
    )
    .await;
    assert!(is_stalled_mr(&got));
    let msg = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message
        .clone();
    assert!(msg.contains("replicas"), "message names the field: {msg}");
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "badversion",
        "ResolutionFailed",
        reason_is_mr("ResolutionFailed"),
    )
    .await;
    assert!(is_stalled_mr(&got));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depends_on_blocks_until_the_dependency_is_ready() {
    let (env, ns) = namespace().await;
    // A long dependency requeue: only the Ready trigger can unblock the dependent in time.
    let op = Operator::start(env, &ns.name, |a| {
        a.requeue_dependency = Duration::from_secs(600)
    })
    .await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "app",
            json!({}),
            json!({"dependsOn": [{"name": "base"}]}),
        ),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "app",
        "DependenciesNotReady",
        reason_is_mr("DependenciesNotReady"),
    )
    .await;
    let msg = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message
        .clone();
    assert!(msg.contains("base"), "{msg}");
    create_mr(
        &ns.client,
        &module_release(&ns.name, "base", json!({}), json!({})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "base", "Ready", is_ready_mr).await;
    wait_mr(
        &ns.client,
        &ns.name,
        "app",
        "Ready after dependency",
        is_ready_mr,
    )
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_not_ready_then_ready_is_picked_up_by_the_source_watch() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |a| {
        a.requeue_dependency = Duration::from_secs(600)
    })
    .await;
    flux::create_source(&ns.client, &ns.name, SourceKind::OciRepository, "src")
        .await
        .unwrap();
    flux::set_not_ready(
        &ns.client,
        &ns.name,
        SourceKind::OciRepository,
        "src",
        "Pulling",
        "still pulling",
    )
    .await
    .unwrap();
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "SourceNotReady",
        reason_is_rel("SourceNotReady"),
    )
    .await;
    assert!(!is_stalled_rel(&got), "not ready is a soft block");
    let pkg = Package::start().await;
    pkg.publish(
        &ns.client,
        &ns.name,
        "src",
        &release_package("r", &json!({"c": {"a": configmap("x", json!({"k": "v"}))}})),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "Ready after the artifact appeared",
        is_ready_rel,
    )
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_mismatch_is_a_transient_fetch_failure_and_a_missing_path_stalls() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let files = release_package("r", &json!({"c": {"a": configmap("x", json!({"k": "v"}))}}));
    let mut artifact = pkg.publish(&ns.client, &ns.name, "src", &files).await;
    create_rel(
        &ns.client,
        &release(&ns.name, "nopath", "src", "does/not/exist", json!({})),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "nopath",
        "PathNotFound",
        reason_is_rel("PathNotFound"),
    )
    .await;
    assert!(is_stalled_rel(&got));
    artifact.digest = format!("sha256:{}", "0".repeat(64));
    flux::create_source(&ns.client, &ns.name, SourceKind::OciRepository, "liar")
        .await
        .unwrap();
    flux::set_artifact(
        &ns.client,
        &ns.name,
        SourceKind::OciRepository,
        "liar",
        &artifact,
    )
    .await
    .unwrap();
    create_rel(
        &ns.client,
        &release(&ns.name, "mismatch", "liar", ".", json!({})),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "mismatch",
        "FetchFailed",
        reason_is_rel("FetchFailed"),
    )
    .await;
    assert!(!is_stalled_rel(&got), "a digest mismatch is transient");
    assert!(got.status.unwrap().next_retry_at.is_some());
    op.stop().await;
}
