//! Deletion (SPEC §12): the finalizer 2×2 and the messages of the ServiceAccount-missing paths.
//!
//! | finalizer \ deletionTimestamp | unset | set |
//! |---|---|---|
//! | absent  | add it, continue | done (not ours) |
//! | present | reconcile | deletion path |

use crate::api::DeletionPolicy;
use crate::config::AllowOperatorIdentity;
use crate::constants::ORPHAN_ANNOTATION;

/// What a deleting release with our finalizer needs first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// `prune: false` or nothing in the inventory: orphan and remove the finalizer.
    RemoveFinalizer,
    /// Prune the whole inventory as this ServiceAccount once it is known to exist.
    CheckServiceAccount(String),
    /// Prune the whole inventory as the operator (`--allow-operator-identity`).
    Prune,
    /// No ServiceAccount at all and no `--allow-operator-identity`: as if the
    /// ServiceAccount were missing (SPEC §12 step 2).
    ServiceAccountMissing,
}

/// Decides what deleting the release does with its inventory (SPEC §12).
pub fn plan(
    prune: bool,
    inventory_count: usize,
    service_account: Option<&str>,
    allow: AllowOperatorIdentity,
) -> Plan {
    if !prune || inventory_count == 0 {
        Plan::RemoveFinalizer
    } else if let Some(sa) = service_account {
        Plan::CheckServiceAccount(sa.to_string())
    } else if allow == AllowOperatorIdentity::Off {
        Plan::ServiceAccountMissing
    } else {
        Plan::Prune
    }
}

/// Whether deleting the release deletes its objects under `spec.deletionPolicy` (SPEC §12):
/// `MirrorPrune` (the default) follows `prune`, `Delete` and `WaitForTermination` always
/// delete, `Orphan` never does.
pub fn deletes(policy: Option<DeletionPolicy>, prune: bool) -> bool {
    match policy.unwrap_or_default() {
        DeletionPolicy::MirrorPrune => prune,
        DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
        DeletionPolicy::Orphan => false,
    }
}

/// `PruneFailed` message of a `WaitForTermination` deletion whose objects are not all gone
/// within the release's `timeout` (or whose watch failed).
pub(crate) fn termination_message(
    remaining: &[crate::object::ResourceId],
    error: Option<&crate::input::ApiError>,
    timeout: std::time::Duration,
) -> String {
    let names: Vec<String> = remaining.iter().take(10).map(|r| r.display()).collect();
    let more = if remaining.len() > 10 { ", …" } else { "" };
    match error {
        Some(e) if remaining.is_empty() => {
            format!("waiting for deleted resources to terminate failed: {e}")
        }
        Some(e) => format!(
            "{} deleted resource(s) not yet terminated ({}{more}); watching failed: {e}",
            remaining.len(),
            names.join(", ")
        ),
        None => format!(
            "{} deleted resource(s) still terminating after the timeout of {} (deletionPolicy: WaitForTermination): {}{more}; remove what holds them (finalizers) or raise spec.timeout",
            remaining.len(),
            crate::duration::format(timeout),
            names.join(", ")
        ),
    }
}

/// Only the exact string `"true"` counts.
pub(crate) fn orphan_requested(value: Option<&str>) -> bool {
    value == Some("true")
}

/// `OrphanedOnDeletion` event note (`None`: the release has no ServiceAccount at all).
pub(crate) fn orphaned_message(count: usize, service_account: Option<&str>) -> String {
    match service_account {
        Some(sa) => format!(
            "Orphaned {count} managed resources; ServiceAccount \"{sa}\" missing and {ORPHAN_ANNOTATION} annotation set"
        ),
        None => format!(
            "Orphaned {count} managed resources; no ServiceAccount and {ORPHAN_ANNOTATION} annotation set"
        ),
    }
}

/// `DeletionSAMissing` message: what is blocked and the three ways out (`None`: the
/// release names no ServiceAccount and the operator may not use its own identity).
pub fn sa_missing_message(namespace: &str, service_account: Option<&str>, count: usize) -> String {
    let (why, restore) = match service_account {
        Some(sa) => (
            format!("ServiceAccount \"{sa}\" not found in namespace \"{namespace}\""),
            "restore the ServiceAccount",
        ),
        None => (
            "no ServiceAccount (no spec.serviceAccountName, no --default-service-account, \
             and the operator runs without --allow-operator-identity)"
                .to_string(),
            "set spec.serviceAccountName to a ServiceAccount that may delete them",
        ),
    };
    format!(
        "cannot prune {count} managed resources: {why}. \
         To proceed: (1) {restore}; (2) set spec.prune: false and delete again to orphan the resources; \
         (3) set the annotation {ORPHAN_ANNOTATION}: \"true\" to orphan them"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_table() {
        use AllowOperatorIdentity::{Cluster, Off, On};
        for allow in [Off, On, Cluster] {
            assert_eq!(plan(false, 3, Some("sa"), allow), Plan::RemoveFinalizer);
            assert_eq!(plan(true, 0, Some("sa"), allow), Plan::RemoveFinalizer);
            assert_eq!(plan(false, 3, None, allow), Plan::RemoveFinalizer);
            assert_eq!(
                plan(true, 3, Some("sa"), allow),
                Plan::CheckServiceAccount("sa".into())
            );
        }
        assert_eq!(plan(true, 3, None, Off), Plan::ServiceAccountMissing);
        assert_eq!(plan(true, 3, None, On), Plan::Prune);
        assert_eq!(plan(true, 3, None, Cluster), Plan::Prune);
    }

    #[test]
    fn deletion_policy_decides_whether_objects_are_deleted() {
        use DeletionPolicy::*;
        for prune in [false, true] {
            assert_eq!(deletes(None, prune), prune, "MirrorPrune is the default");
            assert_eq!(deletes(Some(MirrorPrune), prune), prune);
            assert!(deletes(Some(Delete), prune));
            assert!(deletes(Some(WaitForTermination), prune));
            assert!(!deletes(Some(Orphan), prune));
        }
    }

    #[test]
    fn only_exact_true_orphans() {
        assert!(orphan_requested(Some("true")));
        for v in [Some("True"), Some("yes"), Some(""), None] {
            assert!(!orphan_requested(v));
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            orphaned_message(2, Some("deployer")),
            "Orphaned 2 managed resources; ServiceAccount \"deployer\" missing and opm.dev/force-delete-orphan annotation set"
        );
        let m = sa_missing_message("demo", Some("deployer"), 2);
        assert!(m.contains("restore the ServiceAccount"));
        assert!(m.contains("spec.prune: false"));
        assert!(m.contains("opm.dev/force-delete-orphan: \"true\""));
        let m = sa_missing_message("demo", None, 2);
        assert!(m.contains("no ServiceAccount"), "{m}");
        assert!(m.contains("set spec.serviceAccountName"), "{m}");
        assert!(m.contains("opm.dev/force-delete-orphan: \"true\""));
        assert_eq!(
            orphaned_message(1, None),
            "Orphaned 1 managed resources; no ServiceAccount and opm.dev/force-delete-orphan annotation set"
        );
    }
}
