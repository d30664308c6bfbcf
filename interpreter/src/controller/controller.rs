//! The two kube-runtime `Controller`s (ModuleRelease, Release) and the extra triggers the
//! core cannot see: a Flux source's artifact change, a dependency turning Ready, a
//! ServiceAccount appearing. Watch predicates let through only what should start an attempt
//! (generation, the on-demand annotation, deletion and finalizer changes, any annotation on
//! a deleting release), so a status write never triggers a reconcile of its own.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::{FutureExt, Shared};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use opm_core::api::{ModuleRelease, Release};
use opm_core::constants::{FLUX_SOURCE_API_VERSION, REQUESTED_AT_ANNOTATION, SOURCE_KINDS};
use opm_core::fairness::Limits;
use opm_core::reason::Reason;
use opm_core::{Kind, ReleaseKey, ReleaseObject};
use serde_json::Value;

use crate::controller::admission::Admission;
use crate::controller::driver::{self, DriverError, Runtime};

/// A shutdown signal both controllers and the trigger tasks can wait on.
pub type Shutdown = Shared<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>;

/// Makes a [`Shutdown`] from any future.
pub fn shutdown_on(f: impl Future<Output = ()> + Send + Sync + 'static) -> Shutdown {
    let boxed: Pin<Box<dyn Future<Output = ()> + Send + Sync>> = Box::pin(f);
    boxed.shared()
}

/// Controller settings from the command line.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Attempts run at once per kind (`--concurrency`); 0 = unbounded.
    pub concurrency: u16,
    /// `--watch-label-selector`.
    pub label_selector: Option<String>,
    /// `--max-concurrent-per-namespace`; `None` = half of `concurrency`, at least 1.
    pub max_concurrent_per_namespace: Option<u16>,
}

/// How long after a ServiceAccount appears the releases waiting for it are retried.
const SERVICE_ACCOUNT_SETTLE: Duration = Duration::from_secs(3);

/// What reconcilers share.
struct Ctx {
    rt: Arc<Runtime>,
    mr_store: Store<ModuleRelease>,
    rel_store: Store<Release>,
    mr_tx: mpsc::UnboundedSender<ObjectRef<ModuleRelease>>,
    rel_tx: mpsc::UnboundedSender<ObjectRef<Release>>,
    /// Per-kind fair gates (`--concurrency`, `--max-concurrent-per-namespace`).
    mr_gate: Arc<Admission>,
    rel_gate: Arc<Admission>,
    /// Attempts that failed outside the core, consecutively, per release: drives the
    /// backoff of [`error_policy`].
    errors: Mutex<HashMap<ReleaseKey, i64>>,
    shutdown: Shutdown,
}

/// Hash of what should start an attempt.
fn trigger_hash<K: Resource>(obj: &K) -> Option<u64> {
    let m = obj.meta();
    let mut h = DefaultHasher::new();
    m.generation.hash(&mut h);
    let deleting = m.deletion_timestamp.is_some();
    deleting.hash(&mut h);
    let annotations = m.annotations.clone().unwrap_or_default();
    if deleting {
        // Our own finalizer edit while live must not start a second attempt; while
        // deleting, finalizer and annotation changes (e.g. the orphan annotation) must.
        m.finalizers.hash(&mut h);
        annotations.hash(&mut h);
    } else {
        annotations.get(REQUESTED_AT_ANNOTATION).hash(&mut h);
    }
    m.uid.hash(&mut h);
    Some(h.finish())
}

/// Nothing reads the releases' managedFields, and at a thousand releases they are a good
/// part of what the stores hold.
fn drop_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

fn watcher_config(settings: &Settings) -> watcher::Config {
    let wc = watcher::Config::default();
    match &settings.label_selector {
        Some(sel) if !sel.is_empty() => wc.labels(sel),
        _ => wc,
    }
}

