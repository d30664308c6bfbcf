//! `kubectl opm diff KIND/NAME`: what the operator would do with a proposed change, proven
//! by the API server. The release is rendered by the operator's own renderer (`cue`, the
//! same synthesised package), turned into objects by the core's own rule
//! (`opm_core::desired`: labels, namespaces, §28 policies, hooks), then every object gets a
//! server-side dry-run apply under the identity the check runs as: the user's, or with
//! `--as-release` the release's ServiceAccount exactly as the operator impersonates it, so
//! an RBAC gap shows here, before a merge. What is left here is the requests and the words.
//!
//! `render` renders the proposal (`derived`: what a Secret value reaches, never printed),
//! `identity` picks who the dry-run runs as, `check` reports each desired object, and this
//! file joins them and reports the stale ones.

mod check;
mod derived;
mod identity;
mod render;

use std::path::PathBuf;

use kube::Client;
use opm_core::config::Config;
use opm_core::desired::{self, Desired, StaleFate};
use opm_core::input::ApiError;
use opm_core::{DesiredObject, ReleaseKey, ReleaseObject, ResourceId, inventory, render_value};
use opm_operator::commands::render_cmd::CueArgs;
use opm_operator::cue::secrets::SecretTable;
use opm_operator::kube::discovery::Resolver;
use serde_json::Value;

use crate::connect::Session;
use crate::error::{CliError, Result};
use crate::releases;
use crate::report::{Noted, Report};

/// What is proposed, and how the check runs.
pub struct DiffOpts {
    /// Values replacing `spec.values` (ModuleRelease).
    pub values: Option<PathBuf>,
    /// A module version replacing `spec.module.version` (ModuleRelease).
    pub version: Option<String>,
    /// A local release package rendered instead of the release's source (either kind).
    pub path: Option<PathBuf>,
    /// Dry-run as the release's ServiceAccount.
    pub as_release: bool,
    /// The ServiceAccount for `--as-release` when the release names none (the operator's
    /// `--default-service-account`).
    pub service_account: Option<String>,
    pub cue: CueArgs,
    pub cache_dir: Option<PathBuf>,
    /// A Platform manifest to render OPM releases with instead of the cluster's.
    pub platform: Option<PathBuf>,
}

/// Computes the report. Errors (exit 2) are those of the check itself: the render, a
/// Forbidden read or dry-run, an unreachable server.
pub async fn run(s: &Session, key: &ReleaseKey, opts: &DiffOpts) -> Result<Report> {
    let obj = releases::read(&s.client, key).await?;
    let (client, identity) = identity::check_identity(s, &obj, opts).await?;
    let mut secrets = SecretTable::default();
    let rendered = render::render(s, &client, &obj, opts, &mut secrets).await?;
    let resolver = Resolver::new(client.clone());
    let uuid = render_value::release_uuid(key.kind, &key.namespace, &key.name);
    let objects = desired_objects(
        key,
        &obj,
        &uuid,
        rendered.exported,
        rendered.bytes,
        &resolver,
        &mut secrets,
    )
    .await?;

    let status = releases::status(&obj);
    let persisted: Vec<opm_core::api::InventoryEntry> = status
        .inventory
        .as_ref()
        .map(|i| i.entries.clone())
        .unwrap_or_default();
    let mut report = Report {
        release: releases::describe(key),
        identity: identity.clone(),
        ..Default::default()
    };
    let rollout = obj.common().rollout.as_ref();
    let ctx = check::Ctx {
        client: &client,
        resolver: &resolver,
        secrets: &secrets,
        identity: &identity,
        uuid: &uuid,
        persisted: &persisted,
        adopt: rollout.is_some_and(|r| r.adopt_existing),
        force: rollout.is_some_and(|r| r.force_conflicts),
        crd_kinds: check::crd_kinds(&objects),
        derived: rendered.derived,
    };
    for o in &objects {
        check::check(&ctx, o, &mut report).await?;
    }
    let stale = inventory::stale(&persisted, &inventory::entries_for(&objects));
    report_stale(&ctx, &stale, obj.common().prune, &mut report).await?;
    Ok(report)
}

