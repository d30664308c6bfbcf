//! The shipped RBAC (`deploy/rbac`, as listed by `deploy/kustomization.yaml`) is sufficient
//! and not broader than SPEC §22: the real binary, holding only a TokenRequest token of the
//! shipped ServiceAccount, reconciles the example to Ready as a release's ServiceAccount,
//! refuses a release without one, and the API server denies what the operator must never
//! do. The opt-in component `deploy/components/operator-identity` (broad apply role and
//! `--allow-operator-identity`) then lets a release without a ServiceAccount apply.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use opm_testenv::{CueRegistry, rbac};
use serde_json::{Value, json};

use crate::harness::*;

/// The operator's ServiceAccount name in `deploy/rbac/serviceaccount.yaml`.
const SA: &str = "opm-controller";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// Every object of the `rbac/` files the kustomization installs, parsed.
fn shipped_rbac() -> Vec<(String, Value)> {
    listed_rbac(&deploy_dir(), "rbac/")
}

/// The objects of the opt-in operator-identity component (SPEC §22).
fn component_rbac() -> Vec<(String, Value)> {
    listed_rbac(&deploy_dir().join("components/operator-identity"), "apply-")
}

/// The resources of `dir/kustomization.yaml` starting with `prefix`, parsed. A resource that
/// is a directory (`rbac`, a kustomization of its own) contributes its files as `rbac/<file>`.
fn listed_rbac(dir: &Path, prefix: &str) -> Vec<(String, Value)> {
    listed_files(dir, "")
        .into_iter()
        .filter(|r| r.starts_with(prefix))
        .map(|r| {
            let text = std::fs::read_to_string(dir.join(&r)).unwrap();
            (r, serde_saphyr::from_str::<Value>(&text).unwrap())
        })
        .collect()
}

/// The files `dir/kustomization.yaml` installs, relative to `dir` behind `base`, following
/// directory resources into their own kustomization.
fn listed_files(dir: &Path, base: &str) -> Vec<String> {
    let k: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap())
            .unwrap();
    let mut out = Vec::new();
    for r in k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
    {
        let path = dir.join(r);
        if path.is_dir() {
            out.extend(listed_files(&path, &format!("{base}{r}/")));
        } else {
            out.push(format!("{base}{r}"));
        }
    }
    out
}

/// Moves the namespaced objects (and binding subjects) into `ns`; cluster-scoped bindings
/// get a per-test name. The rules are used exactly as shipped.
fn relocate(mut obj: Value, ns: &str) -> Value {
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    if matches!(kind.as_str(), "ServiceAccount" | "Role" | "RoleBinding") {
        obj["metadata"]["namespace"] = json!(ns);
    }
    if kind == "ClusterRoleBinding" {
        let name = format!("{}-{ns}", obj["metadata"]["name"].as_str().unwrap());
        obj["metadata"]["name"] = json!(name);
    }
    if let Some(subjects) = obj["subjects"].as_array_mut() {
        for s in subjects {
            s["namespace"] = json!(ns);
        }
    }
    obj
}

async fn create(client: &Client, ns: &str, obj: Value) {
    let pp = PostParams::default();
    let kind = obj["kind"].as_str().unwrap().to_string();
    match kind.as_str() {
        "ServiceAccount" => {
            let o: ServiceAccount = serde_json::from_value(obj).unwrap();
            Api::<ServiceAccount>::namespaced(client.clone(), ns)
                .create(&pp, &o)
                .await
                .map(drop)
        }
        "ClusterRole" => {
            let o: ClusterRole = serde_json::from_value(obj).unwrap();
            Api::<ClusterRole>::all(client.clone())
                .create(&pp, &o)
                .await
                .map(drop)
        }
        "ClusterRoleBinding" => {
            let o: ClusterRoleBinding = serde_json::from_value(obj).unwrap();
            Api::<ClusterRoleBinding>::all(client.clone())
                .create(&pp, &o)
                .await
                .map(drop)
        }
        "Role" => {
            let o: Role = serde_json::from_value(obj).unwrap();
            Api::<Role>::namespaced(client.clone(), ns)
                .create(&pp, &o)
                .await
                .map(drop)
        }
        "RoleBinding" => {
            let o: RoleBinding = serde_json::from_value(obj).unwrap();
            Api::<RoleBinding>::namespaced(client.clone(), ns)
                .create(&pp, &o)
                .await
                .map(drop)
        }
        other => panic!("unexpected kind {other} in deploy/rbac"),
    }
    .unwrap_or_else(|e| panic!("creating {kind}: {e}"));
}

fn rules_of(obj: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(obj["rules"].clone()).unwrap()
}

/// A kubeconfig for the test cluster holding only `token`.
fn token_kubeconfig(admin: &Path, token: &str, out: &Path) -> Kubeconfig {
    let mut kc = Kubeconfig::read_from(admin).unwrap();
    for named in &mut kc.auth_infos {
        named.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_string().into()),
            ..Default::default()
        });
    }
    std::fs::write(out, serde_json::to_string(&kc).unwrap()).unwrap();
    kc
}

