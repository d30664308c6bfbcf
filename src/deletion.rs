//! Deletion (SPEC §12): the finalizer 2×2 and the messages of the ServiceAccount-missing paths.
//!
//! | finalizer \ deletionTimestamp | unset | set |
//! |---|---|---|
//! | absent  | add it, continue | done (not ours) |
//! | present | reconcile | deletion path |

use crate::constants::ORPHAN_ANNOTATION;

/// What a deleting release with our finalizer needs first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// `prune: false` or nothing in the inventory: orphan and remove the finalizer.
    RemoveFinalizer,
    /// Prune the whole inventory as this ServiceAccount once it is known to exist.
    CheckServiceAccount(String),
    /// Prune the whole inventory as the operator.
    Prune,
}

pub fn plan(prune: bool, inventory_count: usize, service_account: Option<&str>) -> Plan {
    if !prune || inventory_count == 0 {
        Plan::RemoveFinalizer
    } else if let Some(sa) = service_account {
        Plan::CheckServiceAccount(sa.to_string())
    } else {
        Plan::Prune
    }
}

/// Only the exact string `"true"` counts.
pub fn orphan_requested(value: Option<&str>) -> bool {
    value == Some("true")
}

/// `OrphanedOnDeletion` event note.
pub fn orphaned_message(count: usize, service_account: &str) -> String {
    format!(
        "Orphaned {count} managed resources; ServiceAccount \"{service_account}\" missing and {ORPHAN_ANNOTATION} annotation set"
    )
}

/// `DeletionSAMissing` message: what is blocked and the three ways out.
pub fn sa_missing_message(namespace: &str, service_account: &str, count: usize) -> String {
    format!(
        "cannot prune {count} managed resources: ServiceAccount \"{service_account}\" not found in namespace \"{namespace}\". \
         To proceed: (1) restore the ServiceAccount; (2) set spec.prune: false and delete again to orphan the resources; \
         (3) set the annotation {ORPHAN_ANNOTATION}: \"true\" to orphan them"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_table() {
        assert_eq!(plan(false, 3, Some("sa")), Plan::RemoveFinalizer);
        assert_eq!(plan(true, 0, Some("sa")), Plan::RemoveFinalizer);
        assert_eq!(
            plan(true, 3, Some("sa")),
            Plan::CheckServiceAccount("sa".into())
        );
        assert_eq!(plan(true, 3, None), Plan::Prune);
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
            orphaned_message(2, "deployer"),
            "Orphaned 2 managed resources; ServiceAccount \"deployer\" missing and opm.dev/force-delete-orphan annotation set"
        );
        let m = sa_missing_message("demo", "deployer", 2);
        assert!(m.contains("restore the ServiceAccount"));
        assert!(m.contains("spec.prune: false"));
        assert!(m.contains("opm.dev/force-delete-orphan: \"true\""));
    }
}
