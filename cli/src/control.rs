//! Verbs that change a release: `suspend`, `resume` (a merge patch of `spec.suspend`) and
//! `reconcile` (the SPEC §1.4 annotation, optionally waiting for the operator to handle it).

use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use opm_core::constants::{REQUESTED_AT_ANNOTATION, conditions as ct};
use opm_core::{Kind, ReleaseKey, ReleaseObject};
use serde_json::json;

use crate::connect::Session;
use crate::error::{CliError, Result, Verdict};
use crate::releases;

/// Flux's on-demand reconcile annotation on a source.
pub const FLUX_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

async fn merge_patch(
    s: &Session,
    key: &ReleaseKey,
    patch: serde_json::Value,
    what: &str,
) -> Result<()> {
    // Read first, so a missing release is "not found" rather than a patch error.
    releases::read(&s.client, key).await?;
    opm_operator::kube::releases::dynamic_api(s.client.clone(), key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CliError::api(format!("{what} {}", releases::describe(key)), &e))?;
    Ok(())
}

/// `suspend` / `resume`.
pub async fn set_suspend(s: &Session, key: &ReleaseKey, suspend: bool) -> Result<String> {
    let what = if suspend { "suspending" } else { "resuming" };
    merge_patch(s, key, json!({"spec": {"suspend": suspend}}), what).await?;
    Ok(format!(
        "{} {}\n",
        releases::describe(key),
        if suspend { "suspended" } else { "resumed" }
    ))
}

/// Options of `reconcile`.
pub struct ReconcileOpts {
    pub wait: bool,
    pub timeout: Duration,
    pub with_source: bool,
}

/// `reconcile KIND/NAME`: returns the text to print and whether it succeeded.
pub async fn reconcile(
    s: &Session,
    key: &ReleaseKey,
    opts: &ReconcileOpts,
) -> Result<(String, Verdict)> {
    let obj = releases::read(&s.client, key).await?;
    if obj.common().suspend {
        return Ok((
            format!(
                "{} is suspended: a reconcile request does not bypass suspend (run `kubectl opm resume {}/{}` first)\n",
                releases::describe(key),
                crate::target::short(key.kind),
                key.name
            ),
            Verdict::Failed,
        ));
    }
    let requested = Timestamp::now().to_string();
    let mut out = String::new();
    if opts.with_source {
        out.push_str(&annotate_source(s, &obj, &requested).await?);
    }
    let patch = json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: requested}}});
    opm_operator::kube::releases::dynamic_api(s.client.clone(), key)
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CliError::api(format!("annotating {}", releases::describe(key)), &e))?;
    out.push_str(&format!(
        "{} reconcile requested at {requested}\n",
        releases::describe(key)
    ));
    if !opts.wait {
        return Ok((out, Verdict::Ok));
    }
    let (text, verdict) = wait_handled(s, key, &requested, opts.timeout).await?;
    out.push_str(&text);
    Ok((out, verdict))
}

/// Sets `reconcile.fluxcd.io/requestedAt` on the Release's Flux source, so source-controller
/// fetches now; the operator follows on the new artifact by itself.
async fn annotate_source(s: &Session, obj: &ReleaseObject, requested: &str) -> Result<String> {
    let ReleaseObject::Release(rel) = obj else {
        return Err(CliError::Usage(
            "--with-source applies to a Release (rel/NAME): a ModuleRelease has no Flux source"
                .into(),
        ));
    };
    let r = &rel.spec.source_ref;
    let namespace = if r.namespace.is_empty() {
        rel.metadata.namespace.clone().unwrap_or_default()
    } else {
        r.namespace.clone()
    };
    let api_version = if r.api_version.is_empty() {
        opm_core::constants::FLUX_SOURCE_API_VERSION.to_string()
    } else {
        r.api_version.clone()
    };
    let resource = opm_operator::steps::source::api_resource(&api_version, &r.kind);
    let api: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), &namespace, &resource);
    let patch = json!({"metadata": {"annotations": {FLUX_REQUESTED_AT: requested}}});
    let what = format!("{} {namespace}/{}", r.kind, r.name);
    api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CliError::api(format!("annotating the source {what}"), &e))?;
    Ok(format!("{what} reconcile requested at {requested}\n"))
}

/// Waits until the operator copied `requested` into `status.lastHandledReconcileAt` and
/// the attempt has an answer (`Ready` not `Unknown`: a wait for health goes on).
async fn wait_handled(
    s: &Session,
    key: &ReleaseKey,
    requested: &str,
    timeout: Duration,
) -> Result<(String, Verdict)> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut handled = false;
    loop {
        let obj = releases::read(&s.client, key).await?;
        let status = releases::status(&obj);
        handled = handled || status.last_handled_reconcile_at == requested;
        let generation_seen = status.observed_generation >= obj.meta().generation.unwrap_or(0);
        if handled && generation_seen {
            let (ready, reason, message) = releases::ready(&status);
            let stalled =
                releases::condition(&status, ct::STALLED).is_some_and(|c| c.status == "True");
            let line = |verdict: &str| {
                format!(
                    "{} {verdict}: Ready={ready} {reason}{}{}\n",
                    releases::describe(key),
                    if stalled { " (stalled)" } else { "" },
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    }
                )
            };
            match ready.as_str() {
                "True" => return Ok((line("reconciled"), Verdict::Ok)),
                "False" => return Ok((line("failed"), Verdict::Failed)),
                _ => {}
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let (ready, reason, message) = releases::ready(&status);
            let what = if handled {
                "the attempt to finish (waiting for health?)"
            } else {
                "the operator to handle the request (is it running, and does it watch this release?)"
            };
            return Ok((
                format!(
                    "timed out after {} waiting for {what}; Ready={ready} {reason}{}\n",
                    crate::output::human(
                        jiff::SignedDuration::try_from(timeout).unwrap_or_default()
                    ),
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(": {message}")
                    }
                ),
                Verdict::Failed,
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The release key in the session's namespace.
pub fn key(s: &Session, kind: Kind, name: &str) -> ReleaseKey {
    ReleaseKey {
        kind,
        namespace: s.namespace.clone(),
        name: name.to_string(),
    }
}
