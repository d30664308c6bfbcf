//! A live object of the store: its identity, uid, resource version, fields and their
//! managers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use opm_core::object::ResourceId;

use super::fields::{ANNOTATIONS, FieldPath, LABELS, Managers};

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
