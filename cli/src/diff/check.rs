//! One desired object against the cluster: who owns it (the core's rule), SPEC §28's
//! write plan, then a server-side dry-run apply and the fields it would change.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use opm_core::constants::FIELD_MANAGER;
use opm_core::hooks;
use opm_core::input::{ApiError, LiveMeta, LiveObject};
use opm_core::{DesiredObject, ownership, policy};
use opm_operator::cue::secrets::{MIN_SCRUBBED, SecretTable};
use opm_operator::kube::discovery::Resolver;
use serde_json::Value;

use crate::error::{CliError, Result};
use crate::report::{Changed, Noted, Refused, Report, field_changes};

/// What every object's check needs.
pub(super) struct Ctx<'a> {
    pub(super) client: &'a Client,
    pub(super) resolver: &'a Resolver,
    pub(super) secrets: &'a SecretTable,
    pub(super) identity: &'a str,
    pub(super) uuid: &'a str,
    pub(super) persisted: &'a [opm_core::api::InventoryEntry],
    pub(super) adopt: bool,
    pub(super) force: bool,
    /// (group, kind) defined by CRDs in this render: their objects cannot be dry-run yet.
    pub(super) crd_kinds: Vec<(String, String)>,
    /// Rendered values a `valuesFrom` Secret value reaches, however transformed
    /// (`render::secret_derived`): never printed.
    pub(super) derived: Vec<String>,
}

impl Ctx<'_> {
    /// `s` with every Secret value, and every value derived from one, hidden.
    fn scrub(&self, s: &str) -> String {
        let mut out = self.secrets.scrub(s);
        for d in &self.derived {
            // A short derived value (a length, a flag) is hidden where it is the whole
            // value; searching for it inside others would hide everything.
            if out == *d || (d.chars().count() >= MIN_SCRUBBED && out.contains(d.as_str())) {
                out = out.replace(d.as_str(), "<redacted>");
            }
        }
        out
    }
}

pub(super) fn crd_kinds(objects: &[DesiredObject]) -> Vec<(String, String)> {
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
pub(super) fn forbidden_or(
    identity: &str,
    what: &str,
    err: &kube::Error,
    secrets: &SecretTable,
) -> CliError {
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

/// Reports what the operator would do with `o`.
pub(super) async fn check(ctx: &Ctx<'_>, o: &DesiredObject, report: &mut Report) -> Result<()> {
    let Some(api) = api_of(ctx, o, report).await? else {
        return Ok(());
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
    if let Some(l) = &live
        && let Some(refused) = not_ours(ctx, o, l)
    {
        report.refused.push(refused);
        return Ok(());
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
    report_dry_run(ctx, o, live.as_ref(), &dry, report);
    Ok(())
}

/// The API for `o`'s kind, or `None` when the kind is not served (reported here).
async fn api_of(
    ctx: &Ctx<'_>,
    o: &DesiredObject,
    report: &mut Report,
) -> Result<Option<Api<DynamicObject>>> {
    let message =
        match opm_operator::kube::dynamic::api_for(ctx.client.clone(), ctx.resolver, &o.id).await {
            Ok(a) => return Ok(Some(a)),
            Err(ApiError::NotFound { message }) => message,
            Err(e) => {
                return Err(CliError::Api {
                    what: format!("resolving {}", o.id.display()),
                    error: e,
                });
            }
        };
    if !policy::write_plan(&o.policy, false, ctx.force).writes() {
        // Not even created when absent (`ssa: Ignore`): its kind need not exist.
        report.unchanged += 1;
    } else if ctx
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
    Ok(None)
}

/// Ownership, decided by the core with its own wording: every object, whatever its `ssa`
/// policy or the inventory says, as the operator does.
fn not_ours(ctx: &Ctx<'_>, o: &DesiredObject, live: &Value) -> Option<Refused> {
    let meta = LiveMeta {
        uid: live
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        labels: live
            .pointer("/metadata/labels")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default(),
    };
    let seen = LiveObject {
        id: o.id.clone(),
        result: Ok(Some(meta)),
    };
    ownership::decide_listed(
        std::slice::from_ref(&o.id),
        &[seen],
        ctx.uuid,
        ctx.adopt,
        ctx.persisted,
        None,
    )
    .err()
    .map(|f| Refused {
        id: o.id.clone(),
        reason: f.reason.to_string(),
        message: f.message,
    })
}

/// A dry-run the server accepted: created, changed (with the fields) or unchanged.
fn report_dry_run(
    ctx: &Ctx<'_>,
    o: &DesiredObject,
    live: Option<&Value>,
    dry: &Value,
    report: &mut Report,
) {
    let Some(l) = live else {
        report.created.push(Noted {
            id: o.id.clone(),
            note: hooks::phase_of(&o.manifest)
                .map(|p| format!("{p} hook: {}", hook_words(p)))
                .unwrap_or_default(),
        });
        return;
    };
    let fields = field_changes(&o.id, l, dry, &o.policy.ignore, &|s: &str| ctx.scrub(s));
    if fields.is_empty() {
        report.unchanged += 1;
        return;
    }
    // SPEC §32: a hook Job of another render is deleted and run again.
    let rerun = hooks::is_job(&o.id)
        && hooks::phase_of(&o.manifest).is_some()
        && hooks::live_digest(l) != hooks::live_digest(&o.manifest);
    report.changed.push(Changed {
        id: o.id.clone(),
        fields,
        recreate: rerun.then(|| format!("a {} hook Job of another render runs again", hook_of(o))),
        hook: hook_of(o),
    });
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
