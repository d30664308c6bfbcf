//! The in-memory object store: server-side apply with field ownership, dry-run, deletion
//! with a UID precondition, and the scope of each kind.
//!
//! Ownership is tracked per *field*, where a field is a label, an annotation, or a top-level
//! key outside `metadata`/`status` (one level deep when that key holds an object, so
//! `.spec.replicas` and `.spec.selector` are separate fields). That is coarser than the API
//! server's managed-fields trie but keeps the rules that matter for the operator: applying a
//! different value to a field another manager owns is a conflict unless forced, applying the
//! same value shares ownership, and a field the manager stops applying is removed once no
//! manager owns it.

mod fields;
mod key;
mod object;
mod ssa;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use opm_core::input::{ApiError, ApplyAction, GroupKind};
use opm_core::object::ResourceId;

pub(crate) use fields::fields_of;
pub use fields::{FieldPath, Managers};
use fields::{LABELS, field_refs};
pub(crate) use key::{KeyParts, ObjKey, key_of};
pub use object::StoredObject;
use ssa::{conflict_error, conflicts, merged};

use super::prng::SplitMix64;

/// Cluster-scoped in every cluster (the world may add CRD-defined kinds).
pub(super) const BUILTIN_CLUSTER_SCOPED: [(&str, &str); 10] = [
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("networking.k8s.io", "IngressClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
];

/// A hash map that hashes the same way in every run (SipHash with fixed keys): the world
/// draws no randomness it was not seeded with.
pub(crate) type FixedHashMap<K, V> =
    std::collections::HashMap<K, V, std::hash::BuildHasherDefault<std::hash::DefaultHasher>>;

/// All managed objects of the simulated cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Store {
    /// By identity. Hashed, not ordered: every attempt looks objects up, and a B-tree of
    /// 30 000 four-string keys spent most of a large world's time comparing strings.
    /// [`Store::objects`] sorts when asked.
    objects: FixedHashMap<ObjKey, StoredObject>,
    cluster_scoped: BTreeSet<GroupKind>,
    /// Fields that may not change once set, per kind (`Invalid` on change).
    immutable: BTreeSet<(String, FieldPath)>,
    uids: SplitMix64,
    resource_version: u64,
}

impl Store {
    /// An empty cluster with the built-in cluster-scoped kinds and immutable fields; `seed` drives
    /// its uids.
    pub fn new(seed: u64) -> Self {
        let cluster_scoped = BUILTIN_CLUSTER_SCOPED
            .iter()
            .map(|(g, k)| GroupKind {
                group: g.to_string(),
                kind: k.to_string(),
            })
            .collect();
        let immutable = [
            ("Deployment", FieldPath::new("spec", "selector")),
            ("Service", FieldPath::new("spec", "clusterIP")),
            ("Job", FieldPath::new("spec", "template")),
        ]
        .into_iter()
        .map(|(k, f)| (k.to_string(), f))
        .collect();
        Self {
            objects: FixedHashMap::default(),
            cluster_scoped,
            immutable,
            uids: SplitMix64::new(seed ^ 0x005e_ed0b_1ec7_u64),
            resource_version: 0,
        }
    }

    /// Whether objects of this kind have no namespace.
    pub fn is_cluster_scoped(&self, group: &str, kind: &str) -> bool {
        // Kinds differ more often (and in length) than groups: cheaper to reject first.
        self.cluster_scoped
            .iter()
            .any(|gk| gk.kind == kind && gk.group == group)
    }

    /// The cluster-scoped kinds, as a render reports them to the core.
    pub fn cluster_scoped(&self) -> Vec<GroupKind> {
        self.cluster_scoped.iter().cloned().collect()
    }

    /// Makes a kind cluster-scoped, as installing a cluster-scoped CRD does.
    pub fn add_cluster_scoped(&mut self, gk: GroupKind) {
        self.cluster_scoped.insert(gk);
    }

    /// Makes a field of a kind immutable: changing it is refused as `Invalid`.
    pub fn add_immutable(&mut self, kind: &str, field: FieldPath) {
        self.immutable.insert((kind.to_string(), field));
    }

