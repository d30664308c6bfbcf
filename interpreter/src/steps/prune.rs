//! Prune's two API steps (SPEC §9), policy-free: inspect stale objects (uid and labels, for
//! the core's ownership guards) and delete the ones the core chose with a UID precondition,
//! in the given order, continuing past errors.

use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions, PropagationPolicy};
use opm_core::constants::{FIELD_MANAGER, labels};
use opm_core::effect::Deletion;
use opm_core::input::{LiveObject, ObjectResult};
use opm_core::{ApiError, ResourceId};

use crate::kube::discovery::Resolver;
use crate::{kube::api_error, kube::dynamic};

/// GETs each target, without asking the managed-object watch; a kind the server no longer
/// serves has no live objects.
pub(crate) async fn inspect(
    client: Client,
    resolver: &Resolver,
    targets: &[ResourceId],
) -> Vec<LiveObject> {
    crate::steps::owners::inspect(client, resolver, None, targets).await
}

/// DELETEs each object with its UID as precondition; an object already gone is a success.
pub(crate) async fn delete(
    client: Client,
    resolver: &Resolver,
    deletions: &[Deletion],
) -> Vec<ObjectResult> {
    let mut out = Vec::with_capacity(deletions.len());
    for d in deletions {
        let result = delete_one(client.clone(), resolver, d).await;
        out.push(ObjectResult {
            id: d.id.clone(),
            result,
        });
    }
    out
}

async fn delete_one(client: Client, resolver: &Resolver, d: &Deletion) -> Result<(), ApiError> {
    let api = dynamic::api_for(client, resolver, &d.id).await?;
    if d.orphan {
        return orphan_one(&api, d).await;
    }
    if d.resume {
        return resume_one(&api, d).await;
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(d.uid.clone()),
            resource_version: None,
        }),
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api.delete(&d.id.name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if api_error::is_not_found(&e) => Ok(()),
        Err(e) => Err(api_error::from_kube(&e)),
    }
}

/// Resumes a suspended `pre-delete` hook Job (SPEC §32): one merge patch of
/// `spec.suspend`, carrying the uid like a precondition (409 on a successor).
async fn resume_one(
    api: &kube::Api<kube::api::DynamicObject>,
    d: &Deletion,
) -> Result<(), ApiError> {
    let patch = serde_json::json!({"metadata": {"uid": d.uid}, "spec": {"suspend": false}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match api.patch(&d.id.name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) => Err(api_error::from_kube(&e)),
    }
}

/// Orphans a `prune: disabled` object (SPEC §28): one merge patch removing the labels the
/// operator stamped, so no release claims it and another may adopt it. The patch carries the
/// uid, which the API server checks like a precondition (409 on a successor).
async fn orphan_one(
    api: &kube::Api<kube::api::DynamicObject>,
    d: &Deletion,
) -> Result<(), ApiError> {
    let removed: serde_json::Map<String, serde_json::Value> = labels::STAMPED
        .iter()
        .map(|k| (k.to_string(), serde_json::Value::Null))
        .collect();
    let patch = serde_json::json!({"metadata": {"uid": d.uid, "labels": removed}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match api.patch(&d.id.name, &params, &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if api_error::is_not_found(&e) => Ok(()),
        Err(e) => Err(api_error::from_kube(&e)),
    }
}
