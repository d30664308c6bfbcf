//! Who owns a live object (SPEC §25), and the `releases.opmodel.dev/prune: disabled` policy
//! (SPEC §28) that hands an object from one release to another.
//!
//! Every release writes with the same field manager, so server-side apply alone never
//! notices that an object belongs to someone else: a release that renders another tenant's
//! object (or `kube-system/coredns`) would silently take it over and, once it drops it from
//! its render, prune it. The operator therefore reads each object it is about to write for
//! and this module decides from its labels whether the write may happen.
//!
//! The check covers every object the release renders, whatever its `ssa` policy and
//! whether or not `status.inventory` lists it (SPEC §25): an `ssa: IfNotPresent` or
//! `Ignore` object is never written over, but it enters the inventory, and what is in the
//! inventory the next revision writes and the one after prunes; and `status.inventory` is
//! written through the status subresource, which a tenant may be allowed to write too, so
//! it proves nothing about who owns an object. Only the live `uuid` label does. An
//! unchanged release never reaches the apply (no-op, SPEC §7), and the objects it owns are
//! held by the operator's watch of managed objects, so the read costs no request for them.

use std::collections::BTreeMap;

use crate::api::InventoryEntry;
use crate::constants::{PRUNE_ANNOTATION, PRUNE_DISABLED, labels};
use crate::input::{ApiError, LiveObject};
use crate::object::{DesiredObject, Kind, ResourceId};
use crate::outcome::Failure;
use crate::reason::Reason;
use crate::render_value::release_uuid;

/// Removes the `releases.opmodel.dev/prune` annotation from every manifest (it is an
/// instruction to the operator, never applied) and returns the objects that set it to
/// `disabled`.
pub fn strip_policies(objects: &mut [DesiredObject]) -> Vec<ResourceId> {
    let mut disabled = Vec::new();
    for o in objects.iter_mut() {
        let Some(meta) = o
            .manifest
            .get_mut("metadata")
            .and_then(|m| m.as_object_mut())
        else {
            continue;
        };
        let Some(annotations) = meta.get_mut("annotations").and_then(|a| a.as_object_mut()) else {
            continue;
        };
        if let Some(v) = annotations.remove(PRUNE_ANNOTATION) {
            if v.as_str() == Some(PRUNE_DISABLED) {
                disabled.push(o.id.clone());
            }
            if annotations.is_empty() {
                meta.remove("annotations");
            }
        }
    }
    disabled
}

/// Records the prune policy in the inventory entries, so that an object that later leaves
/// the render (its annotation gone with it) is still known to be orphaned, not deleted.
pub(crate) fn mark_prune_disabled(entries: &mut [InventoryEntry], disabled: &[ResourceId]) {
    for e in entries.iter_mut() {
        if disabled.iter().any(|d| d.identity() == entry_identity(e)) {
            e.prune = PRUNE_DISABLED.to_string();
        }
    }
}

/// Whether an inventory entry carries the `prune: disabled` policy.
pub fn prune_disabled(e: &InventoryEntry) -> bool {
    e.prune == PRUNE_DISABLED
}

fn entry_identity(e: &InventoryEntry) -> (&str, &str, &str, &str) {
    (&e.group, &e.kind, &e.namespace, &e.name)
}

/// The objects whose owner must be read before an apply: every desired object, whatever
/// its `ssa` policy, in or out of the persisted inventory (see the module docs: the
/// inventory is the release's own status and may be forged; a never-written object still
/// enters it).
pub fn targets(desired: &[DesiredObject]) -> Vec<ResourceId> {
    desired.iter().map(|d| d.id.clone()).collect()
}

/// The owner of a live object, as its labels say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Not there: it will be created.
    Absent,
    /// Carries this release's uuid (an earlier, failed attempt applied it).
    Ours,
    /// Carries another release's uuid.
    Release(String),
    /// Exists without a uuid label: created by a person, a tool or the cluster itself.
    Unowned,
}

/// Classifies one live object's labels against `our_uuid`.
pub fn owner(labels_: Option<&BTreeMap<String, String>>, our_uuid: &str) -> Owner {
    let Some(l) = labels_ else {
        return Owner::Absent;
    };
    match l.get(labels::RELEASE_UUID).map(String::as_str) {
        Some(u) if u == our_uuid => Owner::Ours,
        Some(u) if !u.is_empty() => Owner::Release(describe_release(l, u)),
        _ => Owner::Unowned,
    }
}

