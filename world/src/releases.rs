//! Release objects as the API server keeps them: uid, generation bumped on spec changes
//! only, finalizers, `deletionTimestamp`, annotations, and the status subresource (merge
//! patches that never bump the generation).

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use opm_core::api::ReleaseStatus;
use opm_core::input::{ApiError, ReleaseSnapshot};
use opm_core::object::{ReleaseKey, ReleaseObject};

/// RFC 7386 JSON merge patch, applied in place.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

pub(super) fn meta_mut(o: &mut ReleaseObject) -> &mut ObjectMeta {
    match o {
        ReleaseObject::ModuleRelease(r) => &mut r.metadata,
        ReleaseObject::Release(r) => &mut r.metadata,
    }
}

pub(super) fn status_mut(o: &mut ReleaseObject) -> &mut Option<ReleaseStatus> {
    match o {
        ReleaseObject::ModuleRelease(r) => &mut r.status,
        ReleaseObject::Release(r) => &mut r.status,
    }
}

fn spec_value(o: &ReleaseObject) -> Value {
    match o {
        ReleaseObject::ModuleRelease(r) => serde_json::to_value(&r.spec),
        ReleaseObject::Release(r) => serde_json::to_value(&r.spec),
    }
    .unwrap_or(Value::Null)
}

fn set_spec(o: &mut ReleaseObject, v: Value) -> Result<(), serde_json::Error> {
    match o {
        ReleaseObject::ModuleRelease(r) => r.spec = serde_json::from_value(v)?,
        ReleaseObject::Release(r) => r.spec = serde_json::from_value(v)?,
    }
    Ok(())
}

/// A release and whether the world reconciles it (`external` ones are only read, e.g.
/// dependencies owned by someone else).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRecord {
    /// The release as the API server holds it, status included.
    pub object: ReleaseObject,
    /// Someone else reconciles it: never queued, only read by dependency checks.
    #[serde(default)]
    pub external: bool,
}

/// Why a release edit was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The release to edit does not exist; the string names it.
    #[error("release {0} not found")]
    NotFound(String),
    /// A release with that key exists already; the string names it.
    #[error("release {0} already exists")]
    Exists(String),
    /// The patched spec does not deserialise; the string says why.
    #[error("spec patch produces an invalid spec: {0}")]
    InvalidSpec(String),
}

/// All release objects, both kinds.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", from = "ReleasesData")]
pub struct Releases {
    records: BTreeMap<ReleaseKey, ReleaseRecord>,
    resource_version: u64,
    /// Keys of the releases with a non-empty `dependsOn`, kept in step with `records` so
    /// a Ready transition finds its dependents without walking the whole fleet.
    #[serde(skip)]
    with_deps: BTreeSet<ReleaseKey>,
}

/// What [`Releases`] serialises; the index is rebuilt on the way in.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReleasesData {
    records: BTreeMap<ReleaseKey, ReleaseRecord>,
    resource_version: u64,
}

impl From<ReleasesData> for Releases {
    fn from(d: ReleasesData) -> Self {
        let mut r = Releases {
            records: d.records,
            resource_version: d.resource_version,
            with_deps: BTreeSet::new(),
        };
        let keys: Vec<ReleaseKey> = r.records.keys().cloned().collect();
        for k in &keys {
            r.reindex(k);
        }
        r
    }
}

impl Releases {
    /// The releases that have a `dependsOn`, in key order.
    pub fn with_depends_on(&self) -> impl Iterator<Item = (&ReleaseKey, &ReleaseRecord)> {
        self.with_deps
            .iter()
            .filter_map(|k| self.records.get_key_value(k))
    }

    /// Puts `key` in or out of the `dependsOn` index after its record changed or went away.
    fn reindex(&mut self, key: &ReleaseKey) {
        let has_deps = self
            .records
            .get(key)
            .is_some_and(|r| !r.object.common().depends_on.is_empty());
        if has_deps {
            self.with_deps.insert(key.clone());
        } else {
            self.with_deps.remove(key);
        }
    }

    /// The release object under `key`, if it exists.
    pub fn get(&self, key: &ReleaseKey) -> Option<&ReleaseObject> {
        self.records.get(key).map(|r| &r.object)
    }

    /// The release under `key` with whether it is external.
    pub fn record(&self, key: &ReleaseKey) -> Option<&ReleaseRecord> {
        self.records.get(key)
    }

    /// Every release's key, in order.
    pub fn keys(&self) -> impl Iterator<Item = &ReleaseKey> {
        self.records.keys()
    }

