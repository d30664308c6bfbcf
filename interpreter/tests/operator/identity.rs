//! Impersonation (SPEC §15) and the deletion paths that depend on the ServiceAccount.

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, DeleteParams};
use opm_core::api::ModuleRelease;
use opm_core::constants::ORPHAN_ANNOTATION;
use opm_testenv::rbac;
use serde_json::json;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_service_account_stalls_and_its_creation_retriggers_the_release() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    rbac::create_role(&ns.client, &ns.name, "deployer", rbac::all_rules())
        .await
        .unwrap();
    rbac::bind_role(
        &ns.client,
        &ns.name,
        "deployer",
        "deployer",
        rbac::service_account_subject("deployer", &ns.name),
    )
    .await
    .unwrap();
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "web",
            json!({}),
            json!({"serviceAccountName": "deployer"}),
        ),
    )
    .await;
    wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "ImpersonationFailed",
        reason_is_mr("ImpersonationFailed"),
    )
    .await;
    rbac::create_service_account(&ns.client, &ns.name, "deployer")
        .await
        .unwrap();
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "Ready once the SA exists",
        is_ready_mr,
    )
    .await;
    assert_eq!(got.status.unwrap().inventory.unwrap().count, 4);
    // The objects were written as the ServiceAccount.
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    let managers: Vec<String> = cm
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"opm-controller".to_string()),
        "{managers:?}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_apply_while_impersonating_stalls_as_impersonation_failed() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    rbac::service_account_with_role(
        &ns.client,
        &ns.name,
        "reader",
        vec![rbac::rule("", &["configmaps"], &["get", "list"])],
    )
    .await
    .unwrap();
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "web",
            json!({}),
            json!({"serviceAccountName": "reader"}),
        ),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "ImpersonationFailed",
        reason_is_mr("ImpersonationFailed"),
    )
    .await;
    let s = got.status.unwrap();
    assert_eq!(
        condition(&s, "Stalled").map(|c| c.status.as_str()),
        Some("True")
    );
    assert!(
        Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
            .get_opt("web-config")
            .await
            .unwrap()
            .is_none()
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_service_account_flag_applies_when_the_spec_names_none() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |a| {
        a.default_service_account = Some("fallback".into())
    })
    .await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({})),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "ImpersonationFailed",
        reason_is_mr("ImpersonationFailed"),
    )
    .await;
    let msg = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message
        .clone();
    assert!(msg.contains("fallback"), "{msg}");
    rbac::service_account_with_role(&ns.client, &ns.name, "fallback", rbac::all_rules())
        .await
        .unwrap();
    wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "Ready as the default SA",
        is_ready_mr,
    )
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_without_the_service_account_stalls_and_the_orphan_annotation_releases_it() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    rbac::service_account_with_role(&ns.client, &ns.name, "deployer", rbac::all_rules())
        .await
        .unwrap();
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "web",
            json!({}),
            json!({"prune": true, "serviceAccountName": "deployer"}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    Api::<ServiceAccount>::namespaced(ns.client.clone(), &ns.name)
        .delete("deployer", &DeleteParams::default())
        .await
        .unwrap();
    let mrs = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name);
    mrs.delete("web", &DeleteParams::default()).await.unwrap();
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "DeletionSAMissing",
        reason_is_mr("DeletionSAMissing"),
    )
    .await;
    let msg = condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message
        .clone();
    assert!(
        msg.contains(ORPHAN_ANNOTATION),
        "the message lists the ways out: {msg}"
    );
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {ORPHAN_ANNOTATION: "true"}}}),
    )
    .await;
    let mrs2 = mrs.clone();
    eventually("release gone after the orphan annotation", || {
        let mrs = mrs2.clone();
        async move { mrs.get_opt("web").await.unwrap().is_none() }
    })
    .await;
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get_opt("web-config")
        .await
        .unwrap();
    assert!(
        cm.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "objects are orphaned"
    );
    let rs = reasons(&events_with(&ns.client, &ns.name, "web", &["OrphanedOnDeletion"]).await);
    assert!(rs.contains(&"OrphanedOnDeletion".to_string()), "{rs:?}");
    op.stop().await;
}
