//! ServiceAccounts, the RBAC that grants them rights, and clients that act as them, for
//! testing the operator's per-release impersonation against real authorization.

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, Config};

use crate::error::Result;

/// The user name the API server gives ServiceAccount `ns/sa`.
pub fn service_account_user(sa: &str, ns: &str) -> String {
    format!("system:serviceaccount:{ns}:{sa}")
}

/// The groups every ServiceAccount `ns/*` belongs to.
pub fn service_account_groups(ns: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".to_owned(),
    ]
}

/// A copy of `config` that impersonates ServiceAccount `ns/sa` by user name alone, as the
/// operator does for a release with `spec.serviceAccountName` (SPEC §15): the API server
/// adds [`service_account_groups`] itself, so group bindings still apply.
pub fn impersonate_service_account(config: &Config, sa: &str, ns: &str) -> Config {
    let mut config = config.clone();
    config.auth_info.impersonate = Some(service_account_user(sa, ns));
    config.auth_info.impersonate_groups = None;
    config
}

/// A client acting as ServiceAccount `ns/sa` (user name only; see [`impersonate_service_account`]).
pub fn impersonating_client(config: &Config, sa: &str, ns: &str) -> Result<Client> {
    Ok(Client::try_from(impersonate_service_account(
        config, sa, ns,
    ))?)
}

/// Every verb on every resource of every group: a namespace admin.
pub fn all_rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        api_groups: Some(vec!["*".into()]),
        resources: Some(vec!["*".into()]),
        verbs: vec!["*".into()],
        ..Default::default()
    }]
}

/// A rule for `verbs` on `resources` of `api_group` (`""` is the core group).
pub fn rule(api_group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![api_group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..Default::default()
    }
}

fn meta(name: &str, ns: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(ns.to_owned()),
        ..Default::default()
    }
}

/// Creates ServiceAccount `ns/name`.
pub async fn create_service_account(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<ServiceAccount> {
    let sa = ServiceAccount {
        metadata: meta(name, ns),
        ..Default::default()
    };
    Ok(Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await?)
}

/// Creates Role `ns/name` with `rules`.
pub async fn create_role(
    client: &Client,
    ns: &str,
    name: &str,
    rules: Vec<PolicyRule>,
) -> Result<Role> {
    let role = Role {
        metadata: meta(name, ns),
        rules: Some(rules),
    };
    Ok(Api::<Role>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &role)
        .await?)
}

/// Binds Role `ns/role` to `subject` with RoleBinding `ns/binding`.
pub async fn bind_role(
    client: &Client,
    ns: &str,
    binding: &str,
    role: &str,
    subject: Subject,
) -> Result<RoleBinding> {
    let rb = RoleBinding {
        metadata: meta(binding, ns),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: role.to_owned(),
        },
        subjects: Some(vec![subject]),
    };
    Ok(Api::<RoleBinding>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rb)
        .await?)
}

/// The RBAC subject for ServiceAccount `ns/sa`.
pub fn service_account_subject(sa: &str, ns: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: sa.to_owned(),
        namespace: Some(ns.to_owned()),
        api_group: None,
    }
}

/// The RBAC subject for a group (e.g. `system:serviceaccounts:<ns>`).
pub fn group_subject(group: &str) -> Subject {
    Subject {
        kind: "Group".into(),
        name: group.to_owned(),
        namespace: None,
        api_group: Some("rbac.authorization.k8s.io".into()),
    }
}

/// Creates ServiceAccount `ns/sa` plus a Role and RoleBinding (both named `sa`) granting
/// it `rules` in `ns`.
pub async fn service_account_with_role(
    client: &Client,
    ns: &str,
    sa: &str,
    rules: Vec<PolicyRule>,
) -> Result<()> {
    create_service_account(client, ns, sa).await?;
    create_role(client, ns, sa, rules).await?;
    bind_role(client, ns, sa, sa, service_account_subject(sa, ns)).await?;
    Ok(())
}