/// The proposed render as the operator would apply it: Secret values as digests, the
/// core's caps, objects, policies and hooks (`opm_core::desired`), in apply order.
async fn desired_objects(
    key: &ReleaseKey,
    obj: &ReleaseObject,
    uuid: &str,
    mut exported: Value,
    bytes: u64,
    resolver: &Resolver,
    secrets: &mut SecretTable,
) -> Result<Vec<DesiredObject>> {
    // As the driver does: Secret values become digests in the manifests (restored right
    // before each dry-run), which also teaches `secrets` every value to scrub from output.
    secrets.redact_render(&mut exported);
    secrets.redact_render_strings(&mut exported);
    let cluster_scoped = resolver
        .cluster_scoped(&desired::exported_objects(&exported))
        .await;
    let release_id = render_value::ReleaseIdentity {
        kind: key.kind,
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uuid: uuid.to_string(),
    };
    let fail = |f: opm_core::outcome::Failure| {
        CliError::Other(format!(
            "the render would fail ({}): {}",
            f.reason,
            secrets.scrub(&f.message)
        ))
    };
    // The operator's default caps: a render it would refuse is refused here.
    let cfg = Config::default();
    let objects =
        desired::objects(exported, bytes, &cluster_scoped, &release_id, &cfg).map_err(fail)?;
    let ignore_rules = obj
        .common()
        .drift_detection
        .as_ref()
        .map(|d| d.ignore.clone())
        .unwrap_or_default();
    let mut wanted = Desired::new(objects);
    wanted.extract(&ignore_rules, &cfg).map_err(fail)?;
    let mut objects = wanted.objects;
    objects.sort_by(|a, b| {
        render_value::apply_order_key(&a.id).cmp(&render_value::apply_order_key(&b.id))
    });
    Ok(objects)
}

/// The stale inventory entries still in the cluster, each pruned or orphaned as the core's
/// [`desired::stale_fate`] says.
async fn report_stale(
    ctx: &check::Ctx<'_>,
    stale: &[opm_core::api::InventoryEntry],
    spec_prune: bool,
    report: &mut Report,
) -> Result<()> {
    for e in stale {
        let id = ResourceId::from_entry(e);
        if !still_there(ctx, &id).await? {
            continue;
        }
        let note = match desired::stale_fate(e, spec_prune) {
            StaleFate::Protected => "Namespaces and CRDs are never pruned",
            StaleFate::Orphaned => "releases.opmodel.dev/prune: disabled",
            StaleFate::Kept => "spec.prune is false",
            StaleFate::Deleted => {
                report.pruned.push(Noted {
                    id,
                    note: String::new(),
                });
                continue;
            }
        };
        report.orphaned.push(Noted {
            id,
            note: note.into(),
        });
    }
    Ok(())
}

/// Whether the stale object `id` still exists (a kind no longer served: it does not).
async fn still_there(ctx: &check::Ctx<'_>, id: &ResourceId) -> Result<bool> {
    let client: &Client = ctx.client;
    let api = match opm_operator::kube::dynamic::api_for(client.clone(), ctx.resolver, id).await {
        Ok(a) => a,
        // A kind no longer served: nothing left to prune.
        Err(ApiError::NotFound { .. }) => return Ok(false),
        Err(e) => {
            return Err(CliError::Api {
                what: format!("reading {}", id.display()),
                error: e,
            });
        }
    };
    match api.get_opt(&id.name).await {
        Ok(found) => Ok(found.is_some()),
        Err(err) => Err(check::forbidden_or(
            ctx.identity,
            &format!("reading {}", id.display()),
            &err,
            ctx.secrets,
        )),
    }
}
