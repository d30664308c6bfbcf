//! The watches besides the releases' own, each re-triggering the releases a change
//! concerns: managed objects (health, SPEC §26), ServiceAccounts (SPEC §15, the rule of
//! [`opm_core::triggers::waits_for_service_account`]) and Flux sources (a new artifact).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use opm_core::api::ReleaseStatus;
use opm_core::constants::{FLUX_SOURCE_API_VERSION, SOURCE_KINDS};
use opm_core::{Kind, triggers};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::context::{Ctx, heartbeat};
use crate::controller::driver::Runtime;

/// Starts every extra watch; the handles are aborted at shutdown.
pub(super) async fn spawn(ctx: &Arc<Ctx>) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(watch_service_accounts(ctx.clone())),
        tokio::spawn(watch_managed_objects(ctx.clone())),
        // SPEC §31: kubeconfig Secrets re-trigger the releases naming them.
        tokio::spawn(super::kubeconfig_watch::run(ctx.clone())),
        // SPEC §30: the Platform's status, and the OPM releases it re-triggers.
        tokio::spawn(super::platform::run(ctx.clone())),
        // SPEC §27: referenced ConfigMaps and Secrets re-trigger their releases.
        tokio::spawn(crate::controller::values_watch::run(
            ctx.rt.clone(),
            ctx.mr_store.clone(),
            ctx.mr_tx.clone(),
        )),
    ];
    for kind in SOURCE_KINDS {
        if source_kind_served(&ctx.rt, kind).await {
            tasks.push(tokio::spawn(watch_source(ctx.clone(), kind)));
        } else {
            tracing::info!(
                kind,
                "Flux source kind not served; its changes are not watched"
            );
        }
    }
    tasks
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

/// A ServiceAccount appeared: re-trigger the releases of its namespace waiting for one,
/// [`triggers::SERVICE_ACCOUNT_SETTLE`] later.
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
            .filter(|mr| waiting(&ns, &mr.metadata, mr.status.as_ref()))
            .map(|mr| ObjectRef::from_obj(&**mr))
            .collect();
        let rels: Vec<_> = ctx
            .rel_store
            .state()
            .iter()
            .filter(|rel| waiting(&ns, &rel.metadata, rel.status.as_ref()))
            .map(|rel| ObjectRef::from_obj(&**rel))
            .collect();
        if mrs.is_empty() && rels.is_empty() {
            return;
        }
        let (mr_tx, rel_tx) = (ctx.mr_tx.clone(), ctx.rel_tx.clone());
        tokio::spawn(async move {
            tokio::time::sleep(triggers::SERVICE_ACCOUNT_SETTLE).await;
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

/// Whether a release in `meta`'s namespace with this status waits for a ServiceAccount of
/// namespace `ns`.
fn waiting(ns: &str, meta: &ObjectMeta, status: Option<&ReleaseStatus>) -> bool {
    meta.namespace.as_deref() == Some(ns) && triggers::waits_for_service_account(status)
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