/// "ModuleRelease demo/other" from the release labels; the kind is the one whose uuid
/// matches (labels can be forged, so a mismatch is named by uuid alone).
fn describe_release(l: &BTreeMap<String, String>, uuid: &str) -> String {
    let name = l
        .get(labels::RELEASE_NAME)
        .map(String::as_str)
        .unwrap_or("");
    let ns = l
        .get(labels::RELEASE_NAMESPACE)
        .map(String::as_str)
        .unwrap_or("");
    for kind in [Kind::ModuleRelease, Kind::Release] {
        if !name.is_empty() && release_uuid(kind, ns, name) == uuid {
            return format!("{} {ns}/{name}", kind.as_str());
        }
    }
    format!("the release with uuid {uuid}")
}

/// "ConfigMap demo/app", or "ClusterRole admin" when cluster-scoped (SPEC §25's wording).
pub fn describe(id: &ResourceId) -> String {
    if id.namespace.is_empty() {
        format!("{} {}", id.kind, id.name)
    } else {
        format!("{} {}/{}", id.kind, id.namespace, id.name)
    }
}

/// Decides whether the apply may go ahead: `Ok` when every target is absent, ours, or
/// (with `adopt`) unowned; otherwise the failure that stops the attempt before anything is
/// written. `impersonating` names the identity the reads ran as, for a Forbidden answer.
pub fn decide(
    targets: &[ResourceId],
    live: &[LiveObject],
    our_uuid: &str,
    adopt: bool,
    impersonating: Option<&str>,
) -> Result<(), Failure> {
    decide_listed(targets, live, our_uuid, adopt, &[], impersonating)
}

/// [`decide`] for a release whose persisted inventory is `listed`. An unowned object the
/// inventory lists is taken back as with `adoptExisting` (the release applied it, and its
/// labels were removed, or it was deleted and re-created by someone else): a tenant could
/// set `adoptExisting` anyway, so a forged entry gains it nothing more. An object carrying
/// another release's uuid is a conflict whatever the inventory says.
pub fn decide_listed(
    targets: &[ResourceId],
    live: &[LiveObject],
    our_uuid: &str,
    adopt: bool,
    listed: &[InventoryEntry],
    impersonating: Option<&str>,
) -> Result<(), Failure> {
    let mut conflicts = Vec::new();
    let mut errors: Vec<(ResourceId, ApiError)> = Vec::new();
    for t in targets {
        let Some(obs) = live.iter().find(|l| &l.id == t) else {
            errors.push((
                t.clone(),
                ApiError::Other {
                    code: 0,
                    message: "no ownership answer".into(),
                },
            ));
            continue;
        };
        let meta = match &obs.result {
            Ok(m) => m.as_ref(),
            Err(ApiError::NotFound { .. }) => None,
            Err(e) => {
                errors.push((t.clone(), e.clone()));
                continue;
            }
        };
        match owner(meta.map(|m| &m.labels), our_uuid) {
            Owner::Absent | Owner::Ours => {}
            Owner::Release(other) => {
                conflicts.push(format!("{} belongs to {other}", describe(t)));
            }
            Owner::Unowned
                if adopt || listed.iter().any(|e| entry_identity(e) == t.identity()) => {}
            Owner::Unowned => conflicts.push(format!(
                "{} exists and was not created by a release; set spec.rollout.adoptExisting: true to take it over",
                describe(t)
            )),
        }
    }
    if !conflicts.is_empty() {
        return Err(Failure::stalled(
            Reason::OwnershipConflict,
            conflicts.join("; "),
        ));
    }
    if errors.is_empty() {
        return Ok(());
    }
    let detail = errors
        .iter()
        .map(|(id, e)| format!("{}: {e}", describe(id)))
        .collect::<Vec<_>>()
        .join("; ");
    let forbidden = errors
        .iter()
        .any(|(_, e)| matches!(e, ApiError::Forbidden { .. }));
    Err(match (forbidden, impersonating) {
        (true, Some(who)) => Failure::stalled(
            Reason::ImpersonationFailed,
            format!("reading objects before apply forbidden while impersonating {who}: {detail}"),
        ),
        _ => Failure::transient(
            Reason::ApplyFailed,
            format!("reading objects before apply failed: {detail}"),
        ),
    })
}

#[cfg(test)]
mod tests;
