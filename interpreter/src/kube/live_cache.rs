//! What the operator last saw of each object it manages, keyed by `resourceVersion`.
//!
//! Drift checks and applies compare a server-side dry-run with the live object. A dry-run
//! of an existing object comes back with the live object's `resourceVersion`, and a
//! `resourceVersion` names exactly one state of an object, so when it matches a version we
//! have already seen (read with a GET or returned by our own apply) the GET can be skipped:
//! an unchanged object then costs one request instead of two. Only digests of the two
//! views that are compared are kept (not the objects), so a thousand releases cost well
//! under a megabyte. Any mismatch (someone else wrote, the object is gone, the operator
//! restarted) falls back to a GET, so a stale entry can cost a request but never a wrong
//! answer.
//!
//! Entries are keyed by a 128-bit digest of the object's identity rather than by its five
//! strings: at 10 000 releases of four objects the copied identities were ~40 % of the
//! cache. A digest names one identity (no two differ in it short of a SHA-256 collision),
//! and each entry still holds the version it describes, compared on every use.

use std::collections::HashMap;
use std::sync::Mutex;

use opm_core::ResourceId;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::kube::compare;
use crate::kube::short_key::{ShortKey, short_key};

/// Beyond this many objects the cache starts over (a safety bound, not a working size).
const MAX_ENTRIES: usize = 200_000;

/// The digests of one live object version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    resource_version: Box<str>,
    /// Of the whole object minus managedFields times (what apply compares).
    pub apply_digest: [u8; 32],
    /// Of the fields drift detection compares.
    pub drift_digest: [u8; 32],
    /// The desired state ([`desired_digest`]) this very version is known to match: a
    /// dry-run of it found no drift, or it is what our own apply of it returned.
    verified: Option<[u8; 32]>,
}

impl Seen {
    /// Whether the object was found missing (by a GET in this process).
    pub fn absent(&self) -> bool {
        self.resource_version.is_empty()
    }

    /// Whether `obj` (typically a dry-run result) is based on this very version.
    pub fn same_version(&self, obj: &Value) -> bool {
        resource_version(obj).is_some_and(|rv| rv == &*self.resource_version)
    }
}

/// An object's identity as a cache key: a digest of its [`ResourceId`].
fn key(id: &ResourceId) -> ShortKey {
    short_key([&id.group, &id.kind, &id.namespace, &id.name, &id.version].map(String::as_str))
}

/// Live object versions by object identity.
#[derive(Debug, Default)]
pub struct LiveCache {
    seen: Mutex<HashMap<ShortKey, Seen>>,
}

impl LiveCache {
    /// Records `live`, a state of the object read from or just written to the server.
    pub fn remember(&self, id: &ResourceId, live: &Value) {
        let Some(rv) = resource_version(live) else {
            return;
        };
        let seen = Seen {
            resource_version: rv.into(),
            apply_digest: apply_digest(live),
            drift_digest: drift_digest(live),
            verified: None,
        };
        self.put(key(id), seen);
    }

    /// Records that a GET found no such object, so an apply right after can skip its GET.
    pub fn remember_absent(&self, id: &ResourceId) {
        let seen = Seen {
            resource_version: "".into(),
            apply_digest: [0; 32],
            drift_digest: [0; 32],
            verified: None,
        };
        self.put(key(id), seen);
    }

    fn put(&self, key: ShortKey, seen: Seen) {
        let mut map = self.lock();
        if map.len() >= MAX_ENTRIES && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, seen);
    }

    /// Records that the object at `resource_version` matches `desired` on every field we
    /// manage; ignored unless that is the version remembered for it.
    pub fn verify(&self, id: &ResourceId, resource_version: &str, desired: [u8; 32]) {
        if let Some(seen) = self.lock().get_mut(&key(id))
            && !seen.absent()
            && &*seen.resource_version == resource_version
        {
            seen.verified = Some(desired);
        }
    }

    /// The version of the object known to match `desired`, if any: while the object is
    /// still at that version, a drift check of `desired` would find nothing.
    pub fn verified(&self, id: &ResourceId, desired: &[u8; 32]) -> Option<String> {
        self.lock()
            .get(&key(id))
            .filter(|s| s.verified.as_ref() == Some(desired))
            .map(|s| s.resource_version.to_string())
    }

    /// The last version seen of the object, if any.
    pub fn get(&self, id: &ResourceId) -> Option<Seen> {
        self.lock().get(&key(id)).cloned()
    }

    /// Drops what is known of the object (it was deleted or could not be read).
    pub fn forget(&self, id: &ResourceId) {
        self.lock().remove(&key(id));
    }

    /// Number of objects known.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ShortKey, Seen>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The version string of a server object, if it has a non-empty one.
pub(crate) fn resource_version(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
}

fn digest(v: &Value) -> [u8; 32] {
    // serde_json maps are ordered by key, so equal values serialise to equal bytes.
    Sha256::digest(serde_json::to_vec(v).unwrap_or_default()).into()
}

/// Names one desired state of an object: the manifest (Secret values as their digests),
/// the field manager and the identity it is applied as.
pub(crate) fn desired_digest(manifest: &Value, field_manager: &str, identity: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(serde_json::to_vec(manifest).unwrap_or_default());
    h.update([0]);
    h.update(field_manager.as_bytes());
    h.update([0]);
    h.update(identity.as_bytes());
    h.finalize().into()
}

