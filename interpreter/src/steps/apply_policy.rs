//! Apply of one object that carries a per-object policy (SPEC §28), executing what the
//! core decided: `ssa: IfNotPresent` creates but never updates; ignore rules and
//! `ssa: Merge` shape the manifest against the live object ([`opm_core::policy::prepare`]);
//! `force: enabled` deletes and recreates the object, with a UID precondition, when (and
//! only when) the API server refuses the apply because an immutable field changed.
//!
//! These objects always get a GET: what is applied depends on the live object.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PatchParams, Preconditions};
use opm_core::input::ApplyAction;
use opm_core::policy::{self, SsaPolicy};
use opm_core::{ApiError, DesiredObject};
use serde_json::Value;

use crate::kube::compare::same_object;
use crate::kube::{api_error, dynamic};
use crate::steps::server_apply::{ApplyCtx, committed, dry_run_kube, read_live, unchanged};

/// How long a recreated object's predecessor may take to go away.
pub const RECREATE_DEADLINE: Duration = Duration::from_secs(60);

pub(crate) async fn apply_with_policy(
    ctx: &ApplyCtx<'_>,
    api: &Api<DynamicObject>,
    obj: &DesiredObject,
    params: &PatchParams,
    manifest: &Value,
    desired: [u8; 32],
) -> Result<ApplyAction, ApiError> {
    let live = read_live(ctx, api, obj).await?;
    match (obj.policy.ssa, &live) {
        (SsaPolicy::IfNotPresent, Some(_)) | (SsaPolicy::Ignore, _) => {
            return Ok(ApplyAction::Unchanged);
        }
        _ => {}
    }
    let prepared = policy::prepare(manifest, live.as_ref(), &obj.policy, ctx.field_manager);
    let first = match &live {
        Some(l) => match dry_run_kube(api, &obj.id.name, params, &prepared).await {
            Ok(dry) if same_object(l, &dynamic::to_value(&dry)) => {
                return Ok(unchanged(ctx, obj, l, desired));
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        },
        None => Ok(()),
    };
    let refused = match first {
        Ok(()) => {
            return committed(
                ctx,
                api,
                obj,
                params,
                &prepared,
                desired,
                Some(live.is_none()),
            )
            .await;
        }
        Err(e) => e,
    };
    match (&live, obj.policy.force && immutable(&refused)) {
        (Some(l), true) => recreate(ctx, api, obj, params, manifest, desired, l).await,
        _ => Err(api_error::from_kube(&refused)),
    }
}

/// Whether the API server refused because an immutable field would change: a 422 whose
/// causes (or message) say the field is immutable. Read here, at the boundary, from the
/// server's own Status.
pub fn immutable(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(s) => s.code == 422 && s.message.contains("immutable"),
        _ => false,
    }
}

/// Deletes the live object (the one read, by UID), waits until it is gone, and applies the
/// desired object anew.
async fn recreate(
    ctx: &ApplyCtx<'_>,
    api: &Api<DynamicObject>,
    obj: &DesiredObject,
    params: &PatchParams,
    manifest: &Value,
    desired: [u8; 32],
    live: &Value,
) -> Result<ApplyAction, ApiError> {
    let name = &obj.id.name;
    let uid = live
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        propagation_policy: Some(kube::api::PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    tracing::info!(object = ?obj.id, "immutable field changed; recreating (force: enabled)");
    match api.delete(name, &dp).await {
        Ok(_) => {}
        Err(e) if api_error::is_not_found(&e) => {}
        Err(e) => return Err(api_error::from_kube(&e)),
    }
    ctx.live.forget(&obj.id);
    let gone = tokio::time::timeout(RECREATE_DEADLINE, async {
        loop {
            match api.get_opt(name).await {
                Ok(Some(o)) if o.metadata.uid.as_deref() == Some(uid.as_str()) => {}
                Ok(_) => return Ok(()),
                Err(e) => return Err(api_error::from_kube(&e)),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    match gone {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return Err(ApiError::Timeout {
                message: format!(
                    "{} was deleted to be recreated but is still there after {}s",
                    obj.id.display(),
                    RECREATE_DEADLINE.as_secs()
                ),
            });
        }
    }
    let prepared = policy::prepare(manifest, None, &obj.policy, ctx.field_manager);
    committed(ctx, api, obj, params, &prepared, desired, Some(true)).await?;
    Ok(ApplyAction::Recreated)
}
