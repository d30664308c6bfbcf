//! Addressing arbitrary objects by [`ResourceId`] through discovery.

use kube::Client;
use kube::api::{Api, DynamicObject};
use opm_core::{ApiError, ResourceId};
use serde_json::Value;

use crate::discovery::{Resolved, Resolver};
use crate::object_watch::ObjectWatch;

/// The dynamic API for `id` (namespaced or cluster-wide as discovery says).
pub async fn api_for(
    client: Client,
    resolver: &Resolver,
    id: &ResourceId,
) -> Result<Api<DynamicObject>, ApiError> {
    let r = resolver.resolve(&id.group, &id.version, &id.kind).await?;
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
    watch.ensure(id, &r.resource);
    Ok(api_of(client, &r, id))
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
