//! Red team, issue 13 item 1 (SPEC §15, §22): a release author escalating through the
//! operator. Each attack is refused with the SPEC reason before anything is written, other
//! tenants' objects stay as they were, and the operator goes on reconciling.
//!
//! Reproduced first on the code before the tenancy change (df8852a, same attacks):
//! (a) Ready/ReconciliationSucceeded and the ClusterRoleBinding to cluster-admin existed;
//! (b) the token-reading Deployment was created in the other namespace and the
//! ClusterRoleBinding too (the other tenant's ConfigMap survived only because its field
//! manager conflicted); (c) the shipped role let the operator's token impersonate
//! `system:masters`: it listed every Secret and created a cluster-admin binding;
//! (d) was already refused (ImpersonationFailed, Forbidden) and still is.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, Config};
use opm_core::AllowOperatorIdentity;
use opm_core::api::Release;
use opm_core::impersonation::NO_SERVICE_ACCOUNT;
use opm_testenv::rbac;
use serde_json::{Value, json};

use crate::harness::*;

/// A ClusterRoleBinding granting cluster-admin to the `default` ServiceAccount of `ns`.
fn cluster_admin_binding(name: &str, ns: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}]})
}

/// A Deployment in `ns` that would run as that namespace's `opm-controller` and could read
/// its token (the operator's, in `opm-system`).
fn token_thief(ns: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "thief", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "thief"}},
            "template": {"metadata": {"labels": {"app": "thief"}},
                "spec": {"serviceAccountName": "opm-controller",
                    "containers": [{"name": "c", "image": "busybox",
                        "command": ["cat", "/var/run/secrets/kubernetes.io/serviceaccount/token"]}]}}}})
}

fn message(r: &Release) -> String {
    r.status
        .as_ref()
        .and_then(|s| condition(s, "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn stalled(r: &Release) -> bool {
    r.status.as_ref().is_some_and(|s| {
        condition(s, "Stalled").is_some_and(|c| c.status == "True")
            && s.observed_generation == r.metadata.generation.unwrap_or(0)
    })
}

async fn crb_exists(client: &Client, name: &str) -> bool {
    Api::<ClusterRoleBinding>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

/// A benign release in `ns` that runs as a ServiceAccount bound to a namespaced Role still
/// becomes Ready: the operator is alive and serving the tenant.
async fn still_serving(client: &Client, ns: &str, pkg: &Package) {
    rbac::service_account_with_role(client, ns, "benign-sa", rbac::all_rules())
        .await
        .unwrap();
    let comps = json!({"c": {"cm": configmap("benign", json!({"k": "v"}))}});
    pkg.publish(client, ns, "benign", &release_package("benign", &comps))
        .await;
    create_rel(
        client,
        &release(
            ns,
            "benign",
            "benign",
            ".",
            json!({"serviceAccountName": "benign-sa"}),
        ),
    )
    .await;
    wait_rel(
        client,
        ns,
        "benign",
        "the benign release Ready",
        is_ready_rel,
    )
    .await;
}

/// (a) Default operator config, a release with no ServiceAccount rendering a binding to
/// cluster-admin: stalled ImpersonationFailed with the SPEC §4 message, no binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_without_a_service_account_cannot_bind_cluster_admin() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = AllowOperatorIdentity::Off
    })
    .await;
    let pkg = Package::start().await;
    let crb = format!("evil-{}", ns.name);
    let comps = json!({"rbac": {"crb": cluster_admin_binding(&crb, &ns.name)},
        "app": {"cm": configmap("cover", json!({"k": "v"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &comps))
        .await;
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "stalled ImpersonationFailed",
        reason_is_rel("ImpersonationFailed"),
    )
    .await;
    assert!(stalled(&got), "{:?}", got.status);
    assert_eq!(message(&got), NO_SERVICE_ACCOUNT);
    let evs = events_with(&ns.client, &ns.name, "r", &["ImpersonationFailed"]).await;
    let warning = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("ImpersonationFailed"))
        .unwrap();
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        !crb_exists(&ns.client, &crb).await,
        "the binding was written"
    );
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        cms.get_opt("cover").await.unwrap().is_none(),
        "nothing is written, not even in the namespace"
    );
    still_serving(&ns.client, &ns.name, &pkg).await;
    assert!(!crb_exists(&ns.client, &crb).await);
    op.stop().await;
}

