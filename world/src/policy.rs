//! SPEC §28 in the world: per-object policies, as the core plans them.
//!
//! Whether an object of an Apply is written, and forced, is the core's
//! [`opm_core::policy::write_plan`], the rule the operator's apply follows too: `ssa:
//! Ignore` never writes, `IfNotPresent` only creates, `Merge` is never forced. What a
//! `Merge` write holds is the interpreter's `policy::prepare` at the store's field
//! granularity (a label, an annotation, or a key one level under a top-level key): a field
//! whose live value another manager owns and that the manifest would change is left out,
//! so the write never takes it.

use std::borrow::Cow;

use serde_json::Value;

use opm_core::input::{ApiError, ApplyAction};
use opm_core::object::DesiredObject;
use opm_core::policy::{self, SsaPolicy};

use super::store::{FieldPath, fields_of};
use crate::cluster::Cluster;

impl Cluster {
    /// One object of an Apply, as SPEC §28 plans it, as `manager`; `force` is the effect's.
    pub(super) fn apply_object(
        &mut self,
        o: &DesiredObject,
        manager: &str,
        force: bool,
    ) -> Result<ApplyAction, ApiError> {
        let live = self.store.get(&o.id).is_some();
        let plan = policy::write_plan(&o.policy, live, force);
        if !plan.writes() {
            return Ok(ApplyAction::Unchanged);
        }
        let manifest = self.shaped(o, manager);
        self.store
            .apply(&o.id, &manifest, manager, plan.forced(), false)
    }

    /// What applying `o` as `manager` writes: its manifest, without (for `ssa: Merge`) the
    /// fields another manager owns whose live value it would change.
    pub(super) fn shaped<'a>(&self, o: &'a DesiredObject, manager: &str) -> Cow<'a, Value> {
        if o.policy.ssa != SsaPolicy::Merge {
            return Cow::Borrowed(&o.manifest);
        }
        let Some(live) = self.store.get(&o.id) else {
            return Cow::Borrowed(&o.manifest);
        };
        let theirs: Vec<FieldPath> = fields_of(&o.manifest)
            .into_iter()
            .filter(|(f, v)| live.fields.get(f) != Some(v))
            .filter(|(f, _)| {
                live.owners
                    .get(f)
                    .is_some_and(|m| m.iter().any(|m| m != manager))
            })
            .map(|(f, _)| f)
            .collect();
        if theirs.is_empty() {
            return Cow::Borrowed(&o.manifest);
        }
        let mut out = o.manifest.clone();
        for f in &theirs {
            remove_field(&mut out, f);
        }
        Cow::Owned(out)
    }
}

/// Removes one store field from a manifest (the inverse of how `fields_of` reads it).
fn remove_field(manifest: &mut Value, f: &FieldPath) {
    let parent = match f.top.as_str() {
        "metadata.labels" => manifest.pointer_mut("/metadata/labels"),
        "metadata.annotations" => manifest.pointer_mut("/metadata/annotations"),
        top if f.sub.is_empty() => {
            if let Some(m) = manifest.as_object_mut() {
                m.remove(top);
            }
            return;
        }
        top => manifest.get_mut(top),
    };
    if let Some(m) = parent.and_then(Value::as_object_mut) {
        m.remove(&f.sub);
    }
}
