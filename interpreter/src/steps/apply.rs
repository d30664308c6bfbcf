//! Staged server-side apply (SPEC §19), policy-free: the core chose the stages, the order,
//! the field manager and `force`. Per object: GET the live object, dry-run the apply, and
//! write only when the dry-run result differs from the live object; when the dry-run is
//! based on a version already seen ([`LiveCache`]) the GET is skipped, and when the
//! managed-object watch has listed the kind without this object ([`ObjectWatch`]) both are:
//! the object is missing or lacks our labels, so it must be written anyway. Objects of one
//! stage run concurrently (bounded); after a stage that applied CRDs, wait until they are
//! Established; stop after a stage with a failure. Never delete-and-recreate.

use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PatchParams};
use opm_core::effect::ApplyStage;
use opm_core::input::{AppliedObject, ApplyAction, ApplyReport};
use opm_core::policy;
use opm_core::{ApiError, DesiredObject};
use serde_json::Value;

use crate::kube::compare::same_object;
use crate::kube::discovery::Resolver;
use crate::kube::live_cache;
use crate::kube::{api_error, dynamic};
use crate::steps::apply_policy::apply_with_policy;
pub(crate) use crate::steps::server_apply::ApplyCtx;
use crate::steps::server_apply::{Target, committed, dry_run, read_live, same_version, unchanged};

/// Objects of one stage applied at the same time.
pub(crate) const STAGE_CONCURRENCY: usize = 8;
/// How long a CRD may take to become Established.
pub(crate) const ESTABLISH_DEADLINE: Duration = Duration::from_secs(60);

/// Runs the stages in order.
pub(crate) async fn apply(ctx: &ApplyCtx<'_>, stages: &[ApplyStage]) -> ApplyReport {
    let mut report = ApplyReport::default();
    for stage in stages {
        let futures: Vec<_> = stage.objects.iter().map(|obj| applied(ctx, obj)).collect();
        let mut results: Vec<AppliedObject> = stream::iter(futures)
            .buffered(STAGE_CONCURRENCY)
            .collect()
            .await;
        let failed = results.iter().any(|r| r.result.is_err());
        if !failed {
            wait_for_crds(ctx, &stage.objects, &mut results).await;
        }
        let failed = results.iter().any(|r| r.result.is_err());
        report.objects.extend(results);
        if failed {
            break;
        }
    }
    report
}

async fn applied(ctx: &ApplyCtx<'_>, obj: &DesiredObject) -> AppliedObject {
    AppliedObject {
        id: obj.id.clone(),
        result: apply_one(ctx, obj).await,
    }
}

async fn apply_one(ctx: &ApplyCtx<'_>, obj: &DesiredObject) -> Result<ApplyAction, ApiError> {
    let api =
        dynamic::watched_api_for(ctx.client.clone(), ctx.resolver, ctx.watch, &obj.id).await?;
    let manifest = ctx
        .secrets
        .restore(&obj.manifest)
        .map_err(|e| ApiError::Invalid {
            message: e.to_string(),
        })?;
    let desired = live_cache::desired_digest(
        &live_cache::desired_key(obj),
        ctx.field_manager,
        ctx.identity,
    );
    let name = &obj.id.name;
    let mut params = PatchParams::apply(ctx.field_manager);
    // SPEC §28's write plan: `ssa: Merge` never takes fields from other managers. Whether
    // the object exists matters only to `IfNotPresent`, whose only write is the create, and
    // to `Ignore`, which never writes: both are decided in `apply_with_policy` once read.
    params.force = policy::write_plan(&obj.policy, false, ctx.force).forced();
    let target = Target {
        ctx,
        api: &api,
        obj,
        params: &params,
        desired,
    };
    if !obj.policy.is_default() {
        return apply_with_policy(&target, &manifest).await;
    }
    let (api, params, manifest) = (&api, &params, &manifest);
    let commit = |created| committed(&target, manifest, created);
    // A version of the object we have seen: the dry-run alone says whether to write.
    let mut dry = None;
    match ctx.live.get(&obj.id) {
        // Found missing by this attempt's drift check: create it without another GET.
        Some(seen) if seen.absent() => return commit(Some(true)).await,
        Some(seen) => {
            let d = dynamic::to_value(&dry_run(api, name, params, manifest).await?);
            if seen.same_version(&d) {
                if seen.apply_digest == live_cache::apply_digest(&d) {
                    return Ok(unchanged(&target, &d));
                }
                return commit(Some(false)).await;
            }
            dry = Some(d);
        }
        // Not seen, and the listed objects carrying our label do not include it: it is
        // missing or lacks the label we stamp, so a dry-run could only show a change. Whose
        // it is was settled before this effect: the core asks for every object outside the
        // inventory's owner first (`InspectOwners`, SPEC §25) and never sends the Apply when
        // one belongs to someone else.
        None if ctx.watch.lists_without(&obj.id) => return commit(None).await,
        None => {}
    }
    let live = read_live(&target).await?;
    if let Some(live) = &live {
        // Reuse the first dry-run only if it was based on the version just read.
        let dry = match dry {
            Some(d) if same_version(live, &d) => d,
            _ => dynamic::to_value(&dry_run(api, name, params, manifest).await?),
        };
        if same_object(live, &dry) {
            return Ok(unchanged(&target, live));
        }
    }
    commit(Some(live.is_none())).await
}

