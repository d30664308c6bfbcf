//! Prune decisions and guards (SPEC §9). The interpreter only GETs and DELETEs; whether an
//! object may be deleted is decided here from what it reported.

use crate::api::InventoryEntry;
use crate::constants::labels;
use crate::effect::Deletion;
use crate::input::{ApiError, LiveObject, ObjectResult};
use crate::object::ResourceId;
use crate::render_value::apply_order_key;

/// Namespaces and CRDs are never deleted by prune.
pub fn is_protected(id: &ResourceId) -> bool {
    (id.group.is_empty() && id.kind == "Namespace")
        || (id.group == "apiextensions.k8s.io" && id.kind == "CustomResourceDefinition")
}

/// Splits stale entries into (protected, targets in reverse apply order).
pub fn plan(stale: &[InventoryEntry]) -> (Vec<ResourceId>, Vec<ResourceId>) {
    let mut ids: Vec<ResourceId> = stale.iter().map(ResourceId::from_entry).collect();
    ids.sort_by(|a, b| apply_order_key(b).cmp(&apply_order_key(a)));
    ids.into_iter().partition(is_protected)
}

/// One failed GET or DELETE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PruneFailure {
    /// The stale object.
    pub id: ResourceId,
    /// Why the GET or DELETE failed; Forbidden stalls on the identity.
    pub error: ApiError,
}

/// What to do after inspecting the live stale objects.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Decision {
    /// Objects confirmed ours, each deleted with its UID as precondition.
    pub deletions: Vec<Deletion>,
    /// Present but not ours (other manager, or another release's uuid).
    pub not_ours: Vec<ResourceId>,
    /// GETs that failed; the prune fails with them.
    pub failures: Vec<PruneFailure>,
}

/// Applies the guards to each inspected object, keeping the order given. Only targets that
/// were asked for are considered. An object is ours only when its `managed-by` label is one
/// of ours *and* its uuid label is present and equal to `our_uuid`: `managed-by` alone is
/// set by other tools and releases too. Targets in `orphan` (`prune: disabled`) that are
/// ours get their labels removed instead of being deleted.
pub fn decide(
    targets: &[ResourceId],
    live: &[LiveObject],
    our_uuid: &str,
    orphan: &[ResourceId],
) -> Decision {
    let mut d = Decision::default();
    for target in targets {
        let Some(obs) = live.iter().find(|l| &l.id == target) else {
            continue;
        };
        match &obs.result {
            Ok(None) => {}
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => d.failures.push(PruneFailure {
                id: target.clone(),
                error: e.clone(),
            }),
            Ok(Some(meta)) => {
                let managed = meta
                    .labels
                    .get(labels::MANAGED_BY)
                    .is_some_and(|m| labels::OURS.contains(&m.as_str()));
                let uuid_ok = meta
                    .labels
                    .get(labels::RELEASE_UUID)
                    .is_some_and(|u| u == our_uuid);
                if managed && uuid_ok && !meta.uid.is_empty() {
                    d.deletions.push(Deletion {
                        id: target.clone(),
                        uid: meta.uid.clone(),
                        orphan: orphan.contains(target),
                        resume: false,
                    });
                } else {
                    d.not_ours.push(target.clone());
                }
            }
        }
    }
    d
}

/// Counts deletions and collects failures. Gone (404) is fine; a failed UID precondition
/// (409) means a successor we never checked, so it is left alone.
pub(crate) fn tally(requested: &[Deletion], results: &[ObjectResult]) -> (u64, Vec<PruneFailure>) {
    let mut deleted = 0;
    let mut failures = Vec::new();
    for r in results {
        let Some(req) = requested.iter().find(|d| d.id == r.id) else {
            continue;
        };
        match &r.result {
            Ok(()) if req.orphan => {}
            Ok(()) => deleted += 1,
            Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
            Err(e) => failures.push(PruneFailure {
                id: r.id.clone(),
                error: e.clone(),
            }),
        }
    }
    (deleted, failures)
}

/// `PruneFailed` message listing each failure.
pub(crate) fn failure_message(failures: &[PruneFailure]) -> String {
    let parts: Vec<String> = failures
        .iter()
        .map(|f| format!("{}: {}", f.id.display(), f.error))
        .collect();
    format!(
        "prune failed for {} object(s): {}",
        failures.len(),
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests;