    /// The live object with this identity, whatever its API version.
    pub fn get(&self, id: &ResourceId) -> Option<&StoredObject> {
        self.objects.get(id as &dyn KeyParts)
    }

    /// Every object, in identity order (group, kind, namespace, name).
    pub fn objects(&self) -> impl Iterator<Item = &StoredObject> {
        let mut all: Vec<(&ObjKey, &StoredObject)> = self.objects.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, o)| o)
    }

    /// How many objects are stored.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Whether the Namespace object exists, which namespaced writes need.
    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&(
            String::new(),
            "Namespace".to_string(),
            String::new(),
            ns.to_string(),
        ))
    }

    fn next_rv(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    /// Server-side apply of `manifest` as `manager`. With `dry_run` nothing changes but the
    /// result is the same. A write that would change nothing reports `Unchanged`.
    pub fn apply(
        &mut self,
        id: &ResourceId,
        manifest: &Value,
        manager: &str,
        force: bool,
        dry_run: bool,
    ) -> Result<ApplyAction, ApiError> {
        let desired = fields_of(manifest);
        if !id.namespace.is_empty()
            && !self.is_cluster_scoped(&id.group, &id.kind)
            && !self.namespace_exists(&id.namespace)
        {
            return Err(ApiError::NotFound {
                message: format!("namespaces \"{}\" not found", id.namespace),
            });
        }
        let key = key_of(id);
        let Some(live) = self.objects.get(&key) else {
            if !dry_run {
                let owners = desired
                    .keys()
                    .map(|f| (f.clone(), Managers::one(manager)))
                    .collect();
                let obj = StoredObject {
                    id: id.clone(),
                    uid: self.uids.uuid(),
                    resource_version: self.next_rv(),
                    fields: desired,
                    owners,
                };
                self.objects.insert(key, obj);
            }
            return Ok(ApplyAction::Created);
        };
        let conflicts = conflicts(live, &desired, manager);
        if !conflicts.is_empty() && !force {
            return Err(conflict_error(&conflicts));
        }
        let (fields, owners) = merged(live, &desired, manager);
        for (kind, f) in &self.immutable {
            if kind == &id.kind
                && live.fields.contains_key(f)
                && live.fields.get(f) != fields.get(f)
            {
                return Err(ApiError::Invalid {
                    message: format!(
                        "{} \"{}\" is invalid: {f}: Invalid value: field is immutable",
                        id.kind, id.name
                    ),
                });
            }
        }
        let version_changed = live.id.version != id.version;
        if fields == live.fields && owners == live.owners && !version_changed {
            return Ok(ApplyAction::Unchanged);
        }
        if !dry_run {
            let rv = self.next_rv();
            // The key was looked up above and nothing removed it since.
            let live = self.objects.get_mut(&key).expect("object present");
            live.fields = fields;
            live.owners = owners;
            live.id.version = id.version.clone();
            live.resource_version = rv;
        }
        Ok(ApplyAction::Updated)
    }

    /// Would applying `manifest` as `manager` change a field `manager` manages (or create the
    /// object)? This is the drift comparison of SPEC §20.
    pub fn drifted(&self, id: &ResourceId, manifest: &Value, manager: &str) -> bool {
        let Some(live) = self.get(id) else {
            return true;
        };
        // Both sides are sorted by (top, sub): one merge pass each way, no lookups and no
        // copies of the desired paths (this runs for every object of every attempt).
        let desired = field_refs(manifest);
        fn path(f: &FieldPath) -> (&str, &str) {
            (f.top.as_str(), f.sub.as_str())
        }
        // One comparison of paths per step (a `<` then a `!=` compared each path twice;
        // these comparisons were most of the drift check).
        let mut live_fields = live.fields.iter().peekable();
        let changed = desired.iter().any(|(want, v)| {
            loop {
                let Some((f, lv)) = live_fields.peek() else {
                    return true;
                };
                match path(f).cmp(want) {
                    Ordering::Less => {
                        live_fields.next();
                    }
                    Ordering::Equal => return *lv != *v,
                    Ordering::Greater => return true,
                }
            }
        });
        if changed {
            return true;
        }
        let mut wanted = desired.iter().map(|(w, _)| w).peekable();
        live.owners.iter().any(|(f, set)| {
            let have = path(f);
            let still_wanted = loop {
                match wanted.peek().map(|w| (**w).cmp(&have)) {
                    Some(Ordering::Less) => {
                        wanted.next();
                    }
                    Some(Ordering::Equal) => break true,
                    Some(Ordering::Greater) | None => break false,
                }
            };
            // The cheap test first: most owned fields are still wanted.
            !still_wanted && set.contains(manager)
        })
    }

    /// DELETE with a UID precondition.
    pub fn delete(&mut self, id: &ResourceId, uid: Option<&str>) -> Result<(), ApiError> {
        let key = key_of(id);
        precondition(id, uid, self.objects.get_mut(&key))?;
        self.objects.remove(&key);
        Ok(())
    }

    /// Removes `keys` from the object's labels (a merge patch with `null`s), after the same
    /// UID precondition as [`Store::delete`]: how a `prune: disabled` object is orphaned.
    pub fn remove_labels(
        &mut self,
        id: &ResourceId,
        uid: Option<&str>,
        keys: &[&str],
    ) -> Result<(), ApiError> {
        let rv = self.next_rv();
        let live = precondition(id, uid, self.objects.get_mut(&key_of(id)))?;
        for k in keys {
            let f = FieldPath::new(LABELS, k);
            live.fields.remove(&f);
            live.owners.remove(&f);
        }
        live.resource_version = rv;
        Ok(())
    }

    /// Sets `spec.suspend: false` (a merge patch) after the same UID precondition as
    /// [`Store::delete`]: how a `pre-delete` hook Job is started (SPEC §32).
    pub fn resume(&mut self, id: &ResourceId, uid: Option<&str>) -> Result<(), ApiError> {
        let rv = self.next_rv();
        let live = precondition(id, uid, self.objects.get_mut(&key_of(id)))?;
        let f = FieldPath::new("spec", "suspend");
        live.fields.insert(f, Value::Bool(false));
        live.resource_version = rv;
        Ok(())
    }

    /// Another actor writes one field and takes it over (`kubectl edit`, an HPA, ...).
    /// Creates the object if needed. A `null` value removes the field.
    pub fn write_field(&mut self, id: &ResourceId, manager: &str, field: FieldPath, value: Value) {
        let rv = self.next_rv();
        let key = key_of(id);
        if !self.objects.contains_key(&key) {
            let uid = self.uids.uuid();
            self.objects.insert(
                key.clone(),
                StoredObject {
                    id: id.clone(),
                    uid,
                    resource_version: rv,
                    fields: BTreeMap::new(),
                    owners: BTreeMap::new(),
                },
            );
        }
        // Inserted just above when absent.
        let obj = self.objects.get_mut(&key).expect("object present");
        obj.resource_version = rv;
        if value.is_null() {
            obj.fields.remove(&field);
            obj.owners.remove(&field);
        } else {
            obj.fields.insert(field.clone(), value);
            obj.owners.insert(field, Managers::one(manager));
        }
    }

    /// Creates a namespace as the cluster admin (no-op when it exists).
    pub fn ensure_namespace(&mut self, ns: &str) {
        let id = ResourceId {
            kind: "Namespace".into(),
            name: ns.into(),
            version: "v1".into(),
            ..Default::default()
        };
        if self.get(&id).is_none() {
            let manifest = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns}});
            // Cluster-scoped and new: apply cannot fail.
            let _ = self.apply(&id, &manifest, "cluster-admin", true, false);
        }
    }
}

/// The object a write with this UID precondition may change: `NotFound` when absent,
/// `Conflict` when another object (another UID) now has its name.
fn precondition<'a>(
    id: &ResourceId,
    uid: Option<&str>,
    live: Option<&'a mut StoredObject>,
) -> Result<&'a mut StoredObject, ApiError> {
    match live {
        None => Err(ApiError::NotFound {
            message: format!("{} \"{}\" not found", id.kind, id.name),
        }),
        Some(live) if uid.is_some_and(|u| u != live.uid) => Err(ApiError::Conflict {
            message: format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                uid.unwrap_or_default(),
                live.uid
            ),
        }),
        Some(live) => Ok(live),
    }
}

#[cfg(test)]
mod tests;
