//! Status commit helpers (SPEC §10): counters, history, and the merge patch that is sent
//! only when something changed.

use serde_json::{Map, Value};

use crate::api::{FailureCounters, HistoryEntry};
use crate::conditions::truncate;
use crate::constants::{HISTORY_CAP, HISTORY_MESSAGE_MAX};

/// Outcome of one activity this attempt: `None` not run, `Some(true)` succeeded (reset),
/// `Some(false)` failed (+1).
pub(crate) type Activity = Option<bool>;

fn bump(counter: &mut i64, activity: Activity) {
    match activity {
        Some(true) => *counter = 0,
        Some(false) => *counter = counter.saturating_add(1),
        None => {}
    }
}

/// Applies the counter rules: `reconcile` by the attempt, the others by their activity.
pub(crate) fn update_counters(
    c: &mut FailureCounters,
    reconcile: Activity,
    apply: Activity,
    prune: Activity,
    drift: Activity,
) {
    bump(&mut c.reconcile, reconcile);
    bump(&mut c.apply, apply);
    bump(&mut c.prune, prune);
    bump(&mut c.drift, drift);
}

/// Prepends `entry` with `sequence` = max + 1 and keeps the newest ten.
pub(crate) fn push_history(history: &mut Vec<HistoryEntry>, mut entry: HistoryEntry) {
    entry.sequence = history
        .iter()
        .map(|h| h.sequence)
        .max()
        .unwrap_or(0)
        .saturating_add(1);
    entry.message = truncate(
        &crate::conditions::without_control(&entry.message),
        HISTORY_MESSAGE_MAX,
    );
    history.insert(0, entry);
    history.truncate(HISTORY_CAP);
}

/// RFC 7386 merge patch turning `old` into `new`: removed keys become `null`, objects
/// recurse, everything else (including arrays) is replaced. `{}` means "no change".
pub(crate) fn merge_patch(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, ov) in o {
                match n.get(k) {
                    None => {
                        patch.insert(k.clone(), Value::Null);
                    }
                    Some(nv) if nv != ov => {
                        let sub = if ov.is_object() && nv.is_object() {
                            merge_patch(ov, nv)
                        } else {
                            nv.clone()
                        };
                        patch.insert(k.clone(), sub);
                    }
                    Some(_) => {}
                }
            }
            for (k, nv) in n {
                if !o.contains_key(k) {
                    patch.insert(k.clone(), nv.clone());
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

/// True when a merge patch changes nothing.
pub(crate) fn is_empty_patch(p: &Value) -> bool {
    p.as_object().is_some_and(Map::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counters_follow_activities() {
        let mut c = FailureCounters {
            reconcile: 2,
            apply: 1,
            prune: 3,
            drift: 1,
        };
        update_counters(&mut c, Some(false), Some(false), None, Some(true));
        assert_eq!(
            c,
            FailureCounters {
                reconcile: 3,
                apply: 2,
                prune: 3,
                drift: 0
            }
        );
    }

    #[test]
    fn history_is_capped_newest_first() {
        let mut h = Vec::new();
        for i in 0..12 {
            push_history(
                &mut h,
                HistoryEntry {
                    action: "reconcile".into(),
                    message: "x".repeat(2000 + i),
                    ..Default::default()
                },
            );
        }
        assert_eq!(h.len(), 10);
        assert_eq!(h[0].sequence, 12);
        assert_eq!(h[9].sequence, 3);
        assert_eq!(h[0].message.len(), 1024);
    }

    #[test]
    fn merge_patch_nulls_removed_and_recurses() {
        let old = json!({"a": 1, "b": {"c": 1, "d": 2}, "e": [1, 2], "gone": true});
        let new = json!({"a": 1, "b": {"c": 1, "d": 3}, "e": [1], "f": "new"});
        assert_eq!(
            merge_patch(&old, &new),
            json!({"b": {"d": 3}, "e": [1], "f": "new", "gone": null})
        );
        assert!(is_empty_patch(&merge_patch(&old, &old)));
    }
}
