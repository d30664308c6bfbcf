//! `kubectl opm diff KIND/NAME`: what the operator would do with a proposed change, proven
//! by the API server. The release is rendered by the operator's own renderer (`cue`, the
//! same synthesised package), turned into objects by the core (labels, namespaces, §28
//! policies), then every object gets a server-side dry-run apply under the identity the
//! check runs as: the user's, or with `--as-release` the release's ServiceAccount exactly
//! as the operator impersonates it, so an RBAC gap shows here, before a merge.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use opm_core::constants::FIELD_MANAGER;
use opm_core::hooks;
use opm_core::input::{ApiError, InputKind, LiveMeta, LiveObject};
use opm_core::{
    DesiredObject, ReleaseKey, ReleaseObject, ResourceId, inventory, ownership, policy,
    render_value,
};
use opm_operator::commands::render_cmd::CueArgs;
use opm_operator::cue::module_ref::{ModuleRef, ReleaseIdentity};
use opm_operator::cue::render::{RenderConfig, Renderer};
use opm_operator::cue::secrets::{MIN_SCRUBBED, SecretTable};
use opm_operator::kube::discovery::Resolver;
use serde_json::Value;

use crate::connect::Session;
use crate::error::{CliError, Result};
use crate::releases;
use crate::report::{Changed, Noted, Refused, Report, field_changes};

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

fn render_error(e: impl std::fmt::Display, secrets: &SecretTable) -> CliError {
    CliError::Other(format!("render failed: {}", secrets.scrub(&e.to_string())))
}

/// Computes the report. Errors (exit 2) are those of the check itself: the render, a
/// Forbidden read or dry-run, an unreachable server.
pub async fn run(s: &Session, key: &ReleaseKey, opts: &DiffOpts) -> Result<Report> {
    let obj = releases::read(&s.client, key).await?;
    let (client, identity) = check_identity(s, &obj, opts).await?;
    let mut secrets = SecretTable::default();
    let (mut exported, bytes, derived) = render(s, &client, &obj, opts, &mut secrets).await?;
    let resolver = Resolver::new(client.clone());
    // As the driver does: Secret values become digests in the manifests (restored right
    // before each dry-run), which also teaches `secrets` every value to scrub from output.
    secrets.redact_render(&mut exported);
    secrets.redact_render_strings(&mut exported);
    let cluster_scoped = resolver
        .cluster_scoped(&opm_operator::controller::driver::flatten(&exported))
        .await;
    let uuid = render_value::release_uuid(key.kind, &key.namespace, &key.name);
    let release_id = render_value::ReleaseIdentity {
        kind: key.kind,
        namespace: key.namespace.clone(),
        name: key.name.clone(),
        uuid: uuid.clone(),
    };
    let fail = |f: opm_core::outcome::Failure| {
        CliError::Other(format!(
            "the render would fail ({}): {}",
            f.reason,
            secrets.scrub(&f.message)
        ))
    };
    // The operator's default caps: a render it would refuse is refused here.
    render_value::check_caps(
        &exported,
        bytes,
        opm_core::config::DEFAULT_MAX_RENDER_OBJECTS,
        opm_core::config::DEFAULT_MAX_RENDER_BYTES,
    )
    .map_err(fail)?;
    let mut objects =
        render_value::build_owned(exported, &cluster_scoped, &release_id).map_err(fail)?;
    // As the operator: the render digest before the policies are stripped, stamped on hooks.
    let render_digest = opm_core::digest::render(objects.iter().map(|o| &o.manifest));
    ownership::strip_policies(&mut objects);
    let ignore_rules = obj
        .common()
        .drift_detection
        .as_ref()
        .map(|d| d.ignore.clone())
        .unwrap_or_default();
    policy::extract(&mut objects, &ignore_rules).map_err(fail)?;
    hooks::extract(&mut objects, hooks::DEFAULT_MAX_HOOKS, &render_digest).map_err(fail)?;
    objects.sort_by(|a, b| {
        render_value::apply_order_key(&a.id).cmp(&render_value::apply_order_key(&b.id))
    });

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
    let ctx = Ctx {
        client: &client,
        resolver: &resolver,
        secrets: &secrets,
        identity: &identity,
        uuid: &uuid,
        persisted: &persisted,
        adopt: obj
            .common()
            .rollout
            .as_ref()
            .is_some_and(|r| r.adopt_existing),
        force: obj
            .common()
            .rollout
            .as_ref()
            .is_some_and(|r| r.force_conflicts),
        crd_kinds: crd_kinds(&objects),
        derived,
    };
    for o in &objects {
        check(&ctx, o, &mut report).await?;
    }
    let stale = inventory::stale(&persisted, &inventory::entries_for(&objects));
    for e in stale {
        let id = ResourceId::from_entry(&e);
        let api = match opm_operator::kube::dynamic::api_for(client.clone(), &resolver, &id).await {
            Ok(a) => a,
            // A kind no longer served: nothing left to prune.
            Err(ApiError::NotFound { .. }) => continue,
            Err(e) => {
                return Err(CliError::Api {
                    what: format!("reading {}", id.display()),
                    error: e,
                });
            }
        };
        match api.get_opt(&id.name).await {
            Ok(None) => continue,
            Ok(Some(_)) => {}
            Err(err) => {
                return Err(forbidden_or(
                    &identity,
                    &format!("reading {}", id.display()),
                    &err,
                    &secrets,
                ));
            }
        }
        let never = matches!(
            (id.group.as_str(), id.kind.as_str()),
            ("", "Namespace") | ("apiextensions.k8s.io", "CustomResourceDefinition")
        );
        let note = if never {
            Some("Namespaces and CRDs are never pruned")
        } else if ownership::prune_disabled(&e) {
            Some("releases.opmodel.dev/prune: disabled")
        } else if !obj.common().prune {
            Some("spec.prune is false")
        } else {
            None
        };
        match note {
            Some(n) => report.orphaned.push(Noted { id, note: n.into() }),
            None => report.pruned.push(Noted {
                id,
                note: String::new(),
            }),
        }
    }
    Ok(report)
}

