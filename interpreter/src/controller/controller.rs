//! The two kube-runtime `Controller`s (ModuleRelease, Release) and the triggers the core
//! cannot see, by the rules of [`opm_core::triggers`] (the simulated world follows the same):
//! a dependency turning Ready re-triggers its dependents here; a Flux source's artifact
//! change, a ServiceAccount appearing and a managed object's change in [`super::watches`].
//! Watch predicates let through only what should start an attempt
//! ([`opm_core::triggers::attempt_trigger`]), so a status write never triggers a reconcile
//! of its own.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use super::dependents::Dependents;
use super::panics::contain_panics;
use super::queue::{Attempts, Runner};
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

/// `kubectl apply` (client-side) keeps the whole object it applied in this annotation.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what nothing here reads from the copy the store keeps: the managedFields (at a
/// thousand releases a good part of what the stores held) and `kubectl apply`'s copy of
/// the whole release in an annotation (kilobytes per release for users who apply that way).
fn trim_for_store<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = &mut meta.annotations {
        annotations.remove(LAST_APPLIED);
    }
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
    dependents: &Arc<Dependents>,
    depends_on: fn(&K) -> &[DependencyRef],
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
    .map(dependents.follow(depends_on))
    .modify(trim_for_store)
    .reflect(writer)
    .applied_objects()
    .predicate_filter(trigger_hash, PredicateConfig::default());
    (reader, stream)
}

/// Runs both controllers until `shutdown` resolves; in-flight attempts finish first.
pub async fn run(rt: Arc<Runtime>, settings: Settings, shutdown: Shutdown) {
    let health = rt.health.clone();
    let mr_dependents = Dependents::new(Kind::ModuleRelease);
    let rel_dependents = Dependents::new(Kind::Release);
    let (mr_reader, mr_stream) =
        release_stream::<ModuleRelease>(&rt, &settings, "ModuleRelease", &mr_dependents, |r| {
            &r.spec.common.depends_on
        });
    let (rel_reader, rel_stream) =
        release_stream::<Release>(&rt, &settings, "Release", &rel_dependents, |r| {
            &r.spec.common.depends_on
        });
    let (mr_tx, mr_rx) = mpsc::unbounded();
    let (rel_tx, rel_rx) = mpsc::unbounded();
    let (mr_gate, rel_gate) = gates(&settings, &health);
    rt.local
        .renderer
        .render_ahead_from(Arc::new(super::ahead::StoreAhead::new(mr_reader.clone())));
    rt.local
        .opm
        .prefetch_with(Arc::new(super::ahead::Spawner::new(&rt)));
    let ctx = Arc::new(Ctx {
        rt: rt.clone(),
        mr_store: mr_reader.clone(),
        rel_store: rel_reader.clone(),
        mr_tx,
        rel_tx,
        mr_gate,
        rel_gate,
        mr_dependents,
        rel_dependents,
        errors: Mutex::new(HashMap::new()),
    });

    // The reconcilers only queue (they never wait), so kube-runtime's own limit stays off;
    // the queues run the attempts behind the fair gates.
    let mr_queue = Attempts::new(
        ctx.mr_gate.clone(),
        runner(&ctx, Kind::ModuleRelease),
        shutdown.clone(),
    );
    let rel_queue = Attempts::new(
        ctx.rel_gate.clone(),
        runner(&ctx, Kind::Release),
        shutdown.clone(),
    );
    let config = kube::runtime::Config::default().concurrency(0);
    let mr = Controller::for_stream(mr_stream, mr_reader)
        .with_config(config.clone())
        .reconcile_on(mr_rx)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_mr, no_errors, mr_queue.clone())
        .for_each(|r| async move { log_result(r) })
        .then(ended(&health, "ModuleRelease", shutdown.clone()));
    let rel = Controller::for_stream(rel_stream, rel_reader)
        .with_config(config)
        .reconcile_on(rel_rx)
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_rel, no_errors, rel_queue.clone())
        .for_each(|r| async move { log_result(r) })
        .then(ended(&health, "Release", shutdown.clone()));

    let watches = super::watches::spawn(&ctx).await;
    futures::join!(mr, rel);
    // At shutdown, in-flight attempts finish first (waiting and sleeping releases end
    // without running); a loop that ended by itself ends the process as before.
    if shutdown.peek().is_some() {
        futures::join!(mr_queue.drained(), rel_queue.drained());
    }
    for w in watches {
        w.abort();
    }
    tracing::info!("controllers stopped");
}

