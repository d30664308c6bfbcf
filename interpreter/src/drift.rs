//! Drift check (SPEC §20): a server-side dry-run apply of each desired object as the
//! identity, compared with the live object on the fields we manage — labels, annotations
//! and everything outside `metadata`/`status`. A missing live object is drift. Per-object
//! errors are collected and the check goes on. Without impersonation, an object the
//! managed-object watch shows still at the version already verified against this desired
//! state needs no dry-run ([`ObjectWatch`]).

use std::sync::atomic::{AtomicU64, Ordering};

use futures::{StreamExt, stream};
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use opm_core::input::{DriftReport, ObjectResult};
use opm_core::{ApiError, DesiredObject, ResourceId};
use serde_json::{Map, Value};

use crate::discovery::Resolver;
use crate::live_cache::{self, LiveCache};
use crate::object_watch::ObjectWatch;
use crate::secrets::SecretTable;
use crate::{api_error, dynamic};

const CONCURRENCY: usize = 8;

/// How drift checks of single objects were answered (for tests and the benchmark).
#[derive(Debug, Default)]
pub struct DriftStats {
    /// Answered by a server-side dry-run.
    pub dry_runs: AtomicU64,
    /// Answered by the watch: still at a verified version.
    pub unchanged: AtomicU64,
}

/// Everything one drift check needs besides its objects.
pub struct DriftCtx<'a> {
    /// As the effective identity.
    pub client: Client,
    pub resolver: &'a Resolver,
    pub secrets: &'a SecretTable,
    pub live: &'a LiveCache,
    pub watch: &'a ObjectWatch,
    pub stats: &'a DriftStats,
    pub field_manager: &'a str,
    /// The impersonated user, or empty for the operator itself.
    pub identity: &'a str,
}

pub async fn check(ctx: &DriftCtx<'_>, objects: &[DesiredObject]) -> DriftReport {
    let futures: Vec<_> = objects.iter().map(|obj| checked(ctx, obj)).collect();
    let results: Vec<(ResourceId, Result<bool, ApiError>)> =
        stream::iter(futures).buffered(CONCURRENCY).collect().await;
    let mut report = DriftReport::default();
    for (id, r) in results {
        match r {
            Ok(true) => report.drifted.push(id),
            Ok(false) => {}
            Err(e) => report.errors.push(ObjectResult { id, result: Err(e) }),
        }
    }
    report
}

async fn checked(ctx: &DriftCtx<'_>, obj: &DesiredObject) -> (ResourceId, Result<bool, ApiError>) {
    (obj.id.clone(), drifted(ctx, obj).await)
}

async fn drifted(ctx: &DriftCtx<'_>, obj: &DesiredObject) -> Result<bool, ApiError> {
    let api =
        dynamic::watched_api_for(ctx.client.clone(), ctx.resolver, ctx.watch, &obj.id).await?;
    let desired_state = live_cache::desired_digest(&obj.manifest, ctx.field_manager, ctx.identity);
    // Still at the version a dry-run (or our apply) of this very desired state matched.
    // Only for the operator's own identity: the watch runs as the operator, so it cannot
    // vouch that a ServiceAccount may still do what the check does as it (a revoked right
    // must surface as ImpersonationFailed on the next check).
    if ctx.identity.is_empty()
        && let Some(rv) = ctx.live.verified(&obj.id, &desired_state)
        && ctx.watch.version(&obj.id).as_deref() == Some(rv.as_str())
    {
        tracing::trace!(object = ?obj.id, "unchanged since verified; no dry-run");
        ctx.stats.unchanged.fetch_add(1, Ordering::Relaxed);
        return Ok(false);
    }
    ctx.stats.dry_runs.fetch_add(1, Ordering::Relaxed);
    let drifted = dry_run_check(ctx, obj, &api).await?;
    if let Some((false, rv)) = &drifted {
        ctx.live.verify(&obj.id, rv, desired_state);
    }
    Ok(drifted.is_none_or(|(d, _)| d))
}

/// The dry-run comparison: `None` when the object is missing (drift), otherwise whether it
/// drifted and the live version that was compared.
async fn dry_run_check(
    ctx: &DriftCtx<'_>,
    obj: &DesiredObject,
    api: &Api<DynamicObject>,
) -> Result<Option<(bool, String)>, ApiError> {
    let params = PatchParams::apply(ctx.field_manager).force().dry_run();
    let desired = ctx
        .secrets
        .restore(&obj.manifest)
        .map_err(|e| ApiError::Invalid {
            message: e.to_string(),
        })?;
    let dry_run = || async {
        api.patch(&obj.id.name, &params, &Patch::Apply(&desired))
            .await
            .map(|d| dynamic::to_value(&d))
            .map_err(|e| api_error::from_kube(&e))
    };
    let version = |v: &Value| {
        live_cache::resource_version(v)
            .unwrap_or_default()
            .to_owned()
    };
    // A dry-run based on a version already seen needs no GET.
    let mut dry = None;
    if let Some(seen) = ctx.live.get(&obj.id) {
        let d = dry_run().await?;
        if seen.same_version(&d) {
            return Ok(Some((
                seen.drift_digest != live_cache::drift_digest(&d),
                version(&d),
            )));
        }
        // Still missing: a dry-run of an existing object carries its version.
        if seen.absent() && live_cache::resource_version(&d).is_none() {
            return Ok(None);
        }
        dry = Some(d);
    }
    let Some(live) = api
        .get_opt(&obj.id.name)
        .await
        .map_err(|e| api_error::from_kube(&e))?
    else {
        ctx.live.remember_absent(&obj.id);
        return Ok(None);
    };
    let live = dynamic::to_value(&live);
    ctx.live.remember(&obj.id, &live);
    let dry = match dry {
        Some(d) if version(&d) == version(&live) => d,
        _ => dry_run().await?,
    };
    Ok(Some((
        managed_view(&live) != managed_view(&dry),
        version(&live),
    )))
}

/// Labels, annotations and every top-level field but `metadata` and `status`.
pub fn managed_view(obj: &Value) -> Value {
    let mut out = Map::new();
    if let Some(o) = obj.as_object() {
        for (k, v) in o {
            if k != "metadata" && k != "status" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    for field in ["labels", "annotations"] {
        let v = obj
            .pointer(&format!("/metadata/{field}"))
            .cloned()
            .unwrap_or(Value::Null);
        out.insert(format!("metadata.{field}"), v);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_and_bookkeeping_are_ignored_but_labels_and_spec_are_not() {
        let live = json!({"metadata": {"resourceVersion": "1", "labels": {"a": "1"}}, "spec": {"r": 1}, "status": {"x": 1}});
        let dry = json!({"metadata": {"resourceVersion": "2", "labels": {"a": "1"}}, "spec": {"r": 1}, "status": {"x": 2}});
        assert_eq!(managed_view(&live), managed_view(&dry));
        let relabelled = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"r": 1}});
        assert_ne!(managed_view(&live), managed_view(&relabelled));
        let respec = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"r": 2}});
        assert_ne!(managed_view(&live), managed_view(&respec));
    }
}
