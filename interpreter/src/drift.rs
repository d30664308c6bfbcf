//! Drift check (SPEC §20): a server-side dry-run apply of each desired object as the
//! identity, compared with the live object on the fields we manage — labels, annotations
//! and everything outside `metadata`/`status`. A missing live object is drift. Per-object
//! errors are collected and the check goes on.

use futures::{StreamExt, stream};
use kube::Client;
use kube::api::{Patch, PatchParams};
use opm_core::input::{DriftReport, ObjectResult};
use opm_core::{ApiError, DesiredObject, ResourceId};
use serde_json::{Map, Value};

use crate::discovery::Resolver;
use crate::live_cache::{self, LiveCache};
use crate::secrets::SecretTable;
use crate::{api_error, dynamic};

const CONCURRENCY: usize = 8;

pub async fn check(
    client: Client,
    resolver: &Resolver,
    secrets: &SecretTable,
    live_cache: &LiveCache,
    objects: &[DesiredObject],
    field_manager: &str,
) -> DriftReport {
    let futures: Vec<_> = objects
        .iter()
        .map(|obj| {
            checked(
                client.clone(),
                resolver,
                secrets,
                live_cache,
                obj,
                field_manager,
            )
        })
        .collect();
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

async fn checked(
    client: Client,
    resolver: &Resolver,
    secrets: &SecretTable,
    live_cache: &LiveCache,
    obj: &DesiredObject,
    field_manager: &str,
) -> (ResourceId, Result<bool, ApiError>) {
    (
        obj.id.clone(),
        drifted(client, resolver, secrets, live_cache, obj, field_manager).await,
    )
}

async fn drifted(
    client: Client,
    resolver: &Resolver,
    secrets: &SecretTable,
    live_cache: &LiveCache,
    obj: &DesiredObject,
    field_manager: &str,
) -> Result<bool, ApiError> {
    let api = dynamic::api_for(client, resolver, &obj.id).await?;
    let params = PatchParams::apply(field_manager).force().dry_run();
    let desired = secrets
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
    // A dry-run based on a version already seen needs no GET.
    let mut dry = None;
    if let Some(seen) = live_cache.get(&obj.id) {
        let d = dry_run().await?;
        if seen.same_version(&d) {
            return Ok(seen.drift_digest != live_cache::drift_digest(&d));
        }
        // Still missing: a dry-run of an existing object carries its version.
        if seen.absent() && !has_version(&d) {
            return Ok(true);
        }
        dry = Some(d);
    }
    let Some(live) = api
        .get_opt(&obj.id.name)
        .await
        .map_err(|e| api_error::from_kube(&e))?
    else {
        live_cache.remember_absent(&obj.id);
        return Ok(true);
    };
    let live = dynamic::to_value(&live);
    live_cache.remember(&obj.id, &live);
    let rv = |v: &Value| v.pointer("/metadata/resourceVersion").cloned();
    let dry = match dry {
        Some(d) if rv(&d) == rv(&live) => d,
        _ => dry_run().await?,
    };
    Ok(managed_view(&live) != managed_view(&dry))
}

fn has_version(obj: &Value) -> bool {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
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
