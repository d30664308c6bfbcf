//! Metadata-only watches of the kinds the operator applies, narrowed to the objects it
//! stamped (`app.kubernetes.io/managed-by=opm-controller`) and reduced to one
//! `resourceVersion` per object.
//!
//! Drift detection (SPEC §20) is a server-side dry-run per object and per attempt; for a
//! thousand unchanged releases that is most of the API server's work. A `resourceVersion`
//! names exactly one state of an object, so when the watch shows an object still at the
//! version whose dry-run (or our own apply) already proved it matches the same desired
//! manifest under the same identity, the answer is known without asking again
//! ([`crate::kube::live_cache::LiveCache::verified`]). Only a watch that has listed its kind
//! since it last failed is trusted; anything it does not know falls back to the dry-run.
//!
//! The watch also keeps each object's uid and release labels, so the ownership check before
//! a first write (SPEC §25) reads them here instead of sending a GET.
//!
//! A kind the operator may not list or watch (a Forbidden answer, e.g. Secrets, which the
//! shipped RBAC deliberately does not let it enumerate) is never watched again in this
//! process: its objects keep their dry-runs.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::discovery::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use opm_core::ResourceId;
use opm_core::constants::{FIELD_MANAGER, labels};
use opm_core::input::LiveMeta;

/// One watched kind: the objects it listed and whether that list is current.
#[derive(Default)]
struct Kind {
    synced: AtomicBool,
    /// `(namespace, name)` → what is known of the object.
    versions: Mutex<HashMap<(String, String), Listed>>,
}

/// One listed object: its `resourceVersion`, uid and the release labels it carries.
///
/// Kept small, as there is one per managed object: the version, the uid and the values of
/// [`labels::STAMPED`] (by position) are packed into one string, one allocation instead of
/// seven. As a `BTreeMap` of copied label keys and values this was ~900 bytes per object
/// (~36 MB for 10 000 releases of four objects).
#[derive(Clone)]
struct Listed {
    /// Each part ends with a NUL, which none of them can contain (a label value is at most
    /// 63 of `[A-Za-z0-9._-]`, a uid a UUID, a version the server's token).
    packed: Box<str>,
    /// Bit `i` set: `STAMPED[i]` is on the object (an absent label and an empty one differ).
    present: u8,
}

const END: char = '\0';

impl Listed {
    fn new(version: &str, uid: &str, stamped: [Option<&str>; labels::STAMPED.len()]) -> Self {
        let mut packed = String::new();
        let mut present = 0;
        for (i, part) in [Some(version), Some(uid)]
            .into_iter()
            .chain(stamped)
            .enumerate()
        {
            if let (Some(_), Some(bit)) = (part, i.checked_sub(2)) {
                present |= 1 << bit;
            }
            // A part that could hold the separator is dropped, not allowed to shift the rest.
            packed.push_str(part.filter(|p| !p.contains(END)).unwrap_or_default());
            packed.push(END);
        }
        Self {
            packed: packed.into(),
            present,
        }
    }

    fn part(&self, i: usize) -> &str {
        self.packed.split(END).nth(i).unwrap_or_default()
    }

    fn version(&self) -> &str {
        self.part(0)
    }

    fn uid(&self) -> &str {
        self.part(1)
    }

    /// The value of `label`, one of [`labels::STAMPED`].
    fn label(&self, label: &str) -> Option<&str> {
        let i = labels::STAMPED.iter().position(|l| *l == label)?;
        (self.present & (1 << i) != 0).then(|| self.part(2 + i))
    }

    /// The labels as the ownership check reads them.
    fn labels(&self) -> BTreeMap<String, String> {
        labels::STAMPED
            .iter()
            .filter_map(|k| Some((k.to_string(), self.label(k)?.to_string())))
            .collect()
    }
}

/// See the module documentation.
pub struct ObjectWatch {
    client: Client,
    /// The per-kind tasks, stopped when the watch is dropped (a remote cluster's watch
    /// closes with its last release, SPEC §31).
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// By `(group, kind)`.
    kinds: Mutex<HashMap<(String, String), Arc<Kind>>>,
    /// Where changes of managed objects are announced (SPEC §26: a status change moves
    /// `resourceVersion`, and re-triggers the owning release's health read).
    changes: Changes,
}

/// The release labels of a managed object whose version moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub release_namespace: String,
    pub release_name: String,
    pub release_uuid: String,
}

type Changes = Arc<Mutex<Option<futures::channel::mpsc::UnboundedSender<Changed>>>>;