/// (b) `--allow-operator-identity` (on): a release writing into another namespace (the
/// operator's, standing in for opm-system) or a cluster-scoped object is a stall
/// ApplyFailed naming it; the other namespace's objects are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_identity_on_stays_in_the_release_namespace() {
    let (env, ns) = namespace().await;
    let victim = env.namespace().await.unwrap();
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = AllowOperatorIdentity::On
    })
    .await;
    let pkg = Package::start().await;
    // The other tenant's ConfigMap, which the attack would overwrite.
    let theirs: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "payload", "namespace": victim.name}, "data": {"owner": "victim"}}),
    )
    .unwrap();
    let victim_cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &victim.name);
    victim_cms
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let mut payload = configmap("payload", json!({"owner": "attacker"}));
    payload["metadata"]["namespace"] = json!(victim.name);
    let comps = json!({"x": {"cm": payload, "d": token_thief(&victim.name)},
        "own": {"cm": configmap("own", json!({"k": "v"}))}});
    pkg.publish(&ns.client, &ns.name, "out", &release_package("out", &comps))
        .await;
    create_rel(&ns.client, &release(&ns.name, "out", "out", ".", json!({}))).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "out",
        "stalled ApplyFailed",
        reason_is_rel("ApplyFailed"),
    )
    .await;
    assert!(stalled(&got), "{:?}", got.status);
    let msg = message(&got);
    let v = &victim.name;
    assert!(
        msg.contains(&format!("ConfigMap/{v}/payload is in namespace {v}")),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("Deployment/{v}/thief is in namespace {v}")),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "a release applying as the operator may only write objects in its own namespace {}",
            ns.name
        )),
        "{msg}"
    );
    assert!(msg.contains("--allow-operator-identity=cluster"), "{msg}");
    let after = victim_cms.get("payload").await.unwrap();
    assert_eq!(
        after.data.unwrap().get("owner").map(String::as_str),
        Some("victim")
    );
    assert!(
        Api::<Deployment>::namespaced(ns.client.clone(), &victim.name)
            .get_opt("thief")
            .await
            .unwrap()
            .is_none()
    );
    let own = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        own.get_opt("own").await.unwrap().is_none(),
        "refused before anything"
    );

    // A cluster-scoped object.
    let crb = format!("evil-{}", ns.name);
    let comps = json!({"rbac": {"crb": cluster_admin_binding(&crb, &ns.name)}});
    pkg.publish(&ns.client, &ns.name, "cs", &release_package("cs", &comps))
        .await;
    create_rel(&ns.client, &release(&ns.name, "cs", "cs", ".", json!({}))).await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "cs",
        "stalled ApplyFailed",
        reason_is_rel("ApplyFailed"),
    )
    .await;
    assert!(
        message(&got).starts_with(&format!("ClusterRoleBinding/{crb} is cluster-scoped; ")),
        "{}",
        message(&got)
    );
    assert!(!crb_exists(&ns.client, &crb).await);
    let evs = events_with(&ns.client, &ns.name, "cs", &["ApplyFailed"]).await;
    assert!(evs.iter().any(
        |e| e.reason.as_deref() == Some("ApplyFailed") && e.type_.as_deref() == Some("Warning")
    ));

    // A release of the namespace's own objects applies as the operator.
    pkg.publish(
        &ns.client,
        &ns.name,
        "fine",
        &release_package(
            "fine",
            &json!({"c": {"cm": configmap("fine", json!({"k": "v"}))}}),
        ),
    )
    .await;
    create_rel(
        &ns.client,
        &release(&ns.name, "fine", "fine", ".", json!({})),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "fine", "fine Ready", is_ready_rel).await;
    assert!(own.get_opt("fine").await.unwrap().is_some());
    op.stop().await;
}