/// After a stage applied CRDs, waits until each is Established; one that is not within
/// [`ESTABLISH_DEADLINE`] turns its result into a `Timeout`.
async fn wait_for_crds(
    ctx: &ApplyCtx<'_>,
    objects: &[DesiredObject],
    results: &mut [AppliedObject],
) {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.operator.clone());
    for (obj, result) in objects.iter().zip(results.iter_mut()) {
        if obj.id.kind != "CustomResourceDefinition" || obj.id.group != "apiextensions.k8s.io" {
            continue;
        }
        let waited = tokio::time::timeout(ESTABLISH_DEADLINE, async {
            loop {
                match crds.get_opt(&obj.id.name).await {
                    Ok(Some(crd)) if established(&crd) && served(&ctx.operator, &crd).await => {
                        return Ok(());
                    }
                    Ok(_) => {}
                    Err(e) => return Err(api_error::from_kube(&e)),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => forget_defined_kinds(ctx.resolver, &obj.manifest),
            Ok(Err(e)) => result.result = Err(e),
            Err(_) => {
                result.result = Err(ApiError::Timeout {
                    message: format!(
                        "CustomResourceDefinition {} not Established within {}s",
                        obj.id.name,
                        ESTABLISH_DEADLINE.as_secs()
                    ),
                })
            }
        }
    }
}

/// Whether every served version of `crd` is in discovery. `Established` can come before
/// the API server routes the new resource: an apply of its first object right after it
/// was seen to fail with `404 page not found` on a loaded machine. Discovery is fed by the
/// same CRD informer as the router, so waiting for it closes that window.
async fn served(client: &kube::Client, crd: &CustomResourceDefinition) -> bool {
    let plural = &crd.spec.names.plural;
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let group_version = format!("{}/{}", crd.spec.group, version.name);
        match client.list_api_group_resources(&group_version).await {
            Ok(list) if list.resources.iter().any(|r| &r.name == plural) => {}
            _ => return false,
        }
    }
    true
}

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// A (re)applied CRD may have changed its kind's versions or scope: drop cached discovery.
fn forget_defined_kinds(resolver: &Resolver, manifest: &Value) {
    let group = manifest.pointer("/spec/group").and_then(Value::as_str);
    let kind = manifest.pointer("/spec/names/kind").and_then(Value::as_str);
    let versions = manifest.pointer("/spec/versions").and_then(Value::as_array);
    if let (Some(group), Some(kind), Some(versions)) = (group, kind, versions) {
        for v in versions {
            if let Some(name) = v.get("name").and_then(Value::as_str) {
                resolver.forget(group, name, kind);
            }
        }
    }
}
