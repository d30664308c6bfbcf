//! What the watches have already delivered, so an attempt need not read it again: the
//! release object from the controller's store and the Flux source from the source watch.
//!
//! A watch store is as fresh as the event that triggered the attempt, except for the
//! operator's own writes to the release (finalizer, status), whose events may still be in
//! flight. Those writes' `resourceVersion`s are remembered per release and a store copy older
//! than the last one is not used (the attempt reads the release instead), so an attempt never
//! starts from a status older than the one the previous attempt wrote. etcd-backed API
//! servers hand out increasing integer versions; anything that does not parse as one is
//! treated as unknown and read again.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::DynamicObject;
use kube::discovery::ApiResource;
use kube::runtime::reflector::{ObjectRef, Store};
use opm_core::{ReleaseKey, ReleaseObject};

/// See the module documentation.
#[derive(Default)]
pub struct Observed {
    written: Mutex<HashMap<ReleaseKey, u64>>,
    sources: Mutex<HashMap<String, (ApiResource, Store<DynamicObject>)>>,
}

impl Observed {
    /// Records the `resourceVersion` one of our writes to the release returned.
    pub fn wrote(&self, key: &ReleaseKey, resource_version: Option<&str>) {
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        match resource_version.and_then(|rv| rv.parse::<u64>().ok()) {
            Some(rv) => {
                let e = w.entry(key.clone()).or_insert(0);
                *e = if *e == u64::MAX { rv } else { (*e).max(rv) };
            }
            // Unknown: the next attempt must read.
            None => {
                w.insert(key.clone(), u64::MAX);
            }
        }
    }

    /// The store's copy of the release when it is at least as new as our last write to it.
    pub fn usable(&self, key: &ReleaseKey, stored: Option<ReleaseObject>) -> Option<ReleaseObject> {
        let stored = stored?;
        let rv = stored
            .meta()
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok())?;
        let w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        match w.get(key) {
            Some(&last) if rv < last => None,
            _ => Some(stored),
        }
    }

    /// Forgets a release that is gone.
    pub fn forget(&self, key: &ReleaseKey) {
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Registers the store the watch of a Flux source kind keeps.
    pub fn add_source_store(&self, kind: &str, resource: ApiResource, store: Store<DynamicObject>) {
        self.sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind.to_owned(), (resource, store));
    }

    /// A Flux source as the watch last saw it; `None` when not watched (that kind at that
    /// API version) or not (yet) seen.
    pub fn source(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<std::sync::Arc<DynamicObject>> {
        let sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        let (resource, store) = sources.get(kind)?;
        if resource.api_version != api_version {
            return None;
        }
        store.get(&ObjectRef::new_with(name, resource.clone()).within(namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::Kind;
    use opm_core::api::Release;

    fn key() -> ReleaseKey {
        ReleaseKey {
            kind: Kind::Release,
            namespace: "ns".into(),
            name: "r".into(),
        }
    }

    fn release(rv: &str) -> ReleaseObject {
        let mut r: Release = serde_json::from_value(serde_json::json!({
            "apiVersion": "releases.opmodel.dev/v1alpha1",
            "kind": "Release",
            "metadata": {"name": "r", "namespace": "ns", "resourceVersion": rv},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "s"}, "path": "."}
        }))
        .expect("a valid Release");
        r.metadata.resource_version = Some(rv.into());
        ReleaseObject::Release(r)
    }

    #[test]
    fn a_store_copy_older_than_our_last_write_is_not_used() {
        let o = Observed::default();
        assert!(o.usable(&key(), Some(release("5"))).is_some());
        o.wrote(&key(), Some("10"));
        assert!(o.usable(&key(), Some(release("9"))).is_none());
        assert!(o.usable(&key(), Some(release("10"))).is_some());
        assert!(o.usable(&key(), Some(release("11"))).is_some());
        // A later write with an older version (a reordered response) does not go back.
        o.wrote(&key(), Some("7"));
        assert!(o.usable(&key(), Some(release("9"))).is_none());
        // After a failed write the next success sets the bar again.
        o.wrote(&key(), None);
        assert!(o.usable(&key(), Some(release("12"))).is_none());
        o.wrote(&key(), Some("12"));
        assert!(o.usable(&key(), Some(release("12"))).is_some());
        o.forget(&key());
        assert!(o.usable(&key(), Some(release("9"))).is_some());
    }

    #[test]
    fn unknown_versions_force_a_read() {
        let o = Observed::default();
        assert!(o.usable(&key(), Some(release("not-a-number"))).is_none());
        o.wrote(&key(), None);
        assert!(o.usable(&key(), Some(release("99"))).is_none());
        assert!(o.usable(&key(), None).is_none());
    }
}