/// Runs both controllers until `shutdown` resolves; in-flight attempts finish first.
pub async fn run(rt: Arc<Runtime>, settings: Settings, shutdown: Shutdown) {
    let client = rt.clients.operator();
    let wc = watcher_config(&settings);

    let health = rt.health.clone();
    let (mr_reader, mr_writer) = reflector::store::<ModuleRelease>();
    let mr_stream = watcher(Api::<ModuleRelease>::all(client.clone()), wc.clone())
        .default_backoff()
        .map(heartbeat(&health, "ModuleRelease"))
        .modify(drop_managed_fields)
        .reflect(mr_writer)
        .applied_objects()
        .predicate_filter(trigger_hash, PredicateConfig::default());
    let (rel_reader, rel_writer) = reflector::store::<Release>();
    let rel_stream = watcher(Api::<Release>::all(client.clone()), wc)
        .default_backoff()
        .map(heartbeat(&health, "Release"))
        .modify(drop_managed_fields)
        .reflect(rel_writer)
        .applied_objects()
        .predicate_filter(trigger_hash, PredicateConfig::default());

    let (mr_tx, mr_rx) = mpsc::unbounded();
    let (rel_tx, rel_rx) = mpsc::unbounded();
    let limits = Limits::with_default_per_namespace(
        usize::from(settings.concurrency),
        settings.max_concurrent_per_namespace.map(usize::from),
    );
    let mr_gate = Admission::new(limits, health.clone());
    let rel_gate = Admission::new(limits, health.clone());
    health.add_gate(mr_gate.clone());
    health.add_gate(rel_gate.clone());
    tracing::info!(
        concurrency = limits.total,
        per_namespace = limits.per_namespace,
        "attempt slots per kind"
    );
    let ctx = Arc::new(Ctx {
        rt: rt.clone(),
        mr_store: mr_reader.clone(),
        rel_store: rel_reader.clone(),
        mr_tx,
        rel_tx,
        mr_gate,
        rel_gate,
        errors: Mutex::new(HashMap::new()),
        shutdown: shutdown.clone(),
    });

    // Unbounded here: the admission gates bound attempts, fairly across namespaces
    // (kube-runtime still runs at most one attempt per release at a time).
    let config = kube::runtime::Config::default().concurrency(0);
    let mr = Controller::for_stream(mr_stream, mr_reader)
        .with_config(config.clone())
        .reconcile_on(mr_rx)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_mr, error_policy, ctx.clone())
        .for_each(|r| async move { log_result(r) })
        .then(ended(&health, "ModuleRelease", shutdown.clone()));
    let rel = Controller::for_stream(rel_stream, rel_reader)
        .with_config(config)
        .reconcile_on(rel_rx)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_rel, error_policy, ctx.clone())
        .for_each(|r| async move { log_result(r) })
        .then(ended(&health, "Release", shutdown.clone()));

    let sa = tokio::spawn(watch_service_accounts(ctx.clone()));
    let managed = tokio::spawn(watch_managed_objects(ctx.clone()));
    // SPEC §27: referenced ConfigMaps and Secrets re-trigger their releases.
    let values = tokio::spawn(crate::kube::values_watch::run(
        rt.clone(),
        ctx.mr_store.clone(),
        ctx.mr_tx.clone(),
    ));
    let mut sources = Vec::new();
    for kind in SOURCE_KINDS {
        if source_kind_served(&rt, kind).await {
            sources.push(tokio::spawn(watch_source(ctx.clone(), kind)));
        } else {
            tracing::info!(
                kind,
                "Flux source kind not served; its changes are not watched"
            );
        }
    }
    futures::join!(mr, rel);
    sa.abort();
    managed.abort();
    values.abort();
    for s in sources {
        s.abort();
    }
    tracing::info!("controllers stopped");
}

/// Feeds a watch stream's items to the `/healthz` heartbeats.
fn heartbeat<T, E>(
    health: &Arc<crate::ops::health::Health>,
    name: &'static str,
) -> impl FnMut(Result<T, E>) -> Result<T, E> + use<T, E> {
    let health = health.clone();
    health.watch_started(name);
    move |item| {
        health.watch_item(name, item.is_ok());
        item
    }
}

/// Marks watch `name` ended when its loop returns before shutdown was asked for.
fn ended(
    health: &Arc<crate::ops::health::Health>,
    name: &'static str,
    shutdown: Shutdown,
) -> impl FnOnce(()) -> futures::future::Ready<()> + use<> {
    let health = health.clone();
    move |()| {
        if shutdown.peek().is_none() {
            tracing::error!(watch = name, "a controller loop ended");
            health.watch_ended(name);
        }
        futures::future::ready(())
    }
}

