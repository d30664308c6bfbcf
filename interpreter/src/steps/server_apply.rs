//! The server-side apply primitives both apply paths share ([`crate::steps::apply`] for
//! objects without a policy, [`crate::steps::apply_policy`] for those with one): the
//! context, the live read, the dry-run, and the write that records what it verified.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use opm_core::input::ApplyAction;
use opm_core::{ApiError, DesiredObject};
use serde_json::Value;

use crate::cue::secrets::SecretTable;
use crate::kube::discovery::Resolver;
use crate::kube::live_cache::{self, LiveCache};
use crate::kube::object_watch::ObjectWatch;
use crate::{kube::api_error, kube::dynamic};

/// Everything one Apply effect needs besides its payload.
pub(crate) struct ApplyCtx<'a> {
    pub client: Client,
    /// The operator's client: reads CRD conditions for the Established wait.
    pub operator: Client,
    pub resolver: &'a Resolver,
    pub secrets: &'a SecretTable,
    pub field_manager: &'a str,
    pub force: bool,
    /// Live object versions seen before: lets an unchanged object skip its GET.
    pub live: &'a LiveCache,
    /// Which objects carry our label: lets a new object skip its GET and dry-run.
    pub watch: &'a ObjectWatch,
    /// The impersonated user, or empty for the operator itself.
    pub identity: &'a str,
}

/// One object's apply: the object, its API, the patch parameters, and the digest of what it
/// holds once written (what the live cache records as verified).
pub(crate) struct Target<'a> {
    pub(crate) ctx: &'a ApplyCtx<'a>,
    pub(crate) api: &'a Api<DynamicObject>,
    pub(crate) obj: &'a DesiredObject,
    pub(crate) params: &'a PatchParams,
    pub(crate) desired: [u8; 32],
}

/// Writes `manifest` and records the written version as verified. `created` says whether
/// the object existed; `None` when unknown, then the write's answer tells.
pub(crate) async fn committed(
    t: &Target<'_>,
    manifest: &Value,
    created: Option<bool>,
) -> Result<ApplyAction, ApiError> {
    let live = write(t.ctx, t.api, t.obj, t.params, manifest).await?;
    if let Some(rv) = live_cache::resource_version(&live) {
        t.ctx.live.verify(&t.obj.id, rv, t.desired);
    }
    Ok(
        if created.unwrap_or_else(|| only_managed_by(&live, t.ctx.field_manager)) {
            ApplyAction::Created
        } else {
            ApplyAction::Updated
        },
    )
}

/// Whether `manager` is the only field manager of `obj`: an object our write created
/// (one that existed before carries its creator's entry).
fn only_managed_by(obj: &Value, manager: &str) -> bool {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|mf| {
            mf.iter()
                .all(|e| e.get("manager").and_then(Value::as_str) == Some(manager))
        })
}

/// A server-side dry-run of the apply: what the object would become.
pub(crate) async fn dry_run(
    api: &Api<DynamicObject>,
    name: &str,
    params: &PatchParams,
    manifest: &Value,
) -> Result<DynamicObject, ApiError> {
    dry_run_kube(api, name, params, manifest)
        .await
        .map_err(|e| api_error::from_kube(&e))
}

/// [`dry_run`] with the API server's own error, for a caller that reads its Status.
pub(crate) async fn dry_run_kube(
    api: &Api<DynamicObject>,
    name: &str,
    params: &PatchParams,
    manifest: &Value,
) -> Result<DynamicObject, kube::Error> {
    api.patch(name, &params.clone().dry_run(), &Patch::Apply(manifest))
        .await
}

/// GETs the live object and remembers its version; `None` when it does not exist.
pub(crate) async fn read_live(t: &Target<'_>) -> Result<Option<Value>, ApiError> {
    let (ctx, obj) = (t.ctx, t.obj);
    let live = t
        .api
        .get_opt(&obj.id.name)
        .await
        .map_err(|e| api_error::from_kube(&e))?
        .map(|l| dynamic::to_value(&l));
    if let Some(l) = &live {
        ctx.live.remember(&obj.id, l);
    }
    Ok(live)
}

/// No write needed: records that `seen`'s version already holds what `t` wants.
pub(crate) fn unchanged(t: &Target<'_>, seen: &Value) -> ApplyAction {
    if let Some(rv) = live_cache::resource_version(seen) {
        t.ctx.live.verify(&t.obj.id, rv, t.desired);
    }
    ApplyAction::Unchanged
}

/// The real apply; what it returns is the new live object, remembered for the next attempt.
async fn write(
    ctx: &ApplyCtx<'_>,
    api: &Api<DynamicObject>,
    obj: &DesiredObject,
    params: &PatchParams,
    manifest: &Value,
) -> Result<Value, ApiError> {
    match api
        .patch(&obj.id.name, params, &Patch::Apply(manifest))
        .await
    {
        Ok(live) => {
            let live = dynamic::to_value(&live);
            ctx.live.remember(&obj.id, &live);
            Ok(live)
        }
        Err(e) => {
            ctx.live.forget(&obj.id);
            Err(api_error::from_kube(&e))
        }
    }
}

/// Both carry the same `resourceVersion`: the dry-run was based on that live version.
pub(crate) fn same_version(a: &Value, b: &Value) -> bool {
    let rv = live_cache::resource_version;
    rv(a).is_some() && rv(a) == rv(b)
}
