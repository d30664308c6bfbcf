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

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use opm_core::input::{ApiError, ApplyAction, GroupKind};
use opm_core::object::ResourceId;

use super::prng::SplitMix64;

/// One managed field: `top` is `metadata.labels`, `metadata.annotations` or a top-level key;
/// `sub` is the label/annotation/sub-key, or empty for a scalar top-level field.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FieldPath {
    /// `metadata.labels`, `metadata.annotations`, or a top-level key such as `spec`.
    pub top: String,
    /// The label or annotation key, or the key under `top`; empty for a scalar top-level field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
}

impl FieldPath {
    /// Names a field from its two parts.
    pub fn new(top: &str, sub: &str) -> Self {
        Self {
            top: top.to_string(),
            sub: sub.to_string(),
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.sub.is_empty() {
            write!(f, ".{}", self.top)
        } else {
            write!(f, ".{}.{}", self.top, self.sub)
        }
    }
}

/// The managers of one field, sorted and without duplicates. Nearly every field has
/// exactly one, so this is a short vector: a `BTreeSet` allocates a node for eleven names
/// per field, which made the field maps most of a 10 000-release world's memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "BTreeSet<String>", into = "BTreeSet<String>")]
pub struct Managers(Vec<String>);

impl Managers {
    /// A field owned by `manager` alone.
    pub fn one(manager: &str) -> Self {
        Self(vec![manager.to_string()])
    }

    /// Whether `manager` owns the field, alone or shared.
    pub fn contains(&self, manager: &str) -> bool {
        self.0.iter().any(|m| m == manager)
    }

    /// Adds `manager` (no-op when present).
    pub fn insert(&mut self, manager: &str) {
        if let Err(i) = self.0.binary_search_by(|m| m.as_str().cmp(manager)) {
            self.0.insert(i, manager.to_string());
        }
    }

    /// Drops `manager`'s ownership (no-op when absent).
    pub fn remove(&mut self, manager: &str) {
        self.0.retain(|m| m != manager);
    }

    /// Drops every manager, when a changed value passes to the applier alone.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Whether no manager owns the field any longer, so that it is removed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many managers share the field.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The managers in name order.
    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter()
    }
}

impl From<BTreeSet<String>> for Managers {
    fn from(set: BTreeSet<String>) -> Self {
        Self(set.into_iter().collect())
    }
}

impl From<Managers> for BTreeSet<String> {
    fn from(m: Managers) -> Self {
        m.0.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Managers {
    type Item = &'a String;
    type IntoIter = std::slice::Iter<'a, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

const LABELS: &str = "metadata.labels";
const ANNOTATIONS: &str = "metadata.annotations";

/// The fields of a manifest as this store understands them.
pub(super) fn fields_of(manifest: &Value) -> BTreeMap<FieldPath, Value> {
    field_refs(manifest)
        .into_iter()
        .map(|((top, sub), v)| (FieldPath::new(top, sub), v.clone()))
        .collect()
}

/// A field path borrowed from a manifest, as `(top, sub)`: sorts exactly as [`FieldPath`].
type FieldRef<'a> = (&'a str, &'a str);

/// [`fields_of`] borrowing from the manifest, sorted by path, each path once (the last
/// one written wins, as a map insert would): comparisons (drift checks) need no copy of
/// anything. A vector sorted once rather than a B-tree built node by node: this runs for
/// every object of every attempt, and the manifest's maps already iterate in order.
fn field_refs(manifest: &Value) -> Vec<(FieldRef<'_>, &Value)> {
    let mut out = Vec::new();
    let Some(obj) = manifest.as_object() else {
        return out;
    };
    if let Some(meta) = obj.get("metadata").and_then(Value::as_object) {
        for (top, key) in [(LABELS, "labels"), (ANNOTATIONS, "annotations")] {
            if let Some(map) = meta.get(key).and_then(Value::as_object) {
                for (k, v) in map {
                    out.push(((top, k.as_str()), v));
                }
            }
        }
    }
    for (k, v) in obj {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
            continue;
        }
        match v {
            Value::Object(sub) if !sub.is_empty() => {
                for (sk, sv) in sub {
                    out.push(((k.as_str(), sk.as_str()), sv));
                }
            }
            other => out.push(((k.as_str(), ""), other)),
        }
    }
    // Stable, so equal paths keep their order; then keep the last of each run.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    // In place: the one kept of each run takes the value of the run's last.
    out.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = later.1;
        }
        same
    });
    out
}

/// Storage key: (group, kind, namespace, name). The version is not part of identity.
pub(super) type ObjKey = (String, String, String, String);

pub(super) fn key_of(id: &ResourceId) -> ObjKey {
    (
        id.group.clone(),
        id.kind.clone(),
        id.namespace.clone(),
        id.name.clone(),
    )
}

