//! Re-triggers ModuleReleases when a ConfigMap or Secret they reference (`valuesFrom`,
//! `module.secretRef`, SPEC §27) changes, appears or goes, without any label on it.
//!
//! The choice (docs/src/concepts/values.md, "What the operator watches"): one metadata-only watch per referenced
//! object (`fieldSelector=metadata.name=<name>` in its namespace), opened under the
//! referencing release's effective identity, so
//! - nothing is watched when nothing references anything, and an unreferenced Secret is
//!   never seen, not even its name;
//! - the operator receives no Secret data through a watch (metadata only) and needs no
//!   right on Secrets or ConfigMaps itself: the release's ServiceAccount needs `list` and
//!   `watch` next to the `get` it needs for the read (all three may be limited by
//!   `resourceNames`);
//! - a tenant's watch sees only what that tenant may read.
//!
//! The index is rebuilt from the ModuleRelease store every [`REFRESH`]: watches for
//! references that appeared are opened, those no release names any more are closed. A
//! change of the object's `resourceVersion` (or its deletion, or its creation) sends every
//! release that references it, under that identity, to the controller's queue.
//!
//! A watch opens only once a render has read the object under that identity
//! ([`ReadVersions`]): the core reads only after the ServiceAccount was found, so no watch
//! is ever opened as an identity that was not checked (nor as the operator for a release
//! that may not use it). The watch's first list is compared with the version that read
//! saw: an edit made between the read and the start of the watch re-triggers at once
//! (SPEC §27), whether the release is Ready or not. A watch the API server refuses (403)
//! is closed and not reopened before a backoff ([`REFUSED_FIRST`] doubling to
//! [`REFUSED_MAX`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as watch};
use opm_core::api::ModuleRelease;
use opm_core::api::values_from::ValuesKind;
use opm_core::effect::Impersonation;

use crate::controller::driver::Runtime;
use crate::steps::values_from::{ReadVersions, Seen};

/// How often the index is rebuilt from the store (bounds how late a new reference's watch
/// opens).
pub(crate) const REFRESH: Duration = Duration::from_secs(1);

/// A watch refused with 403 is not reopened before this, then twice as long each time.
pub(crate) const REFUSED_FIRST: Duration = Duration::from_secs(10);
/// The longest wait before a refused watch is tried again.
pub(crate) const REFUSED_MAX: Duration = Duration::from_secs(300);

/// One watched object, as one identity sees it.
pub(crate) type WatchKey = crate::steps::values_from::ReadKey;

/// Watches the API server refused, with when each may be tried again and the last wait.
type Refused = Arc<Mutex<BTreeMap<WatchKey, (Instant, Duration)>>>;

type Releases = Arc<Mutex<HashSet<ObjectRef<ModuleRelease>>>>;

struct Watch {
    releases: Releases,
    task: tokio::task::JoinHandle<()>,
}

/// The references of one ModuleRelease, with the identity its reads use (SPEC §15).
pub(crate) fn references(
    mr: &ModuleRelease,
    default_sa: Option<&str>,
) -> Vec<(WatchKey, Option<Impersonation>)> {
    let ns = mr.metadata.namespace.clone().unwrap_or_default();
    let sa = opm_core::impersonation::effective_service_account(
        mr.spec.common.service_account_name.as_deref(),
        default_sa,
    );
    let identity = sa
        .as_deref()
        .map(|sa| opm_core::impersonation::impersonation(&ns, sa));
    let user = identity
        .as_ref()
        .map(|i| i.user.clone())
        .unwrap_or_default();
    let key = |kind, name: &str| WatchKey {
        user: user.clone(),
        kind,
        namespace: ns.clone(),
        name: name.to_string(),
    };
    let mut out: Vec<_> = mr
        .spec
        .values_from
        .iter()
        .filter(|r| !r.name.is_empty())
        .map(|r| (key(r.kind, &r.name), identity.clone()))
        .collect();
    if let Some(s) = mr
        .spec
        .module
        .secret_ref
        .as_ref()
        .filter(|s| !s.name.is_empty())
    {
        out.push((key(ValuesKind::Secret, &s.name), identity.clone()));
    }
    out
}

