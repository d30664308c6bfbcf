//! Addressing arbitrary objects by [`ResourceId`] through discovery.

use kube::Client;
use kube::api::{Api, DynamicObject};
use opm_core::{ApiError, ResourceId};
use serde_json::Value;

use crate::kube::discovery::{Resolved, Resolver};
use crate::kube::object_watch::ObjectWatch;

/// The dynamic API for `id` (namespaced or cluster-wide as discovery says).
pub async fn api_for(
    client: Client,
    resolver: &Resolver,
    id: &ResourceId,
) -> Result<Api<DynamicObject>, ApiError> {
    let r = resolver.resolve(&id.group, &id.version, &id.kind).await?;
    same_scope(&r, id)?;
    Ok(api_of(client, &r, id))
}

/// [`api_for`] for an object we apply or check, starting the managed-object watch of its
/// kind on first use.
pub async fn watched_api_for(
    client: Client,
    resolver: &Resolver,
    watch: &ObjectWatch,
    id: &ResourceId,
) -> Result<Api<DynamicObject>, ApiError> {
    let r = resolver.resolve(&id.group, &id.version, &id.kind).await?;
    same_scope(&r, id)?;
    watch.ensure(id, &r.resource);
    Ok(api_of(client, &r, id))
}

/// The core decided the object's scope when it built it (a namespace = namespaced; SPEC
/// §15 confines the operator's identity by it). Should discovery now call a kind with a
/// namespace cluster-scoped (unknown at render time, or changed since), the request would
/// write outside that namespace: refuse it, transiently, so the next attempt renders and
/// decides again.
fn same_scope(r: &Resolved, id: &ResourceId) -> Result<(), ApiError> {
    if r.namespaced || id.namespace.is_empty() {
        return Ok(());
    }
    Err(ApiError::Other {
        code: 0,
        message: format!(
            "{} was rendered as namespaced, but the API server serves {} cluster-scoped; \
             the next attempt renders it again",
            id.display(),
            id.kind
        ),
    })
}

fn api_of(client: Client, r: &Resolved, id: &ResourceId) -> Api<DynamicObject> {
    if r.namespaced {
        Api::namespaced_with(client, &id.namespace, &r.resource)
    } else {
        Api::all_with(client, &r.resource)
    }
}

/// Whole object as JSON (for comparisons).
pub fn to_value(obj: &DynamicObject) -> Value {
    serde_json::to_value(obj).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;

    fn resolved(namespaced: bool) -> Resolved {
        Resolved {
            resource: ApiResource {
                group: "example.com".into(),
                version: "v1".into(),
                api_version: "example.com/v1".into(),
                kind: "Widget".into(),
                plural: "widgets".into(),
            },
            namespaced,
        }
    }

    fn id(namespace: &str) -> ResourceId {
        ResourceId {
            group: "example.com".into(),
            version: "v1".into(),
            kind: "Widget".into(),
            namespace: namespace.into(),
            name: "w".into(),
        }
    }

    #[test]
    fn a_namespaced_object_is_never_sent_to_a_cluster_scoped_kind() {
        assert!(same_scope(&resolved(true), &id("demo")).is_ok());
        assert!(same_scope(&resolved(false), &id("")).is_ok());
        let e = same_scope(&resolved(false), &id("demo")).unwrap_err();
        assert!(
            e.to_string()
                .contains("Widget/demo/w was rendered as namespaced"),
            "{e}"
        );
    }
}