fn log_result<T: std::fmt::Debug, E: std::fmt::Display>(r: Result<T, E>) {
    match r {
        Ok(o) => tracing::trace!(object = ?o, "reconciled"),
        Err(e) => tracing::debug!(error = %e, "controller error"),
    }
}

async fn reconcile_mr(obj: Arc<ModuleRelease>, ctx: Arc<Ctx>) -> Result<Action, DriverError> {
    let was_ready = is_ready(obj.status.as_ref());
    let gate = ctx.mr_gate.clone();
    admitted(
        &gate,
        ReleaseObject::ModuleRelease((*obj).clone()),
        was_ready,
        ctx,
    )
    .await
}

async fn reconcile_rel(obj: Arc<Release>, ctx: Arc<Ctx>) -> Result<Action, DriverError> {
    let was_ready = is_ready(obj.status.as_ref());
    let gate = ctx.rel_gate.clone();
    admitted(
        &gate,
        ReleaseObject::Release((*obj).clone()),
        was_ready,
        ctx,
    )
    .await
}

/// Waits for a fair slot, then runs the attempt. A shutdown while waiting drops the wait
/// (the attempt never started; the next process picks the release up). A panic anywhere
/// in the attempt fails only this attempt: it is retried with backoff, and the process
/// and the other attempts go on.
async fn admitted(
    gate: &Arc<Admission>,
    stored: ReleaseObject,
    was_ready: bool,
    ctx: Arc<Ctx>,
) -> Result<Action, DriverError> {
    let key = stored.key();
    let slot = tokio::select! {
        slot = gate.acquire(&key.namespace) => slot,
        () = ctx.shutdown.clone() => return Ok(Action::await_change()),
    };
    let result = contain_panics(&key, reconcile(stored, was_ready, ctx.clone())).await;
    drop(slot);
    let mut errors = ctx.errors.lock().unwrap_or_else(|p| p.into_inner());
    if result.is_ok() {
        errors.remove(&key);
    } else {
        *errors.entry(key).or_insert(0) += 1;
    }
    result
}

/// Runs an attempt's future; a panic inside it becomes [`DriverError::Panicked`] (logged,
/// then retried with backoff by [`error_policy`]) instead of unwinding through the
/// controller and ending the process.
async fn contain_panics<T>(
    key: &ReleaseKey,
    attempt: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    AssertUnwindSafe(attempt)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let message = panic_message(panic.as_ref());
            tracing::error!(
                kind = key.kind.as_str(),
                namespace = %key.namespace,
                name = %key.name,
                panic = %message,
                "the attempt panicked; it is retried with backoff"
            );
            Err(DriverError::Panicked(message))
        })
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

