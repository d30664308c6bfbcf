//! Apply of one object that carries a per-object policy (SPEC §28), executing what the
//! core decided: whether to write at all ([`opm_core::policy::write_plan`]: `ssa:
//! IfNotPresent` creates but never updates, `Ignore` never writes); ignore rules and
//! `ssa: Merge` shape the manifest against the live object ([`opm_core::policy::prepare`]);
//! `force: enabled` deletes and recreates the object, with a UID precondition, when the
//! core says so ([`opm_core::policy::recreate`]: a typed immutability refusal, never a
//! Namespace, CRD, PV or PVC).
//!
//! These objects always get a GET: what is applied depends on the live object.

use std::time::Duration;

use kube::api::{DeleteParams, Preconditions};
use opm_core::ApiError;
use opm_core::input::ApplyAction;
use opm_core::policy;
use serde_json::Value;

use crate::kube::compare::same_object;
use crate::kube::{api_error, dynamic};
use crate::steps::server_apply::{Target, committed, dry_run_kube, read_live, unchanged};

/// How long a recreated object's predecessor may take to go away.
pub const RECREATE_DEADLINE: Duration = Duration::from_secs(60);

/// Applies `t`'s object as its policy says; see the module docs.
pub(crate) async fn apply_with_policy(
    t: &Target<'_>,
    manifest: &Value,
) -> Result<ApplyAction, ApiError> {
    let (ctx, api, obj) = (t.ctx, t.api, t.obj);
    let live = read_live(t).await?;
    // SPEC §28's write plan: `Ignore` never writes, `IfNotPresent` only creates.
    if !policy::write_plan(&obj.policy, live.is_some(), ctx.force).writes() {
        return Ok(ApplyAction::Unchanged);
    }
    let prepared = policy::prepare(manifest, live.as_ref(), &obj.policy, ctx.field_manager);
    let first = match &live {
        Some(l) => match dry_run_kube(api, &obj.id.name, t.params, &prepared).await {
            Ok(dry) if same_object(l, &dynamic::to_value(&dry)) => {
                return Ok(unchanged(t, l));
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        },
        None => Ok(()),
    };
    let refused = match first {
        Ok(()) => {
            return committed(t, &prepared, Some(live.is_none())).await;
        }
        Err(e) => e,
    };
    let decided = policy::recreate::recreate(&obj.id, obj.policy.force, &refusal(&refused));
    match (&live, decided) {
        (Some(l), true) => recreate(t, manifest, l).await,
        _ => Err(api_error::from_kube(&refused)),
    }
}

/// The API server's refusal as the core reads it: its code and `details.causes`, copied
/// from the Status it answered (nothing parsed from its message).
pub fn refusal(err: &kube::Error) -> policy::recreate::Refusal {
    match err {
        kube::Error::Api(s) => policy::recreate::Refusal {
            code: s.code,
            causes: s
                .details
                .iter()
                .flat_map(|d| &d.causes)
                .map(|c| policy::recreate::Cause {
                    reason: c.reason.clone(),
                    field: c.field.clone(),
                    message: c.message.clone(),
                })
                .collect(),
        },
        _ => policy::recreate::Refusal::default(),
    }
}

/// Whether the API server refused because an immutable field would change (typed: see
/// [`opm_core::policy::recreate::immutable`]).
pub fn immutable(err: &kube::Error) -> bool {
    policy::recreate::immutable(&refusal(err))
}

/// Deletes the live object (the one read, by UID), waits until it is gone, and applies the
/// desired object anew.
async fn recreate(t: &Target<'_>, manifest: &Value, live: &Value) -> Result<ApplyAction, ApiError> {
    let (ctx, api, obj) = (t.ctx, t.api, t.obj);
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
    committed(t, &prepared, Some(true)).await?;
    Ok(ApplyAction::Recreated)
}