/// Keeps the per-object watches in line with the store until aborted.
pub(crate) async fn run(
    rt: Arc<Runtime>,
    store: Store<ModuleRelease>,
    tx: futures::channel::mpsc::UnboundedSender<ObjectRef<ModuleRelease>>,
) {
    let mut watches: BTreeMap<WatchKey, Watch> = BTreeMap::new();
    let refused: Refused = Arc::default();
    let default_sa = rt.config.default_service_account.clone();
    loop {
        let mut wanted: BTreeMap<WatchKey, (Option<Impersonation>, HashSet<_>)> = BTreeMap::new();
        for mr in store.state() {
            for (key, identity) in references(&mr, default_sa.as_deref()) {
                wanted
                    .entry(key)
                    .or_insert_with(|| (identity, HashSet::new()))
                    .1
                    .insert(ObjectRef::from_obj(&*mr));
            }
        }
        watches.retain(|k, w| {
            // A finished task is a refused watch: it opens again after its backoff.
            let keep = wanted.contains_key(k) && !w.task.is_finished();
            if !keep {
                w.task.abort();
            }
            keep
        });
        rt.values_reads.forget_unless(|k| wanted.contains_key(k));
        refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| wanted.contains_key(k));
        let now = Instant::now();
        for (key, (identity, releases)) in wanted {
            if let Some(w) = watches.get(&key) {
                *w.releases.lock().unwrap_or_else(|p| p.into_inner()) = releases;
                continue;
            }
            let refused_until = refused
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .map(|(until, _)| *until);
            if !may_open(&rt.values_reads, &key, refused_until, now) {
                continue;
            }
            let client = match rt.clients.for_identity(identity.as_ref()) {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, object = %key.name, "no client for the values watch");
                    continue;
                }
            };
            let releases: Releases = Arc::new(Mutex::new(releases));
            let task = tokio::spawn(watch_one(
                client,
                key.clone(),
                Shared {
                    releases: releases.clone(),
                    store: store.clone(),
                    tx: tx.clone(),
                    rt: rt.clone(),
                    refused: refused.clone(),
                },
            ));
            watches.insert(key, Watch { releases, task });
        }
        tokio::time::sleep(REFRESH).await;
    }
}

/// The objects a `run` would watch for these releases.
#[cfg(test)]
fn watched(
    mrs: &[ModuleRelease],
    default_sa: Option<&str>,
) -> std::collections::BTreeSet<WatchKey> {
    mrs.iter()
        .flat_map(|mr| references(mr, default_sa))
        .map(|(k, _)| k)
        .collect()
}

/// The event with each object replaced by its `resourceVersion`.
fn versions<K>(e: Event<PartialObjectMeta<K>>) -> Event<Option<String>> {
    match e {
        Event::Apply(o) => Event::Apply(o.metadata.resource_version),
        Event::Delete(o) => Event::Delete(o.metadata.resource_version),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(o.metadata.resource_version),
        Event::InitDone => Event::InitDone,
    }
}

/// Sends the releases of `releases` whose Ready condition is not True to the queue.
fn trigger_not_ready(
    releases: &Releases,
    store: &Store<ModuleRelease>,
    tx: &futures::channel::mpsc::UnboundedSender<ObjectRef<ModuleRelease>>,
) {
    for r in releases.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        let ready = store.get(r).is_some_and(|mr| {
            mr.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        });
        if !ready {
            let _ = tx.unbounded_send(r.clone());
        }
    }
}

/// What one watch shares with the loop that opened it.
struct Shared {
    releases: Releases,
    store: Store<ModuleRelease>,
    tx: futures::channel::mpsc::UnboundedSender<ObjectRef<ModuleRelease>>,
    rt: Arc<Runtime>,
    refused: Refused,
}

/// Whether the watch of `key` may open now: only once a render read the object under that
/// identity (so after the core found the ServiceAccount; a release stalled before its read
/// gets no watch, and never one as the operator), and not while a 403 backoff runs.
fn may_open(
    reads: &ReadVersions,
    key: &WatchKey,
    refused_until: Option<Instant>,
    now: Instant,
) -> bool {
    reads.get(key).is_some() && refused_until.is_none_or(|until| until <= now)
}

