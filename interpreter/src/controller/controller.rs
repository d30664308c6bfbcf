//! The two kube-runtime `Controller`s (ModuleRelease, Release) and the triggers the core
//! cannot see, by the rules of [`opm_core::triggers`] (the simulated world follows the same):
//! a dependency turning Ready re-triggers its dependents here; a Flux source's artifact
//! change, a ServiceAccount appearing and a managed object's change in [`super::watches`].
//! Watch predicates let through only what should start an attempt
//! ([`opm_core::triggers::attempt_trigger`]), so a status write never triggers a reconcile
//! of its own.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use futures::future::FutureExt;
use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, watcher};
use opm_core::api::{DependencyRef, ModuleRelease, Release};
use opm_core::fairness::Limits;
use opm_core::{Kind, ReleaseKey, ReleaseObject, triggers};
use serde::de::DeserializeOwned;

use super::context::{Ctx, heartbeat};
use super::panics::contain_panics;
use crate::controller::driver::{self, DriverError, Runtime};
use crate::ops::admission::Admission;

pub use super::context::Shutdown;

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

/// Hash of what should start an attempt ([`triggers::attempt_trigger`]).
fn trigger_hash<K: Resource>(obj: &K) -> Option<u64> {
    let mut h = DefaultHasher::new();
    triggers::attempt_trigger(obj.meta()).hash(&mut h);
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

/// The watch of one release kind, filtered to what starts an attempt, and its store.
fn release_stream<K>(
    rt: &Runtime,
    settings: &Settings,
    name: &'static str,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + use<K>,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = watcher(
        Api::<K>::all(rt.clients.operator()),
        watcher_config(settings),
    )
    .default_backoff()
    .map(heartbeat(&rt.health, name))
    .modify(drop_managed_fields)
    .reflect(writer)
    .applied_objects()
    .predicate_filter(trigger_hash, PredicateConfig::default());
    (reader, stream)
}

/// Runs both controllers until `shutdown` resolves; in-flight attempts finish first.
pub async fn run(rt: Arc<Runtime>, settings: Settings, shutdown: Shutdown) {
    let health = rt.health.clone();
    let (mr_reader, mr_stream) = release_stream::<ModuleRelease>(&rt, &settings, "ModuleRelease");
    let (rel_reader, rel_stream) = release_stream::<Release>(&rt, &settings, "Release");
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
    rt.local
        .renderer
        .render_ahead_from(Arc::new(super::ahead::StoreAhead::new(mr_reader.clone())));
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

    let watches = super::watches::spawn(&ctx).await;
    futures::join!(mr, rel);
    for w in watches {
        w.abort();
    }
    tracing::info!("controllers stopped");
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
    let gate = ctx.mr_gate.clone();
    let key = release_key(Kind::ModuleRelease, obj.meta());
    let store = ctx.mr_store.clone();
    admitted(&gate, key, ctx, move || {
        ReleaseObject::ModuleRelease((*newest(&store, obj)).clone())
    })
    .await
}

async fn reconcile_rel(obj: Arc<Release>, ctx: Arc<Ctx>) -> Result<Action, DriverError> {
    let gate = ctx.rel_gate.clone();
    let key = release_key(Kind::Release, obj.meta());
    let store = ctx.rel_store.clone();
    admitted(&gate, key, ctx, move || {
        ReleaseObject::Release((*newest(&store, obj)).clone())
    })
    .await
}

/// The store's copy of `obj` now (it may have changed while the attempt waited), or `obj`
/// when the store no longer holds it.
fn newest<K>(store: &Store<K>, obj: Arc<K>) -> Arc<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store.get(&ObjectRef::from_obj(&*obj)).unwrap_or(obj)
}

fn release_key(kind: Kind, meta: &ObjectMeta) -> ReleaseKey {
    ReleaseKey {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// Waits for a fair slot, then runs the attempt. A shutdown while waiting drops the wait
/// (the attempt never started; the next process picks the release up). A panic anywhere
/// in the attempt fails only this attempt: it is retried with backoff, and the process
/// and the other attempts go on.
///
/// The store's copy of the release is taken (`stored`) only once admitted: while the
/// whole fleet waits at start-up, a waiter holds the store's shared `Arc` rather than a
/// copy of its own, and the copy it then takes is the store's newest ([`newest`]).
async fn admitted(
    gate: &Arc<Admission>,
    key: ReleaseKey,
    ctx: Arc<Ctx>,
    stored: impl FnOnce() -> ReleaseObject,
) -> Result<Action, DriverError> {
    let slot = tokio::select! {
        slot = gate.acquire(&key.namespace) => slot,
        () = ctx.shutdown.clone() => return Ok(Action::await_change()),
    };
    // Boxed: kube-runtime spawns every triggered reconcile as a task at once (its own
    // limit is off, see `run`), and a task is as large as its future. Inline, the attempt's
    // state machine made each waiting task ~19 KB (113 MB of the 186 MB heap peak of a
    // 3 000-release converge, heaptrack); boxed, a waiter holds only the wait.
    let attempt = Box::pin(contain_panics(&key, reconcile(stored(), ctx.clone())));
    let result = attempt.await;
    drop(slot);
    let mut errors = ctx.errors.lock().unwrap_or_else(|p| p.into_inner());
    if result.is_ok() {
        errors.remove(&key);
    } else {
        *errors.entry(key).or_insert(0) += 1;
    }
    result
}

/// One attempt, starting from the store's copy of the release (the driver reads it again
/// when the copy may predate our own last write).
async fn reconcile(stored: ReleaseObject, ctx: Arc<Ctx>) -> Result<Action, DriverError> {
    let key = stored.key();
    let finished = driver::run_attempt_from(&ctx.rt, &key, Some(stored)).await?;
    if finished.turned_ready {
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
        .map(|kind| release_key(kind, obj.meta()))
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

/// A release turned Ready ([`triggers::retriggers_dependents`]): re-trigger every release
/// (either kind) that depends on it. Runs once per release becoming Ready, over every
/// release in the stores: releases without `dependsOn` are skipped before anything is
/// allocated (at a thousand releases cloning all of them each time cost seconds of CPU
/// during a rollout).
fn trigger_dependents(ctx: &Ctx, dep: &ReleaseKey) {
    for mr in ctx.mr_store.state() {
        if depends_on(
            Kind::ModuleRelease,
            &mr.metadata,
            &mr.spec.common.depends_on,
            dep,
        ) {
            let _ = ctx.mr_tx.unbounded_send(ObjectRef::from_obj(&*mr));
        }
    }
    for rel in ctx.rel_store.state() {
        if depends_on(
            Kind::Release,
            &rel.metadata,
            &rel.spec.common.depends_on,
            dep,
        ) {
            let _ = ctx.rel_tx.unbounded_send(ObjectRef::from_obj(&*rel));
        }
    }
}

/// Whether the release of `kind` with this metadata and `dependsOn` depends on `dep`.
fn depends_on(kind: Kind, meta: &ObjectMeta, refs: &[DependencyRef], dep: &ReleaseKey) -> bool {
    if refs.is_empty() {
        return false;
    }
    let own = release_key(kind, meta);
    opm_core::deps::depends_on(&own, refs, dep)
}
