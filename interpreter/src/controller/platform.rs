//! The Platform's controller (SPEC §30): watches the one Platform `cluster`, evaluates its
//! platform package once per generation (one `cue` run) and writes its status; hands the
//! Platform to OPM renders; and re-triggers releases when it matters: a Platform turning
//! Ready re-triggers those waiting with `PlatformNotReady`, and a new Platform digest every
//! OPM release, each through the controllers' fair queues (SPEC §24).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use opm_core::Kind;
use opm_core::api::platform::{PLATFORM_NAME, Platform};
use opm_core::opm::platform::{self as rules, Evaluation};
use opm_core::render_ahead::waits_for_platform;

use super::context::{Ctx, heartbeat};

/// A transient evaluation failure (registry unreachable, `cue` timed out) is retried after
/// this long, without waiting for a change of the Platform.
const RETRY_TRANSIENT: Duration = Duration::from_secs(10);

/// Whether the cluster serves the Platform kind (its CRD installed).
async fn served(ctx: &Ctx) -> bool {
    ctx.rt
        .resolver
        .resolve("releases.opmodel.dev", "v1alpha1", "Platform")
        .await
        .is_ok()
}

/// Runs until the watch ends. Without the Platform CRD, OPM releases wait with
/// `PlatformNotReady` ("no Platform cluster exists").
pub(super) async fn run(ctx: Arc<Ctx>) {
    let opm = &ctx.rt.local.opm;
    if !served(&ctx).await {
        tracing::warn!(
            "the Platform kind is not served (CRD not installed): OPM releases wait for it"
        );
        opm.set_platform(None);
        return;
    }
    let api = Api::<Platform>::all(ctx.rt.clients.operator());
    let config = watcher::Config::default().fields(&format!("metadata.name={PLATFORM_NAME}"));
    let mut events = watcher(api.clone(), config)
        .default_backoff()
        .map(heartbeat(&ctx.rt.health, "Platform"))
        .boxed();
    let mut listing: Option<Option<Platform>> = None;
    let mut current: Option<Platform> = None;
    let mut ready_digest: Option<String> = None;
    let mut retry: Option<Retry> = None;
    // Until the first list, OPM renders wait with "not read yet"; once it is in, the
    // releases that waited are told what it holds (`first_list`).
    let mut listed = false;
    loop {
        let mut force = false;
        let mut first_list = false;
        tokio::select! {
            ev = events.next() => match ev {
                None => break,
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "Platform watch error");
                    continue;
                }
                Some(Ok(watcher::Event::Init)) => {
                    listing = Some(None);
                    continue;
                }
                Some(Ok(watcher::Event::InitApply(p))) => {
                    listing = Some(Some(p));
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    current = listing.take().flatten();
                    first_list = !std::mem::replace(&mut listed, true);
                }
                Some(Ok(watcher::Event::Apply(p))) => current = Some(p),
                Some(Ok(watcher::Event::Delete(_))) => current = None,
            },
            () = async { retry.as_mut().expect("guarded").await }, if retry.is_some() => {
                retry = None;
                force = true;
            }
        }
        opm.set_platform(current.clone());
        if let Some(p) = &current
            && (force || needs_evaluation(p))
        {
            let (written, retry_at) = evaluate(&ctx, &api, p).await;
            if retry_at.is_some() {
                retry = retry_at;
            }
            if written {
                // The watch delivers the written status; readiness is judged then.
                continue;
            }
        }
        let now_ready = opm.ready().ok().map(|(_, digest)| digest);
        if now_ready != ready_digest {
            if now_ready.is_some() {
                retrigger(&ctx);
            }
            tracing::info!(digest = ?now_ready, "Platform readiness changed");
            ready_digest = now_ready;
        } else if first_list && now_ready.is_none() {
            retrigger(&ctx);
        }
    }
    ctx.rt.health.watch_ended("Platform");
}

/// A timer for the retry of a transient failure.
type Retry = std::pin::Pin<Box<tokio::time::Sleep>>;

/// Evaluates `p` and writes its status: whether the write succeeded, and the retry timer
/// a transient evaluation failure or a failed write sets.
async fn evaluate(ctx: &Ctx, api: &Api<Platform>, p: &Platform) -> (bool, Option<Retry>) {
    let opm = &ctx.rt.local.opm;
    let mut retry = None;
    let evaluation = opm.evaluate_platform(&ctx.rt.local.renderer, p).await;
    if matches!(
        evaluation,
        Evaluation::Failed {
            transient: true,
            ..
        }
    ) {
        retry = Some(Box::pin(tokio::time::sleep(RETRY_TRANSIENT)));
    }
    let mut next = p.clone();
    next.status = Some(rules::status(p, &evaluation, jiff::Timestamp::now()));
    tracing::info!(
        generation = p.metadata.generation.unwrap_or_default(),
        ?evaluation,
        "Platform evaluated"
    );
    match api
        .replace_status(PLATFORM_NAME, &PostParams::default(), &next)
        .await
    {
        Ok(_) => (true, retry),
        Err(e) => {
            tracing::warn!(error = %e, "writing the Platform's status failed; retrying");
            (false, Some(Box::pin(tokio::time::sleep(RETRY_TRANSIENT))))
        }
    }
}

/// The Platform's status does not describe its current spec.
fn needs_evaluation(p: &Platform) -> bool {
    let Some(s) = &p.status else {
        return true;
    };
    s.observed_generation != p.metadata.generation.unwrap_or_default()
        || s.digest != rules::digest(&p.spec)
        || !s.conditions.iter().any(|c| c.type_ == "Ready")
}

/// Every release that renders through the Platform, or waits for it, into its queue.
fn retrigger(ctx: &Ctx) {
    let opm = &ctx.rt.local.opm;
    let known_mr = opm.releases(Kind::ModuleRelease);
    let known_rel = opm.releases(Kind::Release);
    let mut n = 0;
    for mr in ctx.mr_store.state() {
        let key = opm_core::ReleaseKey {
            kind: Kind::ModuleRelease,
            namespace: mr.metadata.namespace.clone().unwrap_or_default(),
            name: mr.metadata.name.clone().unwrap_or_default(),
        };
        if known_mr.contains(&key) || waits_for_platform(mr.status.as_ref()) {
            let _ = ctx.mr_tx.unbounded_send(ObjectRef::from_obj(&*mr));
            n += 1;
        }
    }
    for rel in ctx.rel_store.state() {
        let key = opm_core::ReleaseKey {
            kind: Kind::Release,
            namespace: rel.metadata.namespace.clone().unwrap_or_default(),
            name: rel.metadata.name.clone().unwrap_or_default(),
        };
        if known_rel.contains(&key) || waits_for_platform(rel.status.as_ref()) {
            let _ = ctx.rel_tx.unbounded_send(ObjectRef::from_obj(&*rel));
            n += 1;
        }
    }
    tracing::info!(releases = n, "Platform ready: OPM releases re-triggered");
}