/// One fair attempt gate per kind (SPEC §24), each known to the health endpoint.
fn gates(
    settings: &Settings,
    health: &Arc<crate::ops::health::Health>,
) -> (Arc<Admission>, Arc<Admission>) {
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
    (mr_gate, rel_gate)
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

/// kube-runtime's reconcile: hands the release to its kind's queue and returns at once
/// ([`super::queue`] says why the attempt does not run here).
async fn reconcile_mr(obj: Arc<ModuleRelease>, q: Arc<Attempts>) -> Result<Action, Infallible> {
    q.trigger(release_key(Kind::ModuleRelease, obj.meta()));
    Ok(Action::await_change())
}

async fn reconcile_rel(obj: Arc<Release>, q: Arc<Attempts>) -> Result<Action, Infallible> {
    q.trigger(release_key(Kind::Release, obj.meta()));
    Ok(Action::await_change())
}

fn release_key(kind: Kind, meta: &ObjectMeta) -> ReleaseKey {
    ReleaseKey {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// Never called: the reconcilers above cannot fail.
fn no_errors<K>(_: Arc<K>, e: &Infallible, _: Arc<Attempts>) -> Action {
    match *e {}
}

/// The runner of a kind's queue: one attempt of the release, from the store's newest copy.
fn runner(ctx: &Arc<Ctx>, kind: Kind) -> Runner {
    let ctx = ctx.clone();
    Arc::new(move |key: ReleaseKey| {
        let ctx = ctx.clone();
        async move {
            // Taken only once admitted: the store's newest, not the copy of the trigger.
            let stored = match kind {
                Kind::ModuleRelease => ctx
                    .mr_store
                    .get(&ObjectRef::new(&key.name).within(&key.namespace))
                    .map(|r| ReleaseObject::ModuleRelease((*r).clone())),
                Kind::Release => ctx
                    .rel_store
                    .get(&ObjectRef::new(&key.name).within(&key.namespace))
                    .map(|r| ReleaseObject::Release((*r).clone())),
            };
            let Some(stored) = stored else {
                // Deleted (and its finalizer gone) since it was queued.
                lock_errors(&ctx).remove(&key);
                return None;
            };
            attempt(stored, ctx).await
        }
        .boxed()
    })
}

fn lock_errors(ctx: &Ctx) -> std::sync::MutexGuard<'_, HashMap<ReleaseKey, i64>> {
    ctx.errors.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the attempt and says when to run it again. A panic anywhere in it fails only this
/// attempt. An attempt that failed outside the core (read error, protocol error, panic) is
/// retried with the §5 backoff of its consecutive such failures (5s, 10s … 5m), kept in
/// memory.
async fn attempt(stored: ReleaseObject, ctx: Arc<Ctx>) -> Option<Duration> {
    let key = stored.key();
    // Boxed: the attempt's state machine is large, and a queue task holds it only while
    // it runs.
    let result = Box::pin(contain_panics(&key, reconcile(stored, ctx.clone()))).await;
    let mut errors = lock_errors(&ctx);
    match result {
        Ok(next) => {
            errors.remove(&key);
            next
        }
        Err(err) => {
            let n = errors.entry(key).or_insert(0);
            *n += 1;
            let delay = opm_core::backoff::compute_backoff(*n);
            tracing::warn!(
                error = %err,
                kind = err.metric_label(),
                retry_in = ?delay,
                "attempt could not run; retrying"
            );
            Some(delay)
        }
    }
}

/// One attempt, starting from the store's copy of the release (the driver reads it again
/// when the copy may predate our own last write).
async fn reconcile(stored: ReleaseObject, ctx: Arc<Ctx>) -> Result<Option<Duration>, DriverError> {
    let key = stored.key();
    // Read before the attempt takes the copy: usually empty, so nothing is allocated.
    let depends_on = opm_core::deps::release_keys(&key, &stored.common().depends_on);
    let finished = driver::run_attempt_from(&ctx.rt, &key, Some(stored)).await?;
    if finished.turned_ready {
        trigger_dependents(&ctx, &key);
    }
    if finished.reason == opm_core::reason::Reason::Deleted.as_str() {
        trigger_waiting_dependencies(&ctx, &depends_on);
    }
    Ok(finished.requeue_after)
}

/// A release let go of ([`triggers::waits_for_dependents`], SPEC §32): re-trigger each
/// release it depended on whose deletion waits for its dependents, at once rather than at
/// its 30-second re-check.
fn trigger_waiting_dependencies(ctx: &Ctx, depends_on: &[ReleaseKey]) {
    for dep in depends_on {
        match dep.kind {
            Kind::ModuleRelease => {
                let at = ObjectRef::new(&dep.name).within(&dep.namespace);
                let waits = ctx
                    .mr_store
                    .get(&at)
                    .is_some_and(|r| triggers::waits_for_dependents(r.status.as_ref()));
                if waits {
                    let _ = ctx.mr_tx.unbounded_send(at);
                }
            }
            Kind::Release => {
                let at = ObjectRef::new(&dep.name).within(&dep.namespace);
                let waits = ctx
                    .rel_store
                    .get(&at)
                    .is_some_and(|r| triggers::waits_for_dependents(r.status.as_ref()));
                if waits {
                    let _ = ctx.rel_tx.unbounded_send(at);
                }
            }
        }
    }
}

/// A release turned Ready ([`triggers::retriggers_dependents`]): re-trigger every release
/// (either kind) that depends on it, from the indexes of those with a `dependsOn`.
fn trigger_dependents(ctx: &Ctx, dep: &ReleaseKey) {
    for key in ctx.mr_dependents.of(dep) {
        let _ = ctx
            .mr_tx
            .unbounded_send(ObjectRef::new(&key.name).within(&key.namespace));
    }
    for key in ctx.rel_dependents.of(dep) {
        let _ = ctx
            .rel_tx
            .unbounded_send(ObjectRef::new(&key.name).within(&key.namespace));
    }
}

#[cfg(test)]
mod tests;
