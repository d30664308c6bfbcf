//! GVK → API resource and scope, from the API server's discovery, cached per kind. A miss
//! asks the server again (one request for that group/version), so a CRD applied in stage 1
//! is found for stage 3 of the same attempt; failures are never cached.

use std::collections::HashMap;
use std::sync::RwLock;

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use opm_core::ApiError;
use opm_core::input::GroupKind;
use serde_json::Value;

use crate::kube::api_error;

/// A resolved kind.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The API resource serving the kind.
    pub resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Cached discovery, shared by all attempts.
pub struct Resolver {
    client: Client,
    cache: RwLock<HashMap<GroupVersionKind, Resolved>>,
}

impl Resolver {
    /// An empty cache that discovers with `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// Resolves `group/version/kind`; a kind the server does not serve is `NotFound`.
    pub async fn resolve(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Result<Resolved, ApiError> {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        if let Some(hit) = self.read_cache(&gvk) {
            return Ok(hit);
        }
        let (resource, caps): (ApiResource, ApiCapabilities) =
            kube::discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|e| match e {
                    kube::Error::Discovery(d) => ApiError::NotFound {
                        message: format!("no kind {kind} in {}: {d}", gvk.api_version()),
                    },
                    other => api_error::from_kube(&other),
                })?;
        let resolved = Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        self.cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(gvk, resolved.clone());
        Ok(resolved)
    }

    /// Forgets a kind (e.g. after its CRD changed) so the next resolve asks the server.
    pub fn forget(&self, group: &str, version: &str, kind: &str) {
        self.cache
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&GroupVersionKind::gvk(group, version, kind));
    }

    fn read_cache(&self, gvk: &GroupVersionKind) -> Option<Resolved> {
        self.cache
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(gvk)
            .cloned()
    }

    /// The cluster-scoped kinds among `objects` (apiVersion/kind values): those discovery
    /// knows as cluster-scoped, plus kinds defined by cluster-scoped CRDs in `objects`
    /// themselves. Unknown kinds are left out (treated as namespaced by the core).
    pub async fn cluster_scoped(&self, objects: &[&Value]) -> Vec<GroupKind> {
        let mut out: Vec<GroupKind> = Vec::new();
        for &obj in objects {
            if let Some(gk) = crd_defined_cluster_kind(obj) {
                out.push(gk);
            }
        }
        for &obj in objects {
            let (Some(api_version), Some(kind)) = (
                obj.get("apiVersion").and_then(Value::as_str),
                obj.get("kind").and_then(Value::as_str),
            ) else {
                continue;
            };
            let (group, version) = opm_core::object::split_api_version(api_version);
            let gk = GroupKind {
                group: group.clone(),
                kind: kind.to_string(),
            };
            if out.contains(&gk) {
                continue;
            }
            if let Ok(r) = self.resolve(&group, &version, kind).await
                && !r.namespaced
            {
                out.push(gk);
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// A CRD manifest with `spec.scope: Cluster` defines a cluster-scoped kind.
fn crd_defined_cluster_kind(obj: &Value) -> Option<GroupKind> {
    if obj.get("kind")?.as_str()? != "CustomResourceDefinition" {
        return None;
    }
    let spec = obj.get("spec")?;
    if spec.get("scope")?.as_str()? != "Cluster" {
        return None;
    }
    Some(GroupKind {
        group: spec.get("group")?.as_str()?.to_string(),
        kind: spec.get("names")?.get("kind")?.as_str()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_scoped_crd_defines_a_cluster_kind() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"group": "x.dev", "scope": "Cluster", "names": {"kind": "Widget"}}});
        assert_eq!(
            crd_defined_cluster_kind(&crd),
            Some(GroupKind {
                group: "x.dev".into(),
                kind: "Widget".into()
            })
        );
        let namespaced = json!({"kind": "CustomResourceDefinition",
            "spec": {"group": "x.dev", "scope": "Namespaced", "names": {"kind": "Widget"}}});
        assert_eq!(crd_defined_cluster_kind(&namespaced), None);
    }
}
