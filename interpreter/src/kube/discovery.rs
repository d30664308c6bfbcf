//! GVK → API resource and scope, from the API server's discovery, cached per kind.
//!
//! A kind found is kept until [`Resolver::forget`] (a CRD this operator applied). A kind
//! not found is answered from what the server said for a short while
//! ([`MISSING_FOR`], issue 31 item 9): the served groups (`/apis`, one request) and each
//! group/version's resource list are remembered, so a render naming 5 000 kinds the
//! server does not serve costs one or two discovery requests, not 5 000, on every attempt.
//! A CRD applied in stage 1 is still found for stage 3 of the same attempt: the apply
//! forgets what was remembered for its group/versions once discovery serves them. A CRD
//! installed by someone else is seen within [`MISSING_FOR`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
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

/// How long discovery's answer for a kind not found (its group/version's resource list,
/// or the served groups) is reused.
pub const MISSING_FOR: Duration = Duration::from_secs(10);

/// What the server said about one group/version.
#[derive(Clone)]
enum Listing {
    Served(Arc<APIResourceList>),
    NotServed,
}

/// Cached discovery, shared by all attempts.
pub struct Resolver {
    client: Client,
    cache: RwLock<HashMap<GroupVersionKind, Resolved>>,
    /// Resource lists by group/version (`apps/v1`, `v1`), with when they were read.
    listings: RwLock<HashMap<String, (Instant, Listing)>>,
    /// The group/versions the server serves (`/apis`), with when they were read.
    groups: RwLock<Option<(Instant, Arc<HashSet<String>>)>>,
    /// Discovery requests sent.
    requests: AtomicU64,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

impl Resolver {
    /// An empty cache that discovers with `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            cache: RwLock::new(HashMap::new()),
            listings: RwLock::new(HashMap::new()),
            groups: RwLock::new(None),
            requests: AtomicU64::new(0),
        }
    }

    /// Discovery requests sent so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
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
        let gv = gvk.api_version();
        let list = match self.listing(group, &gv).await? {
            Listing::Served(list) => list,
            Listing::NotServed => {
                return Err(ApiError::NotFound {
                    message: format!("no kind {kind} in {gv}: the server does not serve {gv}"),
                });
            }
        };
        let Some(res) = list
            .resources
            .iter()
            .find(|r| r.kind == kind && !r.name.contains('/'))
        else {
            return Err(ApiError::NotFound {
                message: format!("no kind {kind} in {gv}"),
            });
        };
        let resolved = Resolved {
            resource: ApiResource {
                group: res.group.clone().unwrap_or_else(|| group.to_owned()),
                version: res.version.clone().unwrap_or_else(|| version.to_owned()),
                api_version: gv,
                kind: res.kind.clone(),
                plural: res.name.clone(),
            },
            namespaced: res.namespaced,
        };
        write(&self.cache).insert(gvk, resolved.clone());
        Ok(resolved)
    }

    /// The resource list of `gv`, remembered for [`MISSING_FOR`]; a group the server does
    /// not serve is known from `/apis` without asking for its version.
    async fn listing(&self, group: &str, gv: &str) -> Result<Listing, ApiError> {
        if let Some((at, l)) = read(&self.listings).get(gv)
            && at.elapsed() < MISSING_FOR
        {
            return Ok(l.clone());
        }
        let listing = if !group.is_empty() && !self.served_groups().await?.contains(gv) {
            Listing::NotServed
        } else {
            self.requests.fetch_add(1, Ordering::Relaxed);
            let answer = if group.is_empty() {
                self.client.list_core_api_resources(gv).await
            } else {
                self.client.list_api_group_resources(gv).await
            };
            match answer {
                Ok(list) => Listing::Served(Arc::new(list)),
                Err(e) if api_error::is_not_found(&e) => Listing::NotServed,
                Err(e) => return Err(api_error::from_kube(&e)),
            }
        };
        let mut listings = write(&self.listings);
        // Bounded by what the server serves plus the names asked for within MISSING_FOR.
        listings.retain(|_, (at, _)| at.elapsed() < MISSING_FOR);
        listings.insert(gv.to_owned(), (Instant::now(), listing.clone()));
        Ok(listing)
    }

    /// Every `group/version` of `/apis`, remembered for [`MISSING_FOR`].
    async fn served_groups(&self) -> Result<Arc<HashSet<String>>, ApiError> {
        if let Some((at, g)) = read(&self.groups).as_ref()
            && at.elapsed() < MISSING_FOR
        {
            return Ok(g.clone());
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let list = self
            .client
            .list_api_groups()
            .await
            .map_err(|e| api_error::from_kube(&e))?;
        let served: HashSet<String> = list
            .groups
            .iter()
            .flat_map(|g| g.versions.iter().map(|v| v.group_version.clone()))
            .collect();
        let served = Arc::new(served);
        *write(&self.groups) = Some((Instant::now(), served.clone()));
        Ok(served)
    }

    /// Forgets a kind (e.g. after its CRD changed) so the next resolve asks the server, and
    /// what was remembered about its group/version.
    pub fn forget(&self, group: &str, version: &str, kind: &str) {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        write(&self.listings).remove(&gvk.api_version());
        *write(&self.groups) = None;
        write(&self.cache).remove(&gvk);
    }

    fn read_cache(&self, gvk: &GroupVersionKind) -> Option<Resolved> {
        read(&self.cache).get(gvk).cloned()
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
