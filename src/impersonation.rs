//! The effective ServiceAccount and what a release without one may do (SPEC §15).
//!
//! Effective ServiceAccount = `spec.serviceAccountName`, else `--default-service-account`,
//! else none. With none, the release's objects would be written under the operator's own
//! identity, so `--allow-operator-identity` decides:
//!
//! | flag | no ServiceAccount |
//! |---|---|
//! | `off` (default) | stall `ImpersonationFailed` before anything is written |
//! | `on` | allowed for namespaced objects in the release's namespace; any other object is a stall `ApplyFailed` naming it, before anything is written |
//! | `cluster` | allowed wherever the operator's RBAC reaches |
//!
//! A release author thus never gains more than a ServiceAccount of the namespace has,
//! unless the cluster admin opted into trusting every release author.

use crate::api::InventoryEntry;
use crate::config::AllowOperatorIdentity;
use crate::effect::Impersonation;
use crate::object::{DesiredObject, ResourceId};
use crate::outcome::Failure;
use crate::reason::Reason;

/// The `ImpersonationFailed` message of a release without any ServiceAccount (SPEC §4).
pub const NO_SERVICE_ACCOUNT: &str = "no ServiceAccount: set spec.serviceAccountName, or start the operator with --default-service-account";

/// Objects named in one message, at most; the rest are counted.
const NAMED: usize = 5;

/// `spec.serviceAccountName`, else `--default-service-account`, else none (the operator's
/// own identity). Empty strings count as unset.
pub fn effective_service_account(spec: Option<&str>, default: Option<&str>) -> Option<String> {
    spec.filter(|s| !s.is_empty())
        .or(default.filter(|s| !s.is_empty()))
        .map(str::to_string)
}

/// The identity requests are sent as: the ServiceAccount in the release's namespace, by
/// user name alone (the API server adds its groups).
pub fn impersonation(namespace: &str, service_account: &str) -> Impersonation {
    Impersonation {
        namespace: namespace.to_string(),
        service_account: service_account.to_string(),
        user: format!("system:serviceaccount:{namespace}:{service_account}"),
    }
}

/// Why `id` is out of reach of a release in `namespace` applying as the operator under
/// `--allow-operator-identity=on`, or `None` when it is a namespaced object of `namespace`.
/// A cluster-scoped object has an empty namespace once built (`render_value::build`).
pub fn outside(namespace: &str, id: &ResourceId) -> Option<String> {
    if id.namespace.is_empty() {
        Some(format!("{} is cluster-scoped", id.display()))
    } else if id.namespace != namespace {
        Some(format!("{} is in namespace {}", id.display(), id.namespace))
    } else {
        None
    }
}

/// Whether requests sent as the operator (no ServiceAccount) are confined to the release's
/// namespace. Only `cluster` lifts it; `off` never gets this far, and is confined should it.
pub fn confined(allow: AllowOperatorIdentity) -> bool {
    allow != AllowOperatorIdentity::Cluster
}

/// SPEC §3 step 12 for a release without a ServiceAccount: may its `objects` be written as
/// the operator? Decided on the whole render before any request is sent.
pub fn check_operator_identity(
    allow: AllowOperatorIdentity,
    namespace: &str,
    objects: &[DesiredObject],
) -> Result<(), Failure> {
    match allow {
        AllowOperatorIdentity::Off => Err(Failure::stalled(
            Reason::ImpersonationFailed,
            NO_SERVICE_ACCOUNT,
        )),
        AllowOperatorIdentity::Cluster => Ok(()),
        AllowOperatorIdentity::On => {
            let why: Vec<String> = objects
                .iter()
                .filter_map(|o| outside(namespace, &o.id))
                .collect();
            if why.is_empty() {
                Ok(())
            } else {
                Err(Failure::stalled(
                    Reason::ApplyFailed,
                    confinement_message(namespace, &why),
                ))
            }
        }
    }
}

/// `"<what>; a release applying as the operator may only write objects in its own
/// namespace <ns> (set spec.serviceAccountName, or --allow-operator-identity=cluster)"`.
pub(crate) fn confinement_message(namespace: &str, why: &[String]) -> String {
    format!(
        "{}; a release applying as the operator may only write objects in its own namespace {namespace} \
         (set spec.serviceAccountName, or --allow-operator-identity=cluster)",
        named(why)
    )
}

/// The inventory `entries` a prune as the confined operator may delete, and the ids it
/// must leave alone (out of the namespace: orphaned with a `PruneSkipped` warning, never
/// deleted as the operator).
pub(crate) fn split_prunable(
    namespace: &str,
    entries: &[InventoryEntry],
) -> (Vec<InventoryEntry>, Vec<ResourceId>) {
    let mut inside = Vec::new();
    let mut out = Vec::new();
    for e in entries {
        let id = ResourceId::from_entry(e);
        if outside(namespace, &id).is_some() {
            out.push(id);
        } else {
            inside.push(e.clone());
        }
    }
    (inside, out)
}

/// The `PruneSkipped` note for inventory entries a confined operator leaves alone.
pub(crate) fn prune_skipped_message(namespace: &str, skipped: &[ResourceId]) -> String {
    let names: Vec<String> = skipped.iter().map(ResourceId::display).collect();
    format!(
        "Skipped pruning {} resource(s) outside namespace {namespace}: a release applying as the operator \
         may only write objects in its own namespace: {}",
        skipped.len(),
        named(&names)
    )
}

fn named(items: &[String]) -> String {
    let shown = items
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match items.len().saturating_sub(NAMED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_wins_then_default_then_none() {
        assert_eq!(
            effective_service_account(Some("a"), Some("b")),
            Some("a".into())
        );
        assert_eq!(
            effective_service_account(Some(""), Some("b")),
            Some("b".into())
        );
        assert_eq!(effective_service_account(None, Some("b")), Some("b".into()));
        assert_eq!(effective_service_account(None, None), None);
        assert_eq!(effective_service_account(None, Some("")), None);
    }

    #[test]
    fn the_user_alone_no_groups() {
        let i = impersonation("demo", "deployer");
        assert_eq!(i.user, "system:serviceaccount:demo:deployer");
        let v = serde_json::to_value(&i).unwrap();
        assert!(v.get("groups").is_none(), "{v}");
        // Older traces carry groups: they still parse.
        let old: Impersonation = serde_json::from_value(serde_json::json!({
            "namespace": "demo", "serviceAccount": "deployer",
            "user": "system:serviceaccount:demo:deployer",
            "groups": ["system:serviceaccounts", "system:authenticated"],
        }))
        .unwrap();
        assert_eq!(old, i);
    }

    #[test]
    fn long_lists_are_cut() {
        let items: Vec<String> = (0..8).map(|i| format!("o{i}")).collect();
        assert_eq!(named(&items), "o0, o1, o2, o3, o4 and 3 more");
        assert_eq!(named(&items[..2]), "o0, o1");
    }
}