async fn can(client: &Client, verb: &str, group: &str, resource: &str, ns: Option<&str>) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                namespace: ns.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let got = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("SelfSubjectAccessReview");
    got.status.is_some_and(|s| s.allowed)
}

/// Grants reach the authorizer through a watch cache: an expected `allowed` may lag.
async fn eventually_can(
    client: &Client,
    verb: &str,
    group: &str,
    resource: &str,
    ns: Option<&str>,
) {
    let start = Instant::now();
    while !can(client, verb, group, resource, ns).await {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{verb} {group}/{resource} never allowed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn the_shipped_roles_are_not_broader_than_spec_22() {
    let objects = shipped_rbac();
    let default_roles = objects
        .iter()
        .filter(|(_, o)| matches!(o["kind"].as_str(), Some("ClusterRole" | "Role")))
        .count();
    assert_eq!(
        default_roles, 2,
        "core and leader-election roles only by default"
    );
    let opt_in = component_rbac();
    let roles: Vec<&(String, Value)> = objects
        .iter()
        .chain(opt_in.iter())
        .filter(|(_, o)| matches!(o["kind"].as_str(), Some("ClusterRole" | "Role")))
        .collect();
    assert_eq!(
        roles.len(),
        3,
        "core, leader-election and the opt-in apply role"
    );
    for (file, role) in &roles {
        for rule in rules_of(role) {
            let groups = rule.api_groups.clone().unwrap_or_default();
            let resources = rule.resources.clone().unwrap_or_default();
            for field in [&groups, &resources, &rule.verbs] {
                assert!(
                    !field.iter().any(|x| x.contains('*')),
                    "{file}: wildcard in {rule:?}"
                );
            }
            assert!(
                !groups.iter().any(|g| g == "rbac.authorization.k8s.io"),
                "{file}: no RBAC rights at all"
            );
            assert!(
                !rule.verbs.iter().any(|v| v == "bind" || v == "escalate"),
                "{file}: {rule:?}"
            );
            if rule.verbs.iter().any(|v| v == "impersonate") {
                assert_eq!(rule.verbs, ["impersonate"], "{file}");
                assert_eq!(groups, [""], "{file}");
                // SPEC §15: Impersonate-User of a ServiceAccount only; no groups, no users.
                let allowed: BTreeSet<&str> = ["serviceaccounts"].into();
                assert!(
                    resources.iter().all(|r| allowed.contains(r.as_str())),
                    "{file}: impersonates {resources:?}"
                );
                assert!(rule.resource_names.is_none() || file.contains("clusterrole"));
            }
        }
    }
    // The operator's own role writes only its releases and events.
    let (_, core) = objects
        .iter()
        .find(|(f, _)| f == "rbac/clusterrole.yaml")
        .unwrap();
    for rule in rules_of(core) {
        let writes = rule
            .verbs
            .iter()
            .any(|v| matches!(v.as_str(), "create" | "update" | "patch" | "delete"));
        if writes {
            let g = rule.api_groups.clone().unwrap_or_default();
            assert!(
                g == ["releases.opmodel.dev"] || g == ["events.k8s.io"],
                "the core role writes only releases and events: {rule:?}"
            );
            assert!(!rule.verbs.iter().any(|v| v == "delete"), "{rule:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reaches_ready_with_only_the_shipped_rbac() {
    let (env, ns) = namespace().await;
    let admin = &ns.client;
    // Phase 1: the default install (the multi-tenant setup).
    let apply = component_rbac();
    assert_eq!(apply.len(), 2);
    for (_, obj) in shipped_rbac() {
        create(admin, &ns.name, relocate(obj, &ns.name)).await;
    }
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), &ns.name)
        .create_token_request(
            SA,
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
        .expect("token")
        .token
        .expect("token");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let kc = token_kubeconfig(env.kubeconfig_path(), &token, &kubeconfig);
    let sa_client = Client::try_from(
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let n = Some(ns.name.as_str());
    eventually_can(
        &sa_client,
        "watch",
        "releases.opmodel.dev",
        "modulereleases",
        None,
    )
    .await;
    eventually_can(&sa_client, "impersonate", "", "serviceaccounts", n).await;
    eventually_can(&sa_client, "create", "coordination.k8s.io", "leases", n).await;

    // A tenant ServiceAccount the releases name (impersonation, SPEC §15).
    rbac::create_service_account(admin, &ns.name, "deployer")
        .await
        .unwrap();
    rbac::create_role(admin, &ns.name, "deployer", rbac::all_rules())
        .await
        .unwrap();
    rbac::bind_role(
        admin,
        &ns.name,
        "deployer",
        "deployer",
        rbac::service_account_subject("deployer", &ns.name),
    )
    .await
    .unwrap();

    let registry = CueRegistry::global().await;
    let log_path = dir.path().join("operator.log");
    let spawn = |extra: &[&str]| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .args(["run", "--leader-elect"])
            .args(extra)
            .args([
                "--watch-label-selector",
                &format!("{TEST_LABEL}={}", ns.name),
            ])
            .args(["--cue-registry", &registry.registry()])
            .arg("--cue-binary")
            .arg(opm_testenv::tools::cue_bin().unwrap())
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAMESPACE", &ns.name)
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log_path)
                    .unwrap(),
            )
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut child = spawn(&[]);
    let sa = json!({"serviceAccountName": "deployer"});
    create_mr(
        admin,
        &module_release(&ns.name, "web-sa", json!({}), sa.clone()),
    )
    .await;
    let pkg = Package::start().await;
    let comps = json!({"c": {"cm": configmap("from-artifact", json!({"k": "v"}))}});
    pkg.publish(admin, &ns.name, "src", &release_package("r", &comps))
        .await;
    create_rel(admin, &release(&ns.name, "r-sa", "src", ".", sa)).await;
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_mr(admin, &ns.name, "web-sa", "web-sa Ready", is_ready_mr).await;
    wait_rel(admin, &ns.name, "r-sa", "r-sa Ready", is_ready_rel).await;
    // A release without any ServiceAccount stalls before writing anything (SPEC §15).
    create_mr(
        admin,
        &module_release(&ns.name, "web", json!({}), json!({})),
    )
    .await;
    let web = wait_mr(
        admin,
        &ns.name,
        "web",
        "web stalled ImpersonationFailed",
        reason_is_mr("ImpersonationFailed"),
    )
    .await;
    assert_eq!(
        condition(web.status.as_ref().unwrap(), "Ready")
            .unwrap()
            .message,
        opm_core::impersonation::NO_SERVICE_ACCOUNT
    );

    // What the operator must never be able to do (denied by the API server itself).
    let denied = [
        ("delete", "", "secrets", None),
        ("list", "", "secrets", None),
        ("get", "", "secrets", n),
        ("impersonate", "", "users", None),
        ("impersonate", "", "groups", None),
        (
            "impersonate",
            "authentication.k8s.io",
            "userextras/scopes",
            None,
        ),
        (
            "create",
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            None,
        ),
        (
            "escalate",
            "rbac.authorization.k8s.io",
            "clusterroles",
            None,
        ),
        ("bind", "rbac.authorization.k8s.io", "clusterroles", None),
        ("delete", "", "namespaces", None),
        ("create", "apps", "deployments", n),
        ("patch", "apps", "deployments", n),
        ("patch", "", "configmaps", n),
        ("delete", "releases.opmodel.dev", "modulereleases", n),
        ("patch", "source.toolkit.fluxcd.io", "ocirepositories", n),
        ("create", "coordination.k8s.io", "leases", Some("default")),
        (
            "create",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
        ),
    ];
    for (verb, group, resource, at) in denied {
        assert!(
            !can(&sa_client, verb, group, resource, at).await,
            "the operator may {verb} {group}/{resource} in {at:?}"
        );
    }

    // Phase 2: the opt-in component: the broad apply role, and the operator restarted with
    // --allow-operator-identity (the flag its patch adds). The release without a
    // ServiceAccount now applies as the operator; the person/RBAC denials still hold.
    let component = std::fs::read_to_string(
        deploy_dir().join("components/operator-identity/kustomization.yaml"),
    )
    .unwrap();
    assert!(component.contains("--allow-operator-identity=on"));
    for (_, obj) in apply {
        create(admin, &ns.name, relocate(obj, &ns.name)).await;
    }
    eventually_can(&sa_client, "patch", "apps", "deployments", n).await;
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let mut child = spawn(&["--allow-operator-identity=on"]);
    let web = wait_mr(admin, &ns.name, "web", "web Ready", is_ready_mr).await;
    assert_eq!(web.status.unwrap().inventory.unwrap().count, 4);
    for (verb, group, resource, at) in [
        ("impersonate", "", "users", None),
        ("impersonate", "", "groups", None),
        (
            "create",
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            None,
        ),
        (
            "escalate",
            "rbac.authorization.k8s.io",
            "clusterroles",
            None,
        ),
        ("delete", "", "namespaces", None),
        // Secrets are written by name, never enumerated (the managed-object watch skips them).
        ("list", "", "secrets", None),
        ("watch", "", "secrets", None),
        (
            "create",
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
        ),
    ] {
        assert!(
            !can(&sa_client, verb, group, resource, at).await,
            "with the apply role the operator may {verb} {group}/{resource}"
        );
    }
    let text = log();
    assert!(text.contains("attempt finished"), "operator log: {text}");
    child.start_kill().unwrap();
    let _ = child.wait().await;
}