/// How long a refused watch stays closed: [`REFUSED_FIRST`], then twice the last wait up
/// to [`REFUSED_MAX`] (the record goes once a watch of that key lists successfully).
fn refused_wait(last: Option<Duration>) -> Duration {
    last.map_or(REFUSED_FIRST, |l| (l * 2).min(REFUSED_MAX))
}

/// Whether the API server refused the watch (or its list) as forbidden.
fn is_forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 403,
        watcher::Error::WatchError(s) => s.code == 403,
        _ => false,
    }
}

/// What the first list of a watch re-triggers: everything when it saw another version
/// than the last read (an edit between the read and the watch), the releases not Ready
/// when nothing was read yet and the object exists, else nothing.
fn first_list_triggers(read: Option<&Seen>, listed: &Seen) -> FirstList {
    match read {
        Some(r) if r != listed => FirstList::All,
        Some(_) => FirstList::Nothing,
        None if listed.is_some() => FirstList::NotReady,
        None => FirstList::Nothing,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum FirstList {
    All,
    NotReady,
    Nothing,
}

/// The watch of one referenced object, as its `resourceVersion` (`None`: absent).
fn version_stream(
    client: Client,
    key: &WatchKey,
) -> futures::stream::BoxStream<'static, Result<Event<Option<String>>, watcher::Error>> {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name));
    match key.kind {
        ValuesKind::ConfigMap => watch(
            Api::<PartialObjectMeta<ConfigMap>>::namespaced(client, &key.namespace),
            config,
        )
        .default_backoff()
        .map(|r| r.map(versions))
        .boxed(),
        ValuesKind::Secret => watch(
            Api::<PartialObjectMeta<Secret>>::namespaced(client, &key.namespace),
            config,
        )
        .default_backoff()
        .map(|r| r.map(versions))
        .boxed(),
    }
}

/// Watches one referenced object and sends its releases to the queue when its
/// `resourceVersion` changes, it appears or it goes.
async fn watch_one(client: Client, key: WatchKey, shared: Shared) {
    let Shared {
        releases,
        store,
        tx,
        rt,
        refused,
    } = shared;
    let reads: &ReadVersions = &rt.values_reads;
    let mut stream = version_stream(client, &key);
    // The resourceVersion last seen (`None`: absent), and what a relist found.
    let mut last: Option<Option<String>> = None;
    let mut listing: Option<String> = None;
    let trigger = || {
        for r in releases.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = tx.unbounded_send(r.clone());
        }
    };
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(e) => e,
            Err(e) if is_forbidden(&e) => {
                let mut r = refused.lock().unwrap_or_else(|p| p.into_inner());
                let wait = refused_wait(r.get(&key).map(|(_, last)| *last));
                r.insert(key.clone(), (Instant::now() + wait, wait));
                tracing::info!(error = %e, kind = key.kind.as_str(), namespace = %key.namespace, name = %key.name, user = %key.user, retry_in = ?wait, "values watch refused; closed until the backoff passes");
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, kind = key.kind.as_str(), namespace = %key.namespace, name = %key.name, "values watch error");
                continue;
            }
        };
        match event {
            Event::Init => listing = None,
            Event::InitApply(rv) => listing = rv.or(Some(String::new())),
            Event::InitDone => {
                let now = listing.take();
                match &last {
                    // A later list (after a broken watch) triggers when it saw something
                    // else than the watch had.
                    Some(l) if *l != now => trigger(),
                    Some(_) => {}
                    // The first list sets the baseline. The watch opens after the
                    // release's read: what changed in between (an edit, a creation, a
                    // deletion) differs from what the read saw and re-triggers.
                    None => match first_list_triggers(reads.get(&key).as_ref(), &now) {
                        FirstList::All => trigger(),
                        FirstList::NotReady => trigger_not_ready(&releases, &store, &tx),
                        FirstList::Nothing => {}
                    },
                }
                refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                last = Some(now);
            }
            Event::Apply(rv) => {
                let rv = rv.or(Some(String::new()));
                if last.as_ref() != Some(&rv) {
                    last = Some(rv);
                    trigger();
                }
            }
            Event::Delete(_) => {
                last = Some(None);
                trigger();
            }
        }
    }
}

#[cfg(test)]
mod tests;
