//! Server-side apply's field rules: which fields conflict with another manager, and the
//! fields and owners an apply leaves.

use std::collections::BTreeMap;

use serde_json::Value;

use opm_core::input::ApiError;

use super::{FieldPath, Managers, StoredObject};

/// The fields of `desired` whose value differs from `live`'s and that another manager
/// owns, each with one such manager.
pub(super) fn conflicts<'a>(
    live: &StoredObject,
    desired: &'a BTreeMap<FieldPath, Value>,
    manager: &str,
) -> Vec<(String, &'a FieldPath)> {
    desired
        .iter()
        .filter(|(f, v)| live.fields.get(*f) != Some(*v))
        .filter_map(|(f, _)| {
            let others: Vec<&String> = live
                .owners
                .get(f)
                .into_iter()
                .flatten()
                .filter(|m| m.as_str() != manager)
                .collect();
            others.first().map(|m| ((*m).clone(), f))
        })
        .collect()
}

/// The API server's SSA conflict error for `conflicts`.
pub(super) fn conflict_error(conflicts: &[(String, &FieldPath)]) -> ApiError {
    let list: Vec<String> = conflicts
        .iter()
        .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
        .collect();
    ApiError::Conflict {
        message: format!(
            "Apply failed with {} conflict{}: {}",
            conflicts.len(),
            if conflicts.len() == 1 { "" } else { "s" },
            list.join(", ")
        ),
    }
}

/// `live`'s fields and owners once `manager` applied `desired`: fields it stops applying
/// lose it as an owner and go away once unowned; a changed value belongs to the applier
/// alone (forced, or nobody else had it).
pub(super) fn merged(
    live: &StoredObject,
    desired: &BTreeMap<FieldPath, Value>,
    manager: &str,
) -> (BTreeMap<FieldPath, Value>, BTreeMap<FieldPath, Managers>) {
    let mut fields = live.fields.clone();
    let mut owners = live.owners.clone();
    // Fields this manager stops applying lose it as an owner; unowned fields go away.
    for (f, set) in owners.iter_mut() {
        if !desired.contains_key(f) {
            set.remove(manager);
        }
    }
    owners.retain(|f, set| {
        let keep = !set.is_empty();
        if !keep {
            fields.remove(f);
        }
        keep
    });
    for (f, v) in desired {
        let set = owners.entry(f.clone()).or_default();
        if fields.get(f) != Some(v) {
            // A changed value belongs to the applier alone (forced, or nobody else had it).
            set.clear();
        }
        set.insert(manager);
        fields.insert(f.clone(), v.clone());
    }
    (fields, owners)
}