/// The part of a desired object that names its desired state: the manifest, and the
/// policy when it has one (an ignore rule added changes what a check must compare).
pub(crate) fn desired_key(obj: &opm_core::DesiredObject) -> Value {
    if obj.policy.is_default() {
        obj.manifest.clone()
    } else {
        serde_json::json!({"manifest": obj.manifest, "policy": obj.policy})
    }
}

/// Digest of what [`compare::same_object`] compares.
pub(crate) fn apply_digest(obj: &Value) -> [u8; 32] {
    digest(&compare::normalize(obj))
}

/// Digest of what [`compare::managed_view`] compares (the drift check).
pub(crate) fn drift_digest(obj: &Value) -> [u8; 32] {
    digest(&compare::managed_view(obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id() -> ResourceId {
        ResourceId {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "cm".into(),
            version: "v1".into(),
        }
    }

    #[test]
    fn a_dry_run_of_the_seen_version_compares_by_digest() {
        let cache = LiveCache::default();
        let live = json!({"metadata": {"resourceVersion": "7", "managedFields": [{"manager": "m", "time": "t1"}]}, "data": {"a": "1"}});
        cache.remember(&id(), &live);
        let seen = cache.get(&id()).expect("remembered");
        let same = json!({"metadata": {"resourceVersion": "7", "managedFields": [{"manager": "m", "time": "t2"}]}, "data": {"a": "1"}});
        assert!(seen.same_version(&same));
        assert_eq!(seen.apply_digest, apply_digest(&same));
        assert_eq!(seen.drift_digest, drift_digest(&same));
        let changed = json!({"metadata": {"resourceVersion": "7"}, "data": {"a": "2"}});
        assert!(seen.same_version(&changed));
        assert_ne!(seen.apply_digest, apply_digest(&changed));
        assert_ne!(seen.drift_digest, drift_digest(&changed));
    }

    #[test]
    fn another_version_or_none_is_not_the_seen_one() {
        let cache = LiveCache::default();
        cache.remember(&id(), &json!({"metadata": {"resourceVersion": "7"}}));
        let seen = cache.get(&id()).unwrap();
        assert!(!seen.same_version(&json!({"metadata": {"resourceVersion": "8"}})));
        // A dry-run that would create the object has no resourceVersion.
        assert!(!seen.same_version(&json!({"metadata": {"resourceVersion": ""}})));
        assert!(!seen.same_version(&json!({"metadata": {}})));
        cache.forget(&id());
        assert!(cache.get(&id()).is_none());
        assert!(cache.is_empty());
    }

    #[test]
    fn a_missing_object_is_remembered_as_absent() {
        let cache = LiveCache::default();
        cache.remember_absent(&id());
        let seen = cache.get(&id()).expect("remembered");
        assert!(seen.absent());
        // A dry-run that would create it is no version of it.
        assert!(!seen.same_version(&json!({"metadata": {}})));
        cache.remember(&id(), &json!({"metadata": {"resourceVersion": "3"}}));
        assert!(!cache.get(&id()).unwrap().absent());
    }

    #[test]
    fn a_verified_desired_state_belongs_to_one_version() {
        let cache = LiveCache::default();
        let desired = desired_digest(&json!({"data": {"a": "1"}}), "opm-controller", "");
        let other = desired_digest(&json!({"data": {"a": "2"}}), "opm-controller", "");
        assert_ne!(
            desired,
            desired_digest(
                &json!({"data": {"a": "1"}}),
                "opm-controller",
                "demo/deployer"
            )
        );
        cache.remember(&id(), &json!({"metadata": {"resourceVersion": "7"}}));
        // Another version than the one remembered: ignored.
        cache.verify(&id(), "6", desired);
        assert_eq!(cache.verified(&id(), &desired), None);
        cache.verify(&id(), "7", desired);
        assert_eq!(cache.verified(&id(), &desired).as_deref(), Some("7"));
        assert_eq!(cache.verified(&id(), &other), None);
        // A newer version seen forgets what the old one was verified against.
        cache.remember(&id(), &json!({"metadata": {"resourceVersion": "8"}}));
        assert_eq!(cache.verified(&id(), &desired), None);
        // An absent object verifies nothing.
        cache.remember_absent(&id());
        cache.verify(&id(), "", desired);
        assert_eq!(cache.verified(&id(), &desired), None);
    }

    #[test]
    fn each_identity_is_its_own_entry() {
        let cache = LiveCache::default();
        cache.remember(&id(), &json!({"metadata": {"resourceVersion": "7"}}));
        let others = [
            ResourceId {
                name: "cm2".into(),
                ..id()
            },
            ResourceId {
                namespace: "ns2".into(),
                ..id()
            },
            ResourceId {
                kind: "Secret".into(),
                ..id()
            },
            ResourceId {
                group: "apps".into(),
                ..id()
            },
            ResourceId {
                version: "v2".into(),
                ..id()
            },
            // Parts do not run into each other.
            ResourceId {
                namespace: "n".into(),
                name: "scm".into(),
                ..id()
            },
        ];
        for other in &others {
            assert!(cache.get(other).is_none(), "{other:?}");
            cache.remember(other, &json!({"metadata": {"resourceVersion": "9"}}));
        }
        assert_eq!(cache.len(), others.len() + 1);
        assert!(
            cache
                .get(&id())
                .unwrap()
                .same_version(&json!({"metadata": {"resourceVersion": "7"}}))
        );
    }

    #[test]
    fn objects_without_a_version_are_not_remembered() {
        let cache = LiveCache::default();
        cache.remember(&id(), &json!({"metadata": {"name": "cm"}}));
        assert!(cache.is_empty());
    }
}
