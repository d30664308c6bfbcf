//! The `AssessHealth` executor (SPEC §26), policy-free: read each target's JSON and, when
//! asked, its newest pods; the core judges them.
//!
//! The managed-object watch keeps only versions, so the object itself is one GET under the
//! release's identity, unless the watch shows it still at the version read last time: then
//! the copy kept from that read answers (a status change moves `resourceVersion`, so an
//! unchanged version is an unchanged status). A wait of a hundred releases therefore costs
//! one GET per object per real change, not per attempt.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::{Api, ListParams};
use opm_core::effect::{HEALTH_POD_LIMIT, HealthTarget};
use opm_core::input::HealthObject;
use opm_core::{ApiError, ResourceId};
use serde_json::Value;

use crate::kube::api_error;
use crate::kube::discovery::Resolver;
use crate::kube::dynamic;
use crate::kube::object_watch::ObjectWatch;

/// (reader, group, kind, namespace, name): the reader is the user the GET was sent as
/// (`system:serviceaccount:…`, empty for the operator).
type Identity = (String, String, String, String, String);

/// Objects read for their health, by reader and object, with the version they were read
/// at. A copy serves only a reader with the same identity (SPEC §26): a release whose
/// ServiceAccount may not read an object never gets it from another release's read.
#[derive(Default)]
pub struct HealthCache {
    objects: Mutex<HashMap<Identity, (String, Value)>>,
}

/// More than this many cached objects and the cache starts over (it is only a saving).
const CACHE_MAX: usize = 10_000;

fn key(reader: &str, id: &ResourceId) -> Identity {
    (
        reader.to_string(),
        id.group.clone(),
        id.kind.clone(),
        id.namespace.clone(),
        id.name.clone(),
    )
}

impl HealthCache {
    fn get(&self, reader: &str, id: &ResourceId, version: &str) -> Option<Value> {
        let map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&key(reader, id))
            .filter(|(v, _)| v == version)
            .map(|(_, o)| o.clone())
    }

    fn put(&self, reader: &str, id: &ResourceId, obj: &Value) {
        let Some(version) = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        else {
            return;
        };
        let mut map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= CACHE_MAX {
            map.clear();
        }
        map.insert(key(reader, id), (version.to_string(), obj.clone()));
    }
}

/// Where a read looks: the managed-object watch and the cache, and who reads.
pub(crate) struct Readers<'a> {
    pub resolver: &'a Resolver,
    pub watch: &'a ObjectWatch,
    pub cache: &'a HealthCache,
    /// The user `client` sends requests as; empty for the operator.
    pub reader: &'a str,
}

/// Reads every target, in order, with `client` (the release's effective identity).
pub(crate) async fn read(
    client: Client,
    at: Readers<'_>,
    targets: &[HealthTarget],
) -> Vec<HealthObject> {
    let mut out = Vec::with_capacity(targets.len());
    for t in targets {
        let result = read_one(client.clone(), &at, &t.id).await;
        let pods = match (&result, t.pods) {
            (Ok(Some(obj)), true) => newest_pods(client.clone(), &t.id, obj)
                .await
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        out.push(HealthObject {
            id: t.id.clone(),
            result,
            pods,
        });
    }
    out
}

async fn read_one(
    client: Client,
    at: &Readers<'_>,
    id: &ResourceId,
) -> Result<Option<Value>, ApiError> {
    let (watch, cache) = (at.watch, at.cache);
    let api = match dynamic::watched_api_for(client, at.resolver, watch, id).await {
        Ok(api) => api,
        Err(ApiError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if let Some(version) = watch.version(id)
        && let Some(obj) = cache.get(at.reader, id, &version)
    {
        return Ok(Some(obj));
    }
    match api.get_opt(&id.name).await {
        Ok(None) => Ok(None),
        Ok(Some(o)) => {
            let mut v = serde_json::to_value(&o).map_err(|e| ApiError::Other {
                code: 0,
                message: format!("reading {} as JSON failed: {e}", id.display()),
            })?;
            strip(&mut v);
            cache.put(at.reader, id, &v);
            Ok(Some(v))
        }
        Err(e) => Err(api_error::from_kube(&e)),
    }
}

/// What health never reads and traces need not carry.
fn strip(v: &mut Value) {
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
}

/// `spec.selector.matchLabels` as a label selector (`matchExpressions` are not needed to
/// find a workload's pods: every built-in workload sets matchLabels in practice).
fn selector(obj: &Value) -> Option<String> {
    let labels = obj.pointer("/spec/selector/matchLabels")?.as_object()?;
    if labels.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
        .collect();
    parts.sort();
    Some(parts.join(","))
}

/// The newest pods the workload selects (one bounded LIST), newest first, with only what
/// explains them: name, creation time, status.
async fn newest_pods(client: Client, id: &ResourceId, obj: &Value) -> Option<Vec<Value>> {
    let sel = selector(obj)?;
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, &id.namespace);
    // A LIST cannot sort; a bounded page of the selected pods is enough to find one that
    // says why (they share a template).
    let lp = ListParams::default().labels(&sel).limit(50);
    let list = api.list(&lp).await.ok()?;
    let mut pods: Vec<_> = list.items;
    pods.sort_by(|a, b| {
        b.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .cmp(&a.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    Some(
        pods.into_iter()
            .take(HEALTH_POD_LIMIT)
            .map(|p| {
                serde_json::json!({
                    "metadata": {"name": p.metadata.name, "creationTimestamp": p.metadata.creation_timestamp},
                    "status": p.status,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_selector_is_sorted_and_skips_non_strings() {
        let d = json!({"spec": {"selector": {"matchLabels": {"b": "2", "a": "1", "c": 3}}}});
        assert_eq!(selector(&d).as_deref(), Some("a=1,b=2"));
        assert_eq!(selector(&json!({"spec": {}})), None);
    }

    #[test]
    fn the_cache_answers_only_for_the_same_version_and_reader() {
        let c = HealthCache::default();
        let id = ResourceId {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: "demo".into(),
            name: "web".into(),
            version: "v1".into(),
        };
        let a = "system:serviceaccount:demo:a";
        c.put(
            a,
            &id,
            &json!({"metadata": {"resourceVersion": "7"}, "status": {"x": 1}}),
        );
        assert!(c.get(a, &id, "7").is_some());
        assert!(c.get(a, &id, "8").is_none());
        // Another identity (or the operator) never gets what `a` read (SPEC §26).
        assert!(c.get("system:serviceaccount:other:b", &id, "7").is_none());
        assert!(c.get("", &id, "7").is_none());
    }

    #[test]
    fn managed_fields_are_not_kept() {
        let mut v = json!({"metadata": {"name": "x", "managedFields": [{}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "k": "v"}}});
        strip(&mut v);
        assert_eq!(
            v,
            json!({"metadata": {"name": "x", "annotations": {"k": "v"}}})
        );
    }
}