    /// Every release with its record, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&ReleaseKey, &ReleaseRecord)> {
        self.records.iter()
    }

    fn bump(&mut self, key: &ReleaseKey) {
        self.resource_version += 1;
        let rv = self.resource_version.to_string();
        if let Some(r) = self.records.get_mut(key) {
            meta_mut(&mut r.object).resource_version = Some(rv);
        }
    }

    fn object_mut(&mut self, key: &ReleaseKey) -> Result<&mut ReleaseObject, ApiError> {
        self.records
            .get_mut(key)
            .map(|r| &mut r.object)
            .ok_or_else(|| ApiError::NotFound {
                message: format!("{} \"{}\" not found", key.kind.as_str(), key.name),
            })
    }

    /// Creates a release as a user would: generation 1, a fresh uid, no status.
    pub fn create(
        &mut self,
        mut object: ReleaseObject,
        external: bool,
        uid: String,
        now: Timestamp,
    ) -> Result<ReleaseKey, EditError> {
        let key = object.key();
        if self.records.contains_key(&key) {
            return Err(EditError::Exists(key.display()));
        }
        let meta = meta_mut(&mut object);
        meta.uid = Some(uid);
        meta.generation = Some(1);
        meta.creation_timestamp = Some(Time(now));
        meta.deletion_timestamp = None;
        self.records
            .insert(key.clone(), ReleaseRecord { object, external });
        self.reindex(&key);
        self.bump(&key);
        Ok(key)
    }

    /// Applies a merge patch to the spec; bumps the generation when the spec changed.
    /// Returns whether it changed.
    pub fn edit_spec(&mut self, key: &ReleaseKey, patch: &Value) -> Result<bool, EditError> {
        let o = self
            .object_mut(key)
            .map_err(|_| EditError::NotFound(key.display()))?;
        let before = spec_value(o);
        let mut after = before.clone();
        merge_patch(&mut after, patch);
        let mut candidate = o.clone();
        set_spec(&mut candidate, after).map_err(|e| EditError::InvalidSpec(e.to_string()))?;
        // Compare the typed result, so a patch that only restates defaults changes nothing.
        if spec_value(&candidate) == before {
            return Ok(false);
        }
        *o = candidate;
        let meta = meta_mut(o);
        meta.generation = Some(meta.generation.unwrap_or(0) + 1);
        self.reindex(key);
        self.bump(key);
        Ok(true)
    }

    /// Sets (or with `None` removes) an annotation. Metadata only: no generation bump.
    pub fn annotate(&mut self, key: &ReleaseKey, name: &str, value: Option<&str>) -> bool {
        let Ok(o) = self.object_mut(key) else {
            return false;
        };
        let ann = meta_mut(o).annotations.get_or_insert_with(BTreeMap::new);
        match value {
            Some(v) => ann.insert(name.to_string(), v.to_string()),
            None => ann.remove(name),
        };
        self.bump(key);
        true
    }

    /// `kubectl delete`: with finalizers the object only gets a `deletionTimestamp`.
    pub fn delete(&mut self, key: &ReleaseKey, now: Timestamp) -> bool {
        let Ok(o) = self.object_mut(key) else {
            return false;
        };
        let meta = meta_mut(o);
        if meta.finalizers.as_ref().is_none_or(|f| f.is_empty()) {
            self.records.remove(key);
            self.reindex(key);
            return true;
        }
        if meta.deletion_timestamp.is_none() {
            meta.deletion_timestamp = Some(Time(now));
        }
        self.bump(key);
        true
    }

    /// Adds `finalizer` once, as the merge patch would; Forbidden on a deleting release.
    pub fn add_finalizer(&mut self, key: &ReleaseKey, finalizer: &str) -> Result<(), ApiError> {
        let o = self.object_mut(key)?;
        let meta = meta_mut(o);
        if meta.deletion_timestamp.is_some() {
            return Err(ApiError::Forbidden {
                message: "no new finalizers can be added if the object is being deleted".into(),
            });
        }
        let f = meta.finalizers.get_or_insert_with(Vec::new);
        if !f.iter().any(|x| x == finalizer) {
            f.push(finalizer.to_string());
        }
        self.bump(key);
        Ok(())
    }

    /// Removes a finalizer; a deleting object without finalizers is gone afterwards.
    pub fn remove_finalizer(&mut self, key: &ReleaseKey, finalizer: &str) -> Result<(), ApiError> {
        let o = self.object_mut(key)?;
        let meta = meta_mut(o);
        if let Some(f) = meta.finalizers.as_mut() {
            f.retain(|x| x != finalizer);
        }
        let gone = meta.deletion_timestamp.is_some()
            && meta.finalizers.as_ref().is_none_or(|f| f.is_empty());
        if gone {
            self.records.remove(key);
            self.reindex(key);
        } else {
            self.bump(key);
        }
        Ok(())
    }

    /// A merge patch to the status subresource. Returns the status now stored.
    pub fn patch_status(
        &mut self,
        key: &ReleaseKey,
        patch: &Value,
    ) -> Result<ReleaseStatus, ApiError> {
        self.patch_status_in_place(key, patch).cloned()
    }

    /// [`Releases::patch_status`] returning the stored status where it lies, not a copy.
    pub fn patch_status_in_place(
        &mut self,
        key: &ReleaseKey,
        patch: &Value,
    ) -> Result<&ReleaseStatus, ApiError> {
        let o = self.object_mut(key)?;
        let status = status_mut(o);
        // Serialised where it lies: a copy of the status first was wasted.
        let current = match status {
            Some(s) => serde_json::to_value(&*s),
            None => serde_json::to_value(ReleaseStatus::default()),
        };
        let mut v = current.unwrap_or(Value::Null);
        merge_patch(&mut v, patch);
        let new: ReleaseStatus = serde_json::from_value(v).map_err(|e| ApiError::Invalid {
            message: format!("status is invalid: {e}"),
        })?;
        *status = Some(new);
        self.bump(key);
        // Written just above.
        Ok(self
            .get(key)
            .and_then(ReleaseObject::status)
            .expect("status just written"))
    }

    /// Writes a status directly, as another controller owning an external release would.
    pub fn set_status(&mut self, key: &ReleaseKey, status: ReleaseStatus) -> bool {
        let Ok(o) = self.object_mut(key) else {
            return false;
        };
        *status_mut(o) = Some(status);
        self.bump(key);
        true
    }

    /// The dependency check's view of one release (SPEC §14).
    pub fn snapshot(&self, key: &ReleaseKey) -> Option<ReleaseSnapshot> {
        self.get(key).map(opm_core::deps::snapshot)
    }
}

#[cfg(test)]
mod tests;