fn is_ready(status: Option<&opm_core::api::ReleaseStatus>) -> bool {
    status.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// One attempt, starting from the store's copy of the release (the driver reads it again
/// when the copy may predate our own last write).
async fn reconcile(
    stored: ReleaseObject,
    was_ready: bool,
    ctx: Arc<Ctx>,
) -> Result<Action, DriverError> {
    let key = stored.key();
    let finished = driver::run_attempt_from(&ctx.rt, &key, Some(stored)).await?;
    if !finished.outcome.is_failure() && !was_ready {
        trigger_dependents(&ctx, &key);
    }
    Ok(match finished.requeue_after {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// An attempt that failed outside the core (read error, protocol error, panic) is retried
/// with the §5 backoff of its consecutive such failures (5s, 10s … 5m), kept in memory.
fn error_policy<K: Resource<DynamicType = ()>>(
    obj: Arc<K>,
    err: &DriverError,
    ctx: Arc<Ctx>,
) -> Action {
    let n = opm_core::Kind::parse(&K::kind(&()))
        .map(|kind| ReleaseKey {
            kind,
            namespace: obj.meta().namespace.clone().unwrap_or_default(),
            name: obj.meta().name.clone().unwrap_or_default(),
        })
        .and_then(|key| {
            let errors = ctx.errors.lock().unwrap_or_else(|p| p.into_inner());
            errors.get(&key).copied()
        })
        .unwrap_or(1);
    let delay = opm_core::backoff::compute_backoff(n);
    tracing::warn!(
        error = %err,
        kind = err.metric_label(),
        retry_in = ?delay,
        "attempt could not run; retrying"
    );
    Action::requeue(delay)
}

/// The keys a release's `dependsOn` names, with defaults filled in.
fn depends_on(obj: &ReleaseObject) -> Vec<ReleaseKey> {
    crate::steps::deps::snapshot(obj).depends_on
}

/// A release turned Ready: re-trigger every release (either kind) that depends on it.
/// Runs once per release becoming Ready, over every release in the stores: releases
/// without `dependsOn` are skipped before anything is cloned (at a thousand releases
/// cloning all of them each time cost seconds of CPU during a rollout).
fn trigger_dependents(ctx: &Ctx, key: &ReleaseKey) {
    for mr in ctx.mr_store.state() {
        if mr.spec.common.depends_on.is_empty() {
            continue;
        }
        let obj = ReleaseObject::ModuleRelease((*mr).clone());
        if depends_on(&obj).contains(key) {
            let _ = ctx.mr_tx.unbounded_send(ObjectRef::from_obj(&*mr));
        }
    }
    for rel in ctx.rel_store.state() {
        if rel.spec.common.depends_on.is_empty() {
            continue;
        }
        let obj = ReleaseObject::Release((*rel).clone());
        if depends_on(&obj).contains(key) {
            let _ = ctx.rel_tx.unbounded_send(ObjectRef::from_obj(&*rel));
        }
    }
}

fn ready_reason(status: Option<&opm_core::api::ReleaseStatus>) -> Option<String> {
    status.and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.reason.clone())
    })
}

fn waits_for_service_account(status: Option<&opm_core::api::ReleaseStatus>) -> bool {
    matches!(
        ready_reason(status).and_then(|r| r.parse().ok()),
        Some(Reason::ImpersonationFailed | Reason::DeletionSAMissing)
    )
}

/// A managed object changed (a status change moves `resourceVersion`): re-trigger the
/// release that owns it, when that release judges health (SPEC §26: the wait and the
/// continuous health check are driven by these events, not by polling each object).
async fn watch_managed_objects(ctx: Arc<Ctx>) {
    use opm_core::render_value::release_uuid;
    let mut changes = ctx.rt.watch.subscribe();
    while let Some(c) = changes.next().await {
        let ns = &c.release_namespace;
        let name = &c.release_name;
        if release_uuid(Kind::ModuleRelease, ns, name) == c.release_uuid {
            let waits = ctx
                .mr_store
                .get(&ObjectRef::new(name).within(ns))
                .is_some_and(|mr| mr.spec.common.waits());
            if waits {
                let _ = ctx.mr_tx.unbounded_send(ObjectRef::new(name).within(ns));
            }
        } else if release_uuid(Kind::Release, ns, name) == c.release_uuid {
            let waits = ctx
                .rel_store
                .get(&ObjectRef::new(name).within(ns))
                .is_some_and(|r| r.spec.common.waits());
            if waits {
                let _ = ctx.rel_tx.unbounded_send(ObjectRef::new(name).within(ns));
            }
        }
    }
}

/// A ServiceAccount appeared: re-trigger releases in its namespace stalled on one.
async fn watch_service_accounts(ctx: Arc<Ctx>) {
    let api = Api::<ServiceAccount>::all(ctx.rt.clients.operator());
    let uid = |sa: &ServiceAccount| {
        let mut h = DefaultHasher::new();
        sa.metadata.uid.hash(&mut h);
        Some(h.finish())
    };
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .map(heartbeat(&ctx.rt.health, "ServiceAccount"))
        .applied_objects()
        .predicate_filter(uid, PredicateConfig::default());
    drain(stream, |sa: ServiceAccount| {
        let ns = sa.namespace().unwrap_or_default();
        let mrs: Vec<_> = ctx
            .mr_store
            .state()
            .iter()
            .filter(|mr| {
                mr.metadata.namespace.as_deref() == Some(ns.as_str())
                    && waits_for_service_account(mr.status.as_ref())
            })
            .map(|mr| ObjectRef::from_obj(&**mr))
            .collect();
        let rels: Vec<_> = ctx
            .rel_store
            .state()
            .iter()
            .filter(|rel| {
                rel.metadata.namespace.as_deref() == Some(ns.as_str())
                    && waits_for_service_account(rel.status.as_ref())
            })
            .map(|rel| ObjectRef::from_obj(&**rel))
            .collect();
        if mrs.is_empty() && rels.is_empty() {
            return;
        }
        // A new ServiceAccount usually comes with the RoleBinding that gives it its rights,
        // a moment later; an attempt before that would stall as forbidden for 30 minutes.
        let (mr_tx, rel_tx) = (ctx.mr_tx.clone(), ctx.rel_tx.clone());
        tokio::spawn(async move {
            tokio::time::sleep(SERVICE_ACCOUNT_SETTLE).await;
            for r in mrs {
                let _ = mr_tx.unbounded_send(r);
            }
            for r in rels {
                let _ = rel_tx.unbounded_send(r);
            }
        });
    })
    .await;
    ctx.rt.health.watch_ended("ServiceAccount");
}

async fn source_kind_served(rt: &Runtime, kind: &str) -> bool {
    let (group, version) = opm_core::object::split_api_version(FLUX_SOURCE_API_VERSION);
    rt.resolver.resolve(&group, &version, kind).await.is_ok()
}

/// A Flux source's artifact revision or digest changed: re-trigger every Release (any
/// namespace) that references it.
async fn watch_source(ctx: Arc<Ctx>, kind: &'static str) {
    let ar = crate::steps::source::api_resource(FLUX_SOURCE_API_VERSION, kind);
    let api = Api::<DynamicObject>::all_with(ctx.rt.clients.operator(), &ar);
    let artifact = |o: &DynamicObject| {
        let a = o.data.pointer("/status/artifact");
        let mut h = DefaultHasher::new();
        a.and_then(|a| a.get("revision"))
            .map(Value::to_string)
            .hash(&mut h);
        a.and_then(|a| a.get("digest"))
            .map(Value::to_string)
            .hash(&mut h);
        Some(h.finish())
    };
    // The store also serves the attempts' source reads (see `Observed`).
    let writer = reflector::store::Writer::new(ar.clone());
    ctx.rt
        .observed
        .add_source_store(kind, ar.clone(), writer.as_reader());
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .map(heartbeat(&ctx.rt.health, kind))
        .reflect(writer)
        .applied_objects()
        .predicate_filter(artifact, PredicateConfig::default());
    drain(stream, |src: DynamicObject| {
        let ns = src.namespace().unwrap_or_default();
        let name = src.name_any();
        for rel in ctx.rel_store.state() {
            let r = &rel.spec.source_ref;
            let rel_ns = rel.namespace().unwrap_or_default();
            let src_ns = if r.namespace.is_empty() {
                &rel_ns
            } else {
                &r.namespace
            };
            if r.kind == kind && r.name == name && *src_ns == ns {
                let _ = ctx.rel_tx.unbounded_send(ObjectRef::from_obj(&*rel));
            }
        }
    })
    .await;
    ctx.rt.health.watch_ended(kind);
}

async fn drain<T, E: std::fmt::Display>(
    stream: impl Stream<Item = Result<T, E>>,
    mut on_item: impl FnMut(T),
) {
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(obj) => on_item(obj),
            Err(e) => tracing::debug!(error = %e, "trigger watch error"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ReleaseKey {
        ReleaseKey {
            kind: opm_core::Kind::Release,
            namespace: "a".into(),
            name: "r".into(),
        }
    }

    #[tokio::test]
    async fn a_panicking_attempt_fails_alone() {
        let got = contain_panics::<()>(&key(), async {
            // What `Duration::mul_f64` did with a 5124095576030431h interval.
            let _ = Duration::from_secs(u64::MAX).mul_f64(1.05);
            Ok(())
        })
        .await;
        match got {
            Err(DriverError::Panicked(m)) => assert!(m.contains("too big"), "{m}"),
            other => panic!("{other:?}"),
        }
        // The next attempt on the same task runs normally.
        assert!(contain_panics(&key(), async { Ok(1) }).await.is_ok());
    }
}
