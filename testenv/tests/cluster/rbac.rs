use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use opm_testenv::rbac;
use serde_json::json;

use crate::status_code;

fn config_map(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"by": "impersonation"},
    })
}

/// Applies as a subject whose binding was just created. The API server's RBAC authorizer
/// reads bindings from a watch cache, so a fresh grant becomes visible a moment later:
/// retry a 403 for a few seconds, and return the last answer.
async fn apply_once_granted(
    client: kube::Client,
    ns: &str,
    name: &str,
) -> Result<ConfigMap, kube::Error> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let result = apply_as(client.clone(), ns, name).await;
        match &result {
            Err(err) if status_code(err) == Some(403) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            _ => return result,
        }
    }
}

async fn apply_as(client: kube::Client, ns: &str, name: &str) -> Result<ConfigMap, kube::Error> {
    Api::<ConfigMap>::namespaced(client, ns)
        .patch(
            name,
            &PatchParams::apply("opm-controller"),
            &Patch::Apply(&config_map(name)),
        )
        .await
}

#[tokio::test]
async fn impersonated_service_account_needs_a_binding() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let configmaps = rbac::rule("", &["configmaps"], &["get", "list", "patch", "create"]);

    // Allowed by a RoleBinding to the ServiceAccount.
    rbac::service_account_with_role(&ns.client, &ns.name, "deployer", vec![configmaps])
        .await
        .unwrap();
    let deployer = env.impersonating_client("deployer", &ns.name).unwrap();
    let applied = apply_once_granted(deployer, &ns.name, "allowed")
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["by"], "impersonation");

    // Without one: 403, and nothing is created.
    rbac::create_service_account(&ns.client, &ns.name, "nobody")
        .await
        .unwrap();
    let nobody = env.impersonating_client("nobody", &ns.name).unwrap();
    let err = apply_as(nobody.clone(), &ns.name, "denied")
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(403), "{err}");
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert!(
        status
            .message
            .contains(&format!("system:serviceaccount:{}:nobody", ns.name)),
        "{}",
        status.message
    );
    assert_eq!(
        status_code(&ns.api::<ConfigMap>().get("denied").await.unwrap_err()),
        Some(404)
    );

    // The deployer's Role is namespaced: another namespace is off limits.
    let other = env.namespace().await.unwrap();
    let deployer = env.impersonating_client("deployer", &ns.name).unwrap();
    let err = apply_as(deployer, &other.name, "elsewhere")
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(403), "{err}");
}

#[tokio::test]
async fn group_binding_grants_every_service_account_of_the_namespace() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    rbac::create_service_account(&ns.client, &ns.name, "member")
        .await
        .unwrap();
    let client = env.impersonating_client("member", &ns.name).unwrap();
    let err = apply_as(client.clone(), &ns.name, "via-group")
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(403), "{err}");

    rbac::create_role(&ns.client, &ns.name, "all", rbac::all_rules())
        .await
        .unwrap();
    let group = format!("system:serviceaccounts:{}", ns.name);
    rbac::bind_role(
        &ns.client,
        &ns.name,
        "all-sas",
        "all",
        rbac::group_subject(&group),
    )
    .await
    .unwrap();
    let applied = apply_once_granted(client, &ns.name, "via-group")
        .await
        .unwrap();
    assert_eq!(applied.metadata.name.as_deref(), Some("via-group"));
}

#[test]
fn impersonation_config_names_the_user_only() {
    let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
    let imp = rbac::impersonate_service_account(&config, "sa", "ns1");
    assert_eq!(
        imp.auth_info.impersonate.as_deref(),
        Some("system:serviceaccount:ns1:sa")
    );
    // No Impersonate-Group: the API server adds the ServiceAccount's groups (SPEC §15).
    assert!(imp.auth_info.impersonate_groups.is_none());
    assert!(config.auth_info.impersonate.is_none());
}