/// A token of ServiceAccount `ns/sa`.
async fn token(client: &Client, ns: &str, sa: &str) -> String {
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(
            sa,
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("TokenRequest")
        .status
        .and_then(|s| s.token)
        .expect("token")
}

fn token_config(base: &Config, token: &str) -> Config {
    let mut c = base.clone();
    c.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    c
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// (c) The operator's token, holding exactly the shipped `deploy/rbac/clusterrole.yaml`,
/// cannot impersonate a group (`system:masters`), while impersonating a ServiceAccount by
/// user name alone still carries that ServiceAccount's group bindings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_token_cannot_impersonate_system_masters() {
    let (env, ns) = namespace().await;
    let admin = &ns.client;
    let shipped =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/rbac/clusterrole.yaml");
    let mut role: ClusterRole =
        serde_saphyr::from_str(&std::fs::read_to_string(shipped).unwrap()).unwrap();
    let name = format!("opm-controller-redteam-{}", ns.name);
    role.metadata.name = Some(name.clone());
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "opm-controller", "namespace": ns.name}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    rbac::create_service_account(admin, &ns.name, "opm-controller")
        .await
        .unwrap();
    let operator = token_config(
        &env.config(),
        &token(admin, &ns.name, "opm-controller").await,
    );

    // Group-less impersonation of a ServiceAccount whose only grant is a binding to its
    // namespace's group: the API server adds the group, so the read is allowed.
    rbac::create_service_account(admin, &ns.name, "member")
        .await
        .unwrap();
    rbac::create_role(
        admin,
        &ns.name,
        "read-cms",
        vec![rbac::rule("", &["configmaps"], &["get", "list"])],
    )
    .await
    .unwrap();
    let group = format!("system:serviceaccounts:{}", ns.name);
    rbac::bind_role(
        admin,
        &ns.name,
        "read-cms",
        "read-cms",
        rbac::group_subject(&group),
    )
    .await
    .unwrap();
    let mut as_member = operator.clone();
    as_member.auth_info.impersonate = Some(rbac::service_account_user("member", &ns.name));
    let member = Client::try_from(as_member).unwrap();
    eventually(
        "group-less impersonation reads via the group binding",
        || {
            let member = member.clone();
            let ns = ns.name.clone();
            async move {
                Api::<ConfigMap>::namespaced(member, &ns)
                    .list(&ListParams::default())
                    .await
                    .is_ok()
            }
        },
    )
    .await;

    // The escalation: any user name it may impersonate, plus the group system:masters.
    let mut as_masters = operator.clone();
    as_masters.auth_info.impersonate = Some(rbac::service_account_user("nobody", &ns.name));
    as_masters.auth_info.impersonate_groups = Some(vec!["system:masters".into()]);
    let masters = Client::try_from(as_masters).unwrap();
    let err = Api::<Secret>::all(masters.clone())
        .list(&ListParams::default())
        .await
        .expect_err("listing every Secret as system:masters");
    assert_eq!(status_code(&err), Some(403), "{err}");
    assert!(
        err.to_string()
            .contains("cannot impersonate resource \"groups\""),
        "{err}"
    );
    let crb = format!("masters-{}", ns.name);
    let b: ClusterRoleBinding =
        serde_json::from_value(cluster_admin_binding(&crb, &ns.name)).unwrap();
    let err = Api::<ClusterRoleBinding>::all(masters)
        .create(&PostParams::default(), &b)
        .await
        .expect_err("binding cluster-admin as system:masters");
    assert_eq!(status_code(&err), Some(403), "{err}");
    assert!(!crb_exists(admin, &crb).await);
    // And the operator's own identity may not grant itself anything either.
    let err = Api::<ClusterRoleBinding>::all(Client::try_from(operator).unwrap())
        .create(&PostParams::default(), &b)
        .await
        .expect_err("binding cluster-admin as the operator");
    assert_eq!(status_code(&err), Some(403), "{err}");
    assert!(!crb_exists(admin, &crb).await);
}

/// (d) A tenant ServiceAccount bound to a namespaced Role: a release rendering an object in
/// another namespace is Forbidden by the API server, a stall ImpersonationFailed; nothing
/// is written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_service_account_cannot_write_outside_its_namespace() {
    let (env, ns) = namespace().await;
    let victim = env.namespace().await.unwrap();
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = AllowOperatorIdentity::Off
    })
    .await;
    rbac::service_account_with_role(&ns.client, &ns.name, "tenant", rbac::all_rules())
        .await
        .unwrap();
    let pkg = Package::start().await;
    let mut out = configmap("planted", json!({"k": "v"}));
    out["metadata"]["namespace"] = json!(victim.name);
    let comps = json!({"x": {"cm": out}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &comps))
        .await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "r",
            "src",
            ".",
            json!({"serviceAccountName": "tenant"}),
        ),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "r",
        "stalled ImpersonationFailed",
        reason_is_rel("ImpersonationFailed"),
    )
    .await;
    assert!(stalled(&got), "{:?}", got.status);
    let msg = message(&got);
    assert!(
        msg.contains(&format!("system:serviceaccount:{}:tenant", ns.name)),
        "{msg}"
    );
    // The first request to the other namespace is the ownership read (SPEC §25) or the
    // apply itself; either way the message names the object it was refused.
    assert!(
        msg.contains(&format!("ConfigMap/{}/planted", victim.name))
            || msg.contains(&format!("ConfigMap {}/planted", victim.name)),
        "{msg}"
    );
    assert!(
        Api::<ConfigMap>::namespaced(ns.client.clone(), &victim.name)
            .get_opt("planted")
            .await
            .unwrap()
            .is_none()
    );
    still_serving(&ns.client, &ns.name, &pkg).await;
    op.stop().await;
}
