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
use opm_core::fields::{self, FieldDrift};
use opm_core::input::{DriftReport, ObjectDrift, ObjectResult};
use opm_core::policy::{self, SsaPolicy};
use opm_core::{ApiError, DesiredObject, ResourceId};
use serde_json::Value;

use crate::cue::secrets::SecretTable;
use crate::kube::discovery::Resolver;
use crate::kube::live_cache::{self, LiveCache};
use crate::kube::object_watch::ObjectWatch;
use crate::{kube::api_error, kube::dynamic};

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
pub(crate) struct DriftCtx<'a> {
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

pub(crate) async fn check(ctx: &DriftCtx<'_>, objects: &[DesiredObject]) -> DriftReport {
    let futures: Vec<_> = objects.iter().map(|obj| checked(ctx, obj)).collect();
    let results: Vec<(ResourceId, Result<Option<ObjectDrift>, ApiError>)> =
        stream::iter(futures).buffered(CONCURRENCY).collect().await;
    let mut report = DriftReport::default();
    for (id, r) in results {
        match r {
            Ok(Some(detail)) => {
                report.drifted.push(id);
                report.details.push(detail);
            }
            Ok(None) => {}
            Err(e) => report.errors.push(ObjectResult { id, result: Err(e) }),
        }
    }
    report
}

async fn checked(
    ctx: &DriftCtx<'_>,
    obj: &DesiredObject,
) -> (ResourceId, Result<Option<ObjectDrift>, ApiError>) {
    (obj.id.clone(), drifted(ctx, obj).await)
}

/// What the answer of one object's check is: missing, matching at a version, or drifted.
enum Check {
    Missing,
    Same(String),
    Drifted(Vec<FieldDrift>),
}

async fn drifted(ctx: &DriftCtx<'_>, obj: &DesiredObject) -> Result<Option<ObjectDrift>, ApiError> {
    let api =
        dynamic::watched_api_for(ctx.client.clone(), ctx.resolver, ctx.watch, &obj.id).await?;
    let desired_state = live_cache::desired_digest(
        &live_cache::desired_key(obj),
        ctx.field_manager,
        ctx.identity,
    );
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
        return Ok(None);
    }
    ctx.stats.dry_runs.fetch_add(1, Ordering::Relaxed);
    let detail = |missing, fields| ObjectDrift {
        id: obj.id.clone(),
        missing,
        fields,
    };
    Ok(match dry_run_check(ctx, obj, &api).await? {
        Check::Missing => Some(detail(true, Vec::new())),
        Check::Same(rv) => {
            ctx.live.verify(&obj.id, &rv, desired_state);
            None
        }
        Check::Drifted(fields) => Some(detail(false, fields)),
    })
}

/// The dry-run comparison, field by field (SPEC §20): the dry-run of the desired object
/// (prepared for the live one as apply prepares it, SPEC §28) against the live object.
async fn dry_run_check(
    ctx: &DriftCtx<'_>,
    obj: &DesiredObject,
    api: &Api<DynamicObject>,
) -> Result<Check, ApiError> {
    let params = PatchParams::apply(ctx.field_manager).force().dry_run();
    let desired = ctx
        .secrets
        .restore(&obj.manifest)
        .map_err(|e| ApiError::Invalid {
            message: e.to_string(),
        })?;
    let dry_run = |manifest: Value| {
        let params = params.clone();
        async move {
            api.patch(&obj.id.name, &params, &Patch::Apply(&manifest))
                .await
                .map(|d| dynamic::to_value(&d))
                .map_err(|e| api_error::from_kube(&e))
        }
    };
    let version = |v: &Value| {
        live_cache::resource_version(v)
            .unwrap_or_default()
            .to_owned()
    };
    // Objects whose apply depends on the live object (ignore rules, `ssa: Merge`) are
    // always read: the dry-run must be of what apply would send.
    let plain = obj.policy.ignore.is_empty() && obj.policy.ssa != SsaPolicy::Merge;
    // A dry-run based on a version already seen needs no GET, unless it shows drift (then
    // the live object names the fields and who changed them).
    let mut dry = None;
    if plain && let Some(seen) = ctx.live.get(&obj.id) {
        let d = dry_run(desired.clone()).await?;
        if seen.same_version(&d) && seen.drift_digest == live_cache::drift_digest(&d) {
            return Ok(Check::Same(version(&d)));
        }
        // Still missing: a dry-run of an existing object carries its version.
        if seen.absent() && live_cache::resource_version(&d).is_none() {
            return Ok(Check::Missing);
        }
        dry = Some(d);
    }
    let Some(live) = api
        .get_opt(&obj.id.name)
        .await
        .map_err(|e| api_error::from_kube(&e))?
    else {
        ctx.live.remember_absent(&obj.id);
        return Ok(Check::Missing);
    };
    let live = dynamic::to_value(&live);
    ctx.live.remember(&obj.id, &live);
    let dry = match dry {
        Some(d) if version(&d) == version(&live) => d,
        _ => {
            let prepared = policy::prepare(&desired, Some(&live), &obj.policy, ctx.field_manager);
            dry_run(prepared).await?
        }
    };
    // Secret values never leave as values: only paths and managers are reported.
    let fields = fields::compare(&live, &dry, &obj.policy.ignore, ctx.field_manager);
    Ok(if fields.is_empty() {
        Check::Same(version(&live))
    } else {
        Check::Drifted(fields)
    })
}

#[cfg(test)]
mod tests {
    use crate::kube::compare::managed_view;
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
