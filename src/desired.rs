//! What a release wants in the cluster, as one rule shared by the machine and
//! `kubectl opm diff`: a render's exported value → the desired objects (SPEC §18, §24,
//! §28, §32), and what prune does with each stale inventory entry (SPEC §9, §25, §28).
//!
//! The machine ([`crate::machine`]) runs these steps in its render phase and its prune
//! step; `kubectl opm diff` runs the same ones on a proposed render, so what it predicts
//! is what the operator would write and prune.

use serde_json::Value;

use crate::api::{IgnoreRule, InventoryEntry};
use crate::config::Config;
use crate::input::GroupKind;
use crate::object::{DesiredObject, ResourceId};
use crate::outcome::Failure;
use crate::render_value::{self, ReleaseIdentity};
use crate::{digest, hooks, ownership, policy, prune};

/// The objects under `components.<c>.<key>` of an exported render, borrowed (a render at
/// the caps is not copied): what the interpreter asks discovery about to learn which
/// kinds are cluster-scoped.
pub fn exported_objects(exported: &Value) -> Vec<&Value> {
    exported
        .get("components")
        .and_then(Value::as_object)
        .map(|cs| {
            cs.values()
                .filter_map(Value::as_object)
                .flat_map(|objs| objs.values())
                .collect()
        })
        .unwrap_or_default()
}

/// The render caps of `cfg` (SPEC §24), then the exported value turned into stamped
/// objects ([`render_value::build_owned`]). `bytes` is the render's measured size.
pub fn objects(
    exported: Value,
    bytes: u64,
    cluster_scoped: &[GroupKind],
    release: &ReleaseIdentity,
    cfg: &Config,
) -> Result<Vec<DesiredObject>, Failure> {
    render_value::check_caps(
        &exported,
        bytes,
        cfg.max_render_objects,
        cfg.max_render_bytes,
    )?;
    render_value::build_owned(exported, cluster_scoped, release)
}

/// The desired objects of one render, their policy annotations taken out.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The objects to write, without the operator's annotations once
    /// [`Desired::extract`] has run.
    pub objects: Vec<DesiredObject>,
    /// The render digest (SPEC §7), taken before any annotation is removed, so changing a
    /// policy is a change; hooks carry it (SPEC §32).
    pub render_digest: String,
    /// The objects annotated `releases.opmodel.dev/prune: disabled` (SPEC §28).
    pub prune_disabled: Vec<ResourceId>,
}

impl Desired {
    /// Takes the render digest, then removes the `prune` annotation (remembering who set
    /// it to `disabled`).
    pub fn new(mut objects: Vec<DesiredObject>) -> Self {
        let render_digest = digest::render(objects.iter().map(|o| &o.manifest));
        let prune_disabled = ownership::strip_policies(&mut objects);
        Self {
            objects,
            render_digest,
            prune_disabled,
        }
    }

    /// Moves the per-object policies (SPEC §28, drift's `ignore` rules included) and the
    /// hook phases (SPEC §32, at most `cfg.max_hooks` hooks) out of the annotations.
    pub fn extract(&mut self, ignore_rules: &[IgnoreRule], cfg: &Config) -> Result<(), Failure> {
        policy::extract(&mut self.objects, ignore_rules)?;
        hooks::extract(&mut self.objects, cfg.max_hooks, &self.render_digest)
    }
}

/// What prune does with one stale inventory entry, by the first rule that applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleFate {
    /// A Namespace or a CustomResourceDefinition: never deleted ([`prune::is_protected`]).
    Protected,
    /// Marked `releases.opmodel.dev/prune: disabled`: its labels are removed, the object
    /// stays for another release to adopt (SPEC §25 handover).
    Orphaned,
    /// `spec.prune` is false: left as it is.
    Kept,
    /// Deleted, once the guards of [`prune::decide`] find it ours.
    Deleted,
}

/// The fate of the stale entry `e` of a release whose `spec.prune` is `spec_prune`.
pub fn stale_fate(e: &InventoryEntry, spec_prune: bool) -> StaleFate {
    if prune::is_protected(&ResourceId::from_entry(e)) {
        StaleFate::Protected
    } else if ownership::prune_disabled(e) {
        StaleFate::Orphaned
    } else if !spec_prune {
        StaleFate::Kept
    } else {
        StaleFate::Deleted
    }
}

/// Whether the prune step visits the stale entry `e` at all: every one with `spec.prune`;
/// without it only those to orphan.
pub fn prune_visits(e: &InventoryEntry, spec_prune: bool) -> bool {
    spec_prune || ownership::prune_disabled(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(group: &str, kind: &str, prune: &str) -> InventoryEntry {
        InventoryEntry {
            group: group.into(),
            kind: kind.into(),
            name: "x".into(),
            prune: prune.into(),
            ..Default::default()
        }
    }

    #[test]
    fn stale_fates_in_order() {
        let disabled = crate::constants::PRUNE_DISABLED;
        let ns = entry("", "Namespace", disabled);
        assert_eq!(stale_fate(&ns, true), StaleFate::Protected);
        let cm = entry("", "ConfigMap", disabled);
        assert_eq!(stale_fate(&cm, false), StaleFate::Orphaned);
        assert!(prune_visits(&cm, false));
        let cm = entry("", "ConfigMap", "");
        assert_eq!(stale_fate(&cm, false), StaleFate::Kept);
        assert!(!prune_visits(&cm, false));
        assert_eq!(stale_fate(&cm, true), StaleFate::Deleted);
    }

    #[test]
    fn exported_objects_of_every_component() {
        let v = serde_json::json!({"components": {"a": {"x": {"kind": "A"}}, "b": {"y": {"kind": "B"}, "z": {"kind": "C"}}}});
        assert_eq!(exported_objects(&v).len(), 3);
        assert!(exported_objects(&serde_json::json!({})).is_empty());
    }
}