/// An object's identity as borrowed parts, so maps keyed by [`ObjKey`] can be searched
/// with a [`ResourceId`] without copying its four strings on every lookup.
pub(crate) trait KeyParts {
    fn parts(&self) -> (&str, &str, &str, &str);
}

impl KeyParts for ObjKey {
    fn parts(&self) -> (&str, &str, &str, &str) {
        (&self.0, &self.1, &self.2, &self.3)
    }
}

impl KeyParts for ResourceId {
    fn parts(&self) -> (&str, &str, &str, &str) {
        (&self.group, &self.kind, &self.namespace, &self.name)
    }
}

// Tuples order field by field, exactly as these compare the parts: `Borrow`'s contract.
impl<'a> std::borrow::Borrow<dyn KeyParts + 'a> for ObjKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

impl PartialOrd for dyn KeyParts + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for dyn KeyParts + '_ {
    // A tuple of `&str` hashes exactly as the same tuple of `String`s.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl Ord for dyn KeyParts + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
    }
}

/// A live object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredObject {
    /// Identity with the API version last written.
    pub id: ResourceId,
    /// Drawn from the store's generator at creation; what a delete's UID precondition checks.
    pub uid: String,
    /// Bumped on every write, so that a watch sees the change (SPEC §26).
    pub resource_version: u64,
    /// The object's content, split into managed fields.
    pub fields: BTreeMap<FieldPath, Value>,
    /// Managers of each field; a field is never without one.
    pub owners: BTreeMap<FieldPath, Managers>,
}

impl StoredObject {
    /// Its labels as strings, for the ownership and prune guards.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.fields
            .iter()
            .filter(|(f, _)| f.top == LABELS)
            .map(|(f, v)| (f.sub.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect()
    }

    /// One label's value, if it is set.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.fields
            .get(&FieldPath::new(LABELS, key))
            .and_then(Value::as_str)
    }

    /// The object as the API server would return it (without managedFields).
    pub fn manifest(&self) -> Value {
        let mut meta = Map::new();
        meta.insert("name".into(), Value::String(self.id.name.clone()));
        if !self.id.namespace.is_empty() {
            meta.insert("namespace".into(), Value::String(self.id.namespace.clone()));
        }
        meta.insert("uid".into(), Value::String(self.uid.clone()));
        meta.insert(
            "resourceVersion".into(),
            Value::String(self.resource_version.to_string()),
        );
        let mut top = Map::new();
        top.insert("apiVersion".into(), Value::String(self.id.api_version()));
        top.insert("kind".into(), Value::String(self.id.kind.clone()));
        for (f, v) in &self.fields {
            if f.top == LABELS || f.top == ANNOTATIONS {
                let key = if f.top == LABELS {
                    "labels"
                } else {
                    "annotations"
                };
                let entry = meta
                    .entry(key.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(m) = entry {
                    m.insert(f.sub.clone(), v.clone());
                }
            } else if f.sub.is_empty() {
                top.entry(f.top.clone()).or_insert_with(|| v.clone());
            } else {
                let entry = top
                    .entry(f.top.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !entry.is_object() {
                    // An object-shaped field replaces a scalar one of the same name.
                    *entry = Value::Object(Map::new());
                }
                if let Value::Object(m) = entry {
                    m.insert(f.sub.clone(), v.clone());
                }
            }
        }
        top.insert("metadata".into(), Value::Object(meta));
        Value::Object(top)
    }
}

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
        let conflicts: Vec<(String, &FieldPath)> = desired
            .iter()
            .filter(|(f, v)| live.fields.get(*f) != Some(*v))
            .filter_map(|(f, _)| {
                let others: Vec<&String> = live
                    .owners
                    .get(f)
                    .into_iter()
                    .flatten()
                    .filter(|m| m.as_str() != manager)
                    .collect();
                others.first().map(|m| ((*m).clone(), f))
            })
            .collect();
        if !conflicts.is_empty() && !force {
            let list: Vec<String> = conflicts
                .iter()
                .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
                .collect();
            return Err(ApiError::Conflict {
                message: format!(
                    "Apply failed with {} conflict{}: {}",
                    conflicts.len(),
                    if conflicts.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
            });
        }
        let mut fields = live.fields.clone();
        let mut owners = live.owners.clone();
        // Fields this manager stops applying lose it as an owner; unowned fields go away.
        for (f, set) in owners.iter_mut() {
            if !desired.contains_key(f) {
                set.remove(manager);
            }
        }
        owners.retain(|f, set| {
            let keep = !set.is_empty();
            if !keep {
                fields.remove(f);
            }
            keep
        });
        for (f, v) in &desired {
            let set = owners.entry(f.clone()).or_default();
            if fields.get(f) != Some(v) {
                // A changed value belongs to the applier alone (forced, or nobody else had it).
                set.clear();
            }
            set.insert(manager);
            fields.insert(f.clone(), v.clone());
        }
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