impl ObjectWatch {
    /// Watches through `client`, the operator's own identity (also for releases applied as
    /// a ServiceAccount: the watch only tells versions apart, it never writes).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            tasks: Mutex::default(),
            kinds: Mutex::new(HashMap::new()),
            changes: Arc::default(),
        }
    }

    /// A watch of another cluster through `client` whose changes are announced to this
    /// watch's subscriber (a remote cluster's objects re-trigger their releases too).
    pub fn sibling(&self, client: Client) -> Self {
        Self {
            client,
            tasks: Mutex::default(),
            kinds: Mutex::new(HashMap::new()),
            changes: self.changes.clone(),
        }
    }

    /// Announces every later change of a watched managed object (one receiver at a time).
    pub fn subscribe(&self) -> futures::channel::mpsc::UnboundedReceiver<Changed> {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        *self.changes.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        rx
    }

    /// The object's current `resourceVersion` as the watch knows it, or `None` when the
    /// watch cannot say (kind not watched or not synced, or no such labelled object).
    pub fn version(&self, id: &ResourceId) -> Option<String> {
        self.held(id, |l| l.version().to_string())
    }

    /// The object's uid and release labels when the synced watch holds it; `None` when the
    /// watch cannot say (the object may still exist without our `managed-by` label).
    pub fn owner_labels(&self, id: &ResourceId) -> Option<LiveMeta> {
        self.held(id, |l| LiveMeta {
            uid: l.uid().to_string(),
            labels: l.labels(),
        })
    }

    /// What the synced watch of `id`'s kind holds for `id`, read through `read`; `None`
    /// when the kind is not watched or not synced, or no labelled object has that name.
    fn held<T>(&self, id: &ResourceId, read: impl FnOnce(&Listed) -> T) -> Option<T> {
        let kind = self
            .lock()
            .get(&(id.group.clone(), id.kind.clone()))?
            .clone();
        if !kind.synced.load(Ordering::Acquire) {
            return None;
        }
        let versions = kind.versions.lock().unwrap_or_else(|p| p.into_inner());
        versions
            .get(&(id.namespace.clone(), id.name.clone()))
            .map(read)
    }

    /// Whether the watch has listed `id`'s kind and no object of that name carries our
    /// label: the object is missing, or someone else's.
    pub fn lists_without(&self, id: &ResourceId) -> bool {
        let Some(kind) = self
            .lock()
            .get(&(id.group.clone(), id.kind.clone()))
            .cloned()
        else {
            return false;
        };
        kind.synced.load(Ordering::Acquire)
            && !kind
                .versions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&(id.namespace.clone(), id.name.clone()))
    }

    /// Starts watching `id`'s kind if nothing watches it yet (the first apply or drift check
    /// of a kind starts it; lookups of that kind answer once it has listed).
    pub fn ensure(&self, id: &ResourceId, resource: &ApiResource) {
        let key = (id.group.clone(), id.kind.clone());
        let mut kinds = self.lock();
        if kinds.contains_key(&key) {
            return;
        }
        let kind = Arc::new(Kind::default());
        kinds.insert(key, kind.clone());
        // Metadata only: a version per object is all that is kept.
        let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(self.client.clone(), resource);
        let what = format!("{}/{}", resource.api_version, resource.kind);
        let task = tokio::spawn(follow(api, kind, what, self.changes.clone()));
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(task.abort_handle());
    }

    /// Number of kinds watched (or being started).
    pub fn kinds(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Kind>>> {
        self.kinds.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for ObjectWatch {
    fn drop(&mut self) {
        for t in self
            .tasks
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

fn selector() -> String {
    format!("{}={}", labels::MANAGED_BY, FIELD_MANAGER)
}

fn object_key<K: kube::Resource>(o: &K) -> Option<((String, String), Listed)> {
    let m = o.meta();
    // Only the labels the ownership check reads are kept.
    let stamped = labels::STAMPED.map(|k| m.labels.as_ref()?.get(k).map(String::as_str));
    Some((
        (m.namespace.clone().unwrap_or_default(), m.name.clone()?),
        Listed::new(
            m.resource_version.as_deref()?,
            m.uid.as_deref().unwrap_or_default(),
            stamped,
        ),
    ))
}

fn announce(changes: &Changes, listed: &Listed) {
    let label = |k: &str| listed.label(k).unwrap_or_default().to_string();
    let changed = Changed {
        release_namespace: label(labels::RELEASE_NAMESPACE),
        release_name: label(labels::RELEASE_NAME),
        release_uuid: label(labels::RELEASE_UUID),
    };
    if changed.release_name.is_empty() {
        return;
    }
    if let Some(tx) = changes.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        let _ = tx.unbounded_send(changed);
    }
}

async fn follow(
    api: Api<PartialObjectMeta<DynamicObject>>,
    kind: Arc<Kind>,
    what: String,
    changes: Changes,
) {
    let config = watcher::Config::default().labels(&selector());
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let mut listing = HashMap::new();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(o)) => {
                if let Some((k, rv)) = object_key(&o) {
                    listing.insert(k, rv);
                }
            }
            Ok(Event::InitDone) => {
                *kind.versions.lock().unwrap_or_else(|p| p.into_inner()) =
                    std::mem::take(&mut listing);
                kind.synced.store(true, Ordering::Release);
                tracing::debug!(kind = %what, "managed objects listed");
            }
            Ok(Event::Apply(o)) => {
                if let Some((k, rv)) = object_key(&o) {
                    let before = kind
                        .versions
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(k, rv.clone());
                    if before.is_none_or(|b| b.version() != rv.version()) {
                        announce(&changes, &rv);
                    }
                }
            }
            Ok(Event::Delete(o)) => {
                if let Some((k, _)) = object_key(&o) {
                    kind.versions
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&k);
                }
            }
            Err(e) => {
                // Events may have been missed: untrusted until the next full listing.
                kind.synced.store(false, Ordering::Release);
                if forbidden(&e) {
                    tracing::info!(
                        kind = %what,
                        "may not list/watch this kind; its drift checks use server-side dry-runs"
                    );
                    return;
                }
                tracing::debug!(kind = %what, error = %e, "managed-object watch failed; retrying");
            }
        }
    }
}

fn forbidden(e: &watcher::Error) -> bool {
    let api = match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => k,
        _ => return false,
    };
    matches!(api, kube::Error::Api(s) if s.code == 403)
}

#[cfg(test)]
mod tests;
