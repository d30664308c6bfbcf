//! ServiceAccounts and what each may do when the operator impersonates it (SPEC §15).
//!
//! Requests without an identity run as the operator, which may do everything. An identity
//! whose ServiceAccount has no grant (or does not exist) is refused, as the API server's
//! RBAC would refuse a user with no bindings.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use opm_core::effect::Impersonation;
use opm_core::input::{ApiError, GroupKind};
use opm_core::object::ResourceId;

/// What a request does to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Verb {
    /// Read an object (GET), e.g. for ownership, stale or health reads.
    Get,
    /// Create or patch (server-side apply, including dry-run).
    Apply,
    /// Delete an object, as a prune does (orphaning is an `Apply`).
    Delete,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Apply => "patch",
            Verb::Delete => "delete",
        }
    }
}

/// One role binding: verbs on kinds. A `Role` in the ServiceAccount's namespace unless
/// `cluster_wide` (a `ClusterRoleBinding`: every namespace and cluster-scoped kinds).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// What the binding allows on the kinds it covers.
    pub verbs: BTreeSet<Verb>,
    /// `None`: every kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<BTreeSet<GroupKind>>,
    /// A `ClusterRoleBinding`: every namespace and cluster-scoped kinds, not only its own.
    #[serde(default)]
    pub cluster_wide: bool,
}

impl Grant {
    /// Every verb on every kind in the ServiceAccount's own namespace.
    pub fn namespace_admin() -> Self {
        Self {
            verbs: BTreeSet::from([Verb::Get, Verb::Apply, Verb::Delete]),
            kinds: None,
            cluster_wide: false,
        }
    }

    /// Every verb on every kind everywhere.
    pub fn cluster_admin() -> Self {
        Self {
            cluster_wide: true,
            ..Self::namespace_admin()
        }
    }

    fn allows(&self, sa_ns: &str, verb: Verb, id: &ResourceId, cluster_scoped: bool) -> bool {
        let where_ok = self.cluster_wide || (!cluster_scoped && id.namespace == sa_ns);
        let kind_ok = self
            .kinds
            .as_ref()
            .is_none_or(|ks| ks.iter().any(|k| k.group == id.group && k.kind == id.kind));
        where_ok && kind_ok && self.verbs.contains(&verb)
    }
}

/// ServiceAccounts by (namespace, name) with their grants.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rbac {
    accounts: BTreeSet<(String, String)>,
    grants: BTreeMap<(String, String), Vec<Grant>>,
}

impl Rbac {
    /// Creates the ServiceAccount; bindings made for it earlier take effect.
    pub fn create_account(&mut self, namespace: &str, name: &str) {
        self.accounts
            .insert((namespace.to_string(), name.to_string()));
    }

    /// Deletes the ServiceAccount; its bindings stay, but requests as it are Forbidden.
    pub fn delete_account(&mut self, namespace: &str, name: &str) {
        self.accounts
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Whether the ServiceAccount exists, as `CheckServiceAccount` asks.
    pub fn account_exists(&self, namespace: &str, name: &str) -> bool {
        self.accounts
            .contains(&(namespace.to_string(), name.to_string()))
    }

    /// Bindings outlive the account, as in Kubernetes.
    pub fn grant(&mut self, namespace: &str, name: &str, grant: Grant) {
        self.grants
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .push(grant);
    }

    /// Removes every binding of the ServiceAccount; the account stays.
    pub fn revoke_all(&mut self, namespace: &str, name: &str) {
        self.grants
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// `Ok` when the request may proceed; the API server's Forbidden otherwise.
    pub fn authorize(
        &self,
        identity: Option<&Impersonation>,
        verb: Verb,
        id: &ResourceId,
        cluster_scoped: bool,
    ) -> Result<(), ApiError> {
        let Some(who) = identity else {
            return Ok(());
        };
        let key = (who.namespace.clone(), who.service_account.clone());
        let allowed = self.accounts.contains(&key)
            && self
                .grants
                .get(&key)
                .into_iter()
                .flatten()
                .any(|g| g.allows(&who.namespace, verb, id, cluster_scoped));
        if allowed {
            return Ok(());
        }
        let plural = format!("{}s", id.kind.to_lowercase());
        let resource = if id.group.is_empty() {
            plural
        } else {
            format!("{plural}.{}", id.group)
        };
        let scope = if cluster_scoped || id.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", id.namespace)
        };
        Err(ApiError::Forbidden {
            message: format!(
                "{resource} \"{}\" is forbidden: User \"{}\" cannot {} resource \"{resource}\" {scope}",
                id.name,
                who.user,
                verb.as_str()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(ns: &str, sa: &str) -> Impersonation {
        Impersonation {
            namespace: ns.into(),
            service_account: sa.into(),
            user: format!("system:serviceaccount:{ns}:{sa}"),
        }
    }

    fn id(ns: &str, kind: &str) -> ResourceId {
        ResourceId {
            kind: kind.into(),
            namespace: ns.into(),
            name: "x".into(),
            version: "v1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn operator_identity_may_do_everything() {
        let r = Rbac::default();
        assert!(
            r.authorize(None, Verb::Delete, &id("", "Namespace"), true)
                .is_ok()
        );
    }

    #[test]
    fn namespace_admin_stays_in_its_namespace() {
        let mut r = Rbac::default();
        r.create_account("demo", "deployer");
        r.grant("demo", "deployer", Grant::namespace_admin());
        let w = who("demo", "deployer");
        assert!(
            r.authorize(Some(&w), Verb::Apply, &id("demo", "ConfigMap"), false)
                .is_ok()
        );
        let err = r
            .authorize(Some(&w), Verb::Apply, &id("other", "ConfigMap"), false)
            .unwrap_err();
        assert_eq!(
            err,
            ApiError::Forbidden {
                message: "configmaps \"x\" is forbidden: User \"system:serviceaccount:demo:deployer\" cannot patch resource \"configmaps\" in the namespace \"other\"".into()
            }
        );
        assert!(
            r.authorize(Some(&w), Verb::Apply, &id("", "Namespace"), true)
                .is_err()
        );
    }

    #[test]
    fn kinds_and_verbs_limit_and_missing_account_is_refused() {
        let mut r = Rbac::default();
        r.grant(
            "demo",
            "ro",
            Grant {
                verbs: BTreeSet::from([Verb::Get, Verb::Apply]),
                kinds: Some(BTreeSet::from([GroupKind {
                    group: String::new(),
                    kind: "ConfigMap".into(),
                }])),
                cluster_wide: false,
            },
        );
        let w = who("demo", "ro");
        // The binding exists but the account does not yet.
        assert!(
            r.authorize(Some(&w), Verb::Get, &id("demo", "ConfigMap"), false)
                .is_err()
        );
        r.create_account("demo", "ro");
        assert!(
            r.authorize(Some(&w), Verb::Get, &id("demo", "ConfigMap"), false)
                .is_ok()
        );
        assert!(
            r.authorize(Some(&w), Verb::Delete, &id("demo", "ConfigMap"), false)
                .is_err()
        );
        assert!(
            r.authorize(Some(&w), Verb::Get, &id("demo", "Secret"), false)
                .is_err()
        );
    }
}
