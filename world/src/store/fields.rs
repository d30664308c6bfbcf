//! The fields of a manifest as the store tracks them: [`FieldPath`] (a label, an
//! annotation, or a key one level under a top-level key) and the [`Managers`] of each.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

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

pub(super) const LABELS: &str = "metadata.labels";
pub(super) const ANNOTATIONS: &str = "metadata.annotations";

/// The fields of a manifest as this store understands them.
pub(crate) fn fields_of(manifest: &Value) -> BTreeMap<FieldPath, Value> {
    field_refs(manifest)
        .into_iter()
        .map(|((top, sub), v)| (FieldPath::new(top, sub), v.clone()))
        .collect()
}

/// A field path borrowed from a manifest, as `(top, sub)`: sorts exactly as [`FieldPath`].
pub(super) type FieldRef<'a> = (&'a str, &'a str);

/// [`fields_of`] borrowing from the manifest, sorted by path, each path once (the last
/// one written wins, as a map insert would): comparisons (drift checks) need no copy of
/// anything. A vector sorted once rather than a B-tree built node by node: this runs for
/// every object of every attempt, and the manifest's maps already iterate in order.
pub(super) fn field_refs(manifest: &Value) -> Vec<(FieldRef<'_>, &Value)> {
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