struct Ctx<'a> {
    client: &'a Client,
    resolver: &'a Resolver,
    secrets: &'a SecretTable,
    identity: &'a str,
    uuid: &'a str,
    persisted: &'a [opm_core::api::InventoryEntry],
    adopt: bool,
    force: bool,
    /// (group, kind) defined by CRDs in this render: their objects cannot be dry-run yet.
    crd_kinds: Vec<(String, String)>,
    /// Rendered values a `valuesFrom` Secret value reaches, however transformed
    /// ([`secret_derived`]): never printed.
    derived: Vec<String>,
}

fn crd_kinds(objects: &[DesiredObject]) -> Vec<(String, String)> {
    objects
        .iter()
        .filter(|o| o.id.kind == "CustomResourceDefinition")
        .filter_map(|o| {
            let spec = o.manifest.get("spec")?;
            Some((
                spec.get("group")?.as_str()?.to_string(),
                spec.pointer("/names/kind")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// A Forbidden answer is an error of the check (exit 2) that names the identity; other
/// failures are errors too, worded with what was being done.
fn forbidden_or(identity: &str, what: &str, err: &kube::Error, secrets: &SecretTable) -> CliError {
    let e = opm_operator::kube::api_error::from_kube(err);
    match e {
        ApiError::Forbidden { message } => CliError::Other(format!(
            "{what} is forbidden for {identity}: {}; the operator would stall with ImpersonationFailed if it ran as this identity",
            secrets.scrub(&message)
        )),
        other => CliError::Other(format!(
            "{what} failed: {}",
            secrets.scrub(&other.to_string())
        )),
    }
}

fn hook_of(o: &DesiredObject) -> String {
    hooks::phase_of(&o.manifest)
        .map(|p| p.as_str().to_string())
        .unwrap_or_default()
}

/// When a hook of `phase` runs, in a user's words.
fn hook_words(phase: hooks::HookPhase) -> &'static str {
    match phase {
        hooks::HookPhase::PreApply => "runs before the rest is applied",
        hooks::HookPhase::PostApply => "runs once the rest is healthy",
        hooks::HookPhase::PreDelete => "created suspended; runs when the release is deleted",
    }
}

async fn check(ctx: &Ctx<'_>, o: &DesiredObject, report: &mut Report) -> Result<()> {
    let api =
        match opm_operator::kube::dynamic::api_for(ctx.client.clone(), ctx.resolver, &o.id).await {
            Ok(a) => a,
            // Not even created when absent (`ssa: Ignore`): its kind need not exist.
            Err(ApiError::NotFound { .. })
                if !policy::write_plan(&o.policy, false, ctx.force).writes() =>
            {
                report.unchanged += 1;
                return Ok(());
            }
            Err(ApiError::NotFound { message }) => {
                if ctx
                    .crd_kinds
                    .iter()
                    .any(|(g, k)| *g == o.id.group && *k == o.id.kind)
                {
                    report.created.push(Noted {
                        id: o.id.clone(),
                        note: "its kind comes from a CRD in this render; not dry-run".into(),
                    });
                } else {
                    report.refused.push(Refused {
                        id: o.id.clone(),
                        reason: "ApplyFailed".into(),
                        message,
                    });
                }
                return Ok(());
            }
            Err(e) => {
                return Err(CliError::Api {
                    what: format!("resolving {}", o.id.display()),
                    error: e,
                });
            }
        };
    let live = match api.get_opt(&o.id.name).await {
        Ok(l) => l.map(|d| opm_operator::kube::dynamic::to_value(&d)),
        Err(e) => {
            return Err(forbidden_or(
                ctx.identity,
                &format!("reading {}", o.id.display()),
                &e,
                ctx.secrets,
            ));
        }
    };
    // Ownership, decided by the core with its own wording: every object,
    // whatever its `ssa` policy or the inventory says, as the operator does.
    if let Some(l) = &live {
        let meta = LiveMeta {
            uid: l
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            labels: l
                .pointer("/metadata/labels")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default(),
        };
        let seen = LiveObject {
            id: o.id.clone(),
            result: Ok(Some(meta)),
        };
        if let Err(f) = ownership::decide_listed(
            std::slice::from_ref(&o.id),
            &[seen],
            ctx.uuid,
            ctx.adopt,
            ctx.persisted,
            None,
        ) {
            report.refused.push(Refused {
                id: o.id.clone(),
                reason: f.reason.to_string(),
                message: f.message,
            });
            return Ok(());
        }
    }
    // SPEC §28's write plan, as the operator's apply asks it.
    let plan = policy::write_plan(&o.policy, live.is_some(), ctx.force);
    if !plan.writes() {
        report.unchanged += 1;
        return Ok(());
    }
    let manifest = ctx
        .secrets
        .restore(&o.manifest)
        .map_err(|e| CliError::Other(e.to_string()))?;
    let manifest = policy::prepare(&manifest, live.as_ref(), &o.policy, FIELD_MANAGER);
    let mut params = PatchParams::apply(FIELD_MANAGER).dry_run();
    if plan.forced() {
        params = params.force();
    }
    let dry = match api
        .patch(&o.id.name, &params, &Patch::Apply(&manifest))
        .await
    {
        Ok(d) => opm_operator::kube::dynamic::to_value(&d),
        Err(err) => return refusal(ctx, o, &err, live.is_some(), report),
    };
    let scrub = |s: &str| {
        let mut out = ctx.secrets.scrub(s);
        for d in &ctx.derived {
            // A short derived value (a length, a flag) is hidden where it is the whole
            // value; searching for it inside others would hide everything.
            if out == *d || (d.chars().count() >= MIN_SCRUBBED && out.contains(d.as_str())) {
                out = out.replace(d.as_str(), "<redacted>");
            }
        }
        out
    };
    match live {
        None => report.created.push(Noted {
            id: o.id.clone(),
            note: hooks::phase_of(&o.manifest)
                .map(|p| format!("{p} hook: {}", hook_words(p)))
                .unwrap_or_default(),
        }),
        Some(l) => {
            let fields = field_changes(&o.id, &l, &dry, &o.policy.ignore, &scrub);
            if fields.is_empty() {
                report.unchanged += 1;
            } else {
                // SPEC §32: a hook Job of another render is deleted and run again.
                let rerun = hooks::is_job(&o.id)
                    && hooks::phase_of(&o.manifest).is_some()
                    && hooks::live_digest(&l) != hooks::live_digest(&o.manifest);
                report.changed.push(Changed {
                    id: o.id.clone(),
                    fields,
                    recreate: rerun
                        .then(|| format!("a {} hook Job of another render runs again", hook_of(o))),
                    hook: hook_of(o),
                });
            }
        }
    }
    Ok(())
}

/// A dry-run the server refused: the attempt would stop there, so it is reported
/// as refused; a Forbidden one is an error of the check itself.
fn refusal(
    ctx: &Ctx<'_>,
    o: &DesiredObject,
    err: &kube::Error,
    exists: bool,
    report: &mut Report,
) -> Result<()> {
    let e = opm_operator::kube::api_error::from_kube(err);
    let message = ctx.secrets.scrub(&e.to_string());
    match e {
        ApiError::Forbidden { .. } => Err(forbidden_or(
            ctx.identity,
            &format!("the server-side dry-run of {}", o.id.display()),
            err,
            ctx.secrets,
        )),
        ApiError::Invalid { .. }
            if exists
                && opm_core::policy::recreate::recreate(
                    &o.id,
                    o.policy.force,
                    &opm_operator::steps::apply_policy::refusal(err),
                ) =>
        {
            report.changed.push(Changed {
                id: o.id.clone(),
                fields: Vec::new(),
                recreate: Some(format!("{message} (releases.opmodel.dev/force: enabled)")),
                hook: hook_of(o),
            });
            Ok(())
        }
        ApiError::Invalid { .. } => {
            let hint = if opm_operator::steps::apply_policy::immutable(err) {
                " (an immutable field; annotate the object releases.opmodel.dev/force: enabled to recreate it)"
            } else {
                ""
            };
            report.refused.push(Refused {
                id: o.id.clone(),
                reason: "ApplyFailed".into(),
                message: format!("{message}{hint}"),
            });
            Ok(())
        }
        ApiError::Conflict { .. } => {
            report.refused.push(Refused {
                id: o.id.clone(),
                reason: "ApplyFailed".into(),
                message: format!(
                    "{message} (set spec.rollout.forceConflicts: true to take the fields)"
                ),
            });
            Ok(())
        }
        other => Err(CliError::Other(format!(
            "the server-side dry-run of {} failed: {}",
            o.id.display(),
            ctx.secrets.scrub(&other.to_string())
        ))),
    }
}

/// The client and the name of the identity the dry-run runs as.
async fn check_identity(
    s: &Session,
    obj: &ReleaseObject,
    opts: &DiffOpts,
) -> Result<(Client, String)> {
    if !opts.as_release {
        let who = match &s.config.auth_info.impersonate {
            Some(u) => u.clone(),
            None => "your kubeconfig user".into(),
        };
        return Ok((s.client.clone(), who));
    }
    let key = obj.key();
    let sa = opm_core::impersonation::effective_service_account(
        obj.common().service_account_name.as_deref(),
        opts.service_account.as_deref(),
    )
    .ok_or_else(|| {
        CliError::Usage(format!(
            "{} has no spec.serviceAccountName: pass --service-account NAME (the operator's --default-service-account)",
            releases::describe(&key)
        ))
    })?;
    let found = Api::<ServiceAccount>::namespaced(s.client.clone(), &key.namespace)
        .get_opt(&sa)
        .await
        .map_err(|e| CliError::api(format!("reading ServiceAccount {}/{sa}", key.namespace), &e))?;
    if found.is_none() {
        return Err(CliError::Other(format!(
            "ServiceAccount {}/{sa} not found: the operator would stall with ImpersonationFailed",
            key.namespace
        )));
    }
    let who = opm_core::impersonation::impersonation(&key.namespace, &sa).user;
    Ok((s.impersonating(&key.namespace, &sa)?, who))
}

/// Renders the proposed release: a local package (`--path`), or the release's module with
/// the proposed version and values, or the release's current source artifact.
async fn render(
    s: &Session,
    client: &Client,
    obj: &ReleaseObject,
    opts: &DiffOpts,
    secrets: &mut SecretTable,
) -> Result<(Value, u64, Vec<String>)> {
    let key = obj.key();
    let cache = match &opts.cache_dir {
        Some(d) => Dir::Kept(d.clone()),
        None => Dir::Temp(
            tempfile::tempdir()
                .map_err(|e| CliError::Other(format!("temporary directory: {e}")))?,
        ),
    };
    let mut config = RenderConfig::new(&opts.cue.cue_binary);
    config.registry = opts.cue.cue_registry.clone();
    config.timeout = opts.cue.render_timeout;
    config.cue_cache_dir = Some(cache.path().join("cue"));
    let renderer = Renderer::new(config);
    // SPEC §30: OPM modules and instances render through `--platform FILE`, else the
    // cluster's Platform `cluster` (read as the operator reads it: Ready for its spec).
    let opm = opm_operator::cue::opm::Opm::default();
    match &opts.platform {
        Some(file) => opm.fix_platform(
            opm_operator::commands::render_cmd::read_platform(file)
                .map_err(|e| CliError::Usage(e.to_string()))?,
        ),
        None => {
            let api = kube::Api::<opm_core::api::platform::Platform>::all(s.client.clone());
            let p = api
                .get_opt(opm_core::api::platform::PLATFORM_NAME)
                .await
                .ok()
                .flatten();
            opm.set_platform(p);
        }
    }
    if let Some(dir) = &opts.path {
        if opts.values.is_some() || opts.version.is_some() {
            return Err(CliError::Usage(
                "--path renders a release package: --values and --version do not apply".into(),
            ));
        }
        let r = renderer
            .render_package(dir)
            .await
            .map_err(|e| render_error(e, secrets))?;
        return Ok((r.exported, r.bytes, Vec::new()));
    }
    match obj {
        ReleaseObject::ModuleRelease(m) => {
            let version = opts
                .version
                .clone()
                .unwrap_or_else(|| m.spec.module.version.clone());
            let module = ModuleRef::new(&m.spec.module.path, &version, None)
                .map_err(|e| render_error(e, secrets))?;
            let values = match &opts.values {
                Some(f) => Some(
                    opm_operator::cue::local_values::merged(&[], Some(f))
                        .map_err(CliError::Usage)?,
                ),
                None => m.spec.values.clone(),
            };
            let secret_ref = m.spec.module.secret_ref.as_ref().map(|r| r.name.clone());
            let (values, credentials, perturbed) =
                if m.spec.values_from.is_empty() && secret_ref.is_none() {
                    (values, None, None)
                } else {
                    let read = opm_operator::steps::values_from::read(
                        Ok(client.clone()),
                        &key.namespace,
                        &m.spec.values_from,
                        secret_ref.as_deref(),
                        secrets,
                        opm_core::config::DEFAULT_MAX_VALUES_BYTES,
                        &mut Vec::new(),
                    )
                    .await;
                    let InputKind::ValuesRead {
                        values: got,
                        credentials,
                    } = read
                    else {
                        return Err(CliError::Other("reading valuesFrom gave no answer".into()));
                    };
                    opm_core::values_from::check_size(
                        &m.spec.values_from,
                        &got,
                        opm_core::config::DEFAULT_MAX_VALUES_BYTES,
                    )
                    .map_err(|f| {
                        CliError::Other(format!("valuesFrom ({}): {}", f.reason, f.message))
                    })?;
                    let merged = opm_core::values_from::compose(
                        &key.namespace,
                        &m.spec.values_from,
                        &got,
                        values.as_ref(),
                        None,
                    )
                    .map_err(|f| {
                        CliError::Other(format!(
                            "valuesFrom ({}): {}",
                            f.reason,
                            secrets.scrub(&f.message)
                        ))
                    })?;
                    let creds = match (&secret_ref, credentials) {
                        (Some(name), Some(c)) => {
                            let digest =
                                opm_core::values_from::credentials(&key.namespace, name, &c, None)
                                    .map_err(|f| {
                                        CliError::Other(format!(
                                            "module.secretRef ({}): {}",
                                            f.reason, f.message
                                        ))
                                    })?;
                            secrets
                                .credentials(&digest)
                                .map(|b| (digest.clone(), b.to_vec()))
                        }
                        _ => None,
                    };
                    let perturbed = merged
                        .as_ref()
                        .filter(|_| secrets.reads_secret_values())
                        .map(|v| secrets.restore_strings_perturbed(v));
                    (
                        merged.map(|v| secrets.restore_strings(&v)),
                        creds,
                        perturbed,
                    )
                };
            let values = values.unwrap_or_else(|| Value::Object(Default::default()));
            let identity = ReleaseIdentity {
                name: key.name.clone(),
                namespace: key.namespace.clone(),
            };
            let facts = opm
                .facts(&renderer, &module, credentials.as_ref())
                .await
                .map_err(|e| render_error(e, secrets))?;
            match facts.flavour {
                opm_core::opm::Flavour::Opm => {
                    let (r, _) = opm
                        .render_module(
                            &renderer,
                            &module,
                            &facts,
                            &values,
                            &identity,
                            credentials.as_ref(),
                        )
                        .await
                        .map_err(|e| render_error(e, secrets))?;
                    let (exported, bytes) = opm_operator::cue::rendered::Rendered::into_parts(r);
                    let derived = match perturbed {
                        None => Vec::new(),
                        Some(p) => {
                            let other = opm
                                .render_module(
                                    &renderer,
                                    &module,
                                    &facts,
                                    &p,
                                    &identity,
                                    credentials.as_ref(),
                                )
                                .await
                                .ok()
                                .map(|(r, _)| opm_operator::cue::rendered::Rendered::into_parts(r));
                            secret_derived(&exported, other.as_ref().map(|(v, _)| v))
                        }
                    };
                    return Ok((exported, bytes, derived));
                }
                opm_core::opm::Flavour::CoreV0 => {
                    return Err(CliError::Other(opm_core::opm::core_v0_message(&format!(
                        "module {}@{}",
                        module.path, module.version
                    ))));
                }
                opm_core::opm::Flavour::Plain => {}
            }
            let r = renderer
                .render_module_cached_with(&module, &values, &identity, credentials.clone())
                .await
                .map_err(|e| render_error(e, secrets))?;
            let (exported, bytes) = opm_operator::cue::rendered::Rendered::into_parts(r);
            let derived = match perturbed {
                None => Vec::new(),
                Some(p) => {
                    let other = renderer
                        .render_module_cached_with(&module, &p, &identity, credentials)
                        .await
                        .ok()
                        .map(opm_operator::cue::rendered::Rendered::into_parts);
                    secret_derived(&exported, other.as_ref().map(|(v, _)| v))
                }
            };
            Ok((exported, bytes, derived))
        }
        ReleaseObject::Release(r) => {
            if opts.values.is_some() || opts.version.is_some() {
                return Err(CliError::Usage(
                    "--values and --version apply to a ModuleRelease; for a Release give --path DIR (a release package)".into(),
                ));
            }
            let (url, digest) = source_artifact(s, r).await?;
            let fetcher = opm_operator::artifact::fetch::Fetcher::new(
                opm_operator::artifact::fetch::FetchConfig {
                    timeout: std::time::Duration::from_secs(60),
                    max_bytes: 64 * 1024 * 1024,
                },
            )
            .map_err(|e| CliError::Other(format!("HTTP client: {e}")))?;
            let artifacts = opm_operator::artifact::artifact_cache::ArtifactCache::new(
                cache.path(),
                fetcher,
                Default::default(),
                Default::default(),
            )
            .map_err(|e| CliError::Other(format!("artifact cache: {e}")))?;
            let handle = artifacts
                .get(&url, &digest)
                .await
                .map_err(|e| CliError::Other(format!("fetching the source artifact {url}: {e}")))?;
            let dir =
                opm_operator::artifact::release_path::resolve_path(handle.root(), &r.spec.path)
                    .map_err(|e| CliError::Other(e.to_string()))?;
            if opm_operator::artifact::release_path::holds(
                handle.root(),
                &dir,
                opm_core::opm::INSTANCE_FILE,
            ) {
                let (r, _) = opm
                    .render_instance(&renderer, &digest, &r.spec.path, handle.root(), &dir)
                    .await
                    .map_err(|e| render_error(e, secrets))?;
                let (exported, bytes) = opm_operator::cue::rendered::Rendered::into_parts(r);
                return Ok((exported, bytes, Vec::new()));
            }
            let rendered = renderer
                .render_package(&dir)
                .await
                .map_err(|e| render_error(e, secrets))?;
            Ok((rendered.exported, rendered.bytes, Vec::new()))
        }
    }
}

/// The rendered values a `valuesFrom` Secret value reaches (issue 31 item 9): every
/// string and number of the real render's objects that differs in a render with each
/// Secret value changed (`other`, see
/// [`SecretTable::restore_strings_perturbed`]), however the module transformed it (upper
/// case, base64, a hash). The digests of [`SecretTable::redact_render_strings`] catch
/// only values that contain the Secret's text. When the changed render fails (a schema
/// that refuses the changed value), every value of every object counts: nothing derived
/// from a Secret is printed, at the price of hiding the rest too.
fn secret_derived(real: &Value, other: Option<&Value>) -> Vec<String> {
    fn walk(a: &Value, b: Option<&Value>, out: &mut Vec<String>) {
        match a {
            Value::Object(m) => {
                for (k, v) in m {
                    walk(v, b.and_then(|b| b.get(k)), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, b.and_then(|b| b.get(i)), out);
                }
            }
            Value::String(s) if b != Some(a) && !s.is_empty() => out.push(s.clone()),
            Value::Number(n) if b != Some(a) => out.push(n.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let components = |v: &Value| v.get("components").cloned();
    let theirs = other.and_then(components);
    if let Some(mine) = components(real) {
        walk(&mine, theirs.as_ref(), &mut out);
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

enum Dir {
    Kept(PathBuf),
    Temp(tempfile::TempDir),
}

impl Dir {
    fn path(&self) -> &std::path::Path {
        match self {
            Dir::Kept(p) => p,
            Dir::Temp(t) => t.path(),
        }
    }
}

/// The artifact the Release's Flux source advertises (read as the user).
async fn source_artifact(s: &Session, r: &opm_core::api::Release) -> Result<(String, String)> {
    let sr = &r.spec.source_ref;
    let namespace = if sr.namespace.is_empty() {
        r.metadata.namespace.clone().unwrap_or_default()
    } else {
        sr.namespace.clone()
    };
    let api_version = if sr.api_version.is_empty() {
        opm_core::constants::FLUX_SOURCE_API_VERSION.to_string()
    } else {
        sr.api_version.clone()
    };
    let resource = opm_operator::steps::source::api_resource(&api_version, &sr.kind);
    let what = format!("{} {namespace}/{}", sr.kind, sr.name);
    let src = Api::<DynamicObject>::namespaced_with(s.client.clone(), &namespace, &resource)
        .get(&sr.name)
        .await
        .map_err(|e| CliError::api(format!("reading the source {what}"), &e))?;
    match opm_operator::steps::source::artifact_of(&src.data) {
        Ok(a) => Ok((a.url, a.digest)),
        Err(e) => Err(CliError::Other(format!(
            "the source {what} has no usable artifact ({e}); give --path DIR to diff a local release package"
        ))),
    }
}
