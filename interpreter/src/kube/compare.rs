//! What the operator compares between a live object and a server-side dry-run: the apply's
//! view ([`normalize`]) and the drift check's ([`managed_view`]). One home for both, so the
//! live cache's digests ([`crate::kube::live_cache`]) and the comparisons cannot disagree.

use serde_json::Value;

/// Labels, annotations and every top-level field but `metadata` and `status`.
pub(crate) use opm_core::fields::managed_view;

/// Equal apart from bookkeeping the server changes on every write attempt: managedFields
/// timestamps. Ownership changes (a new manager entry) still count as a change.
pub(crate) fn same_object(live: &Value, dry: &Value) -> bool {
    normalize(live) == normalize(dry)
}

/// The object without managedFields times (what [`same_object`] compares).
pub(crate) fn normalize(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(mf) = v
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    {
        for entry in mf.iter_mut() {
            if let Some(o) = entry.as_object_mut() {
                o.remove("time");
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn managed_field_times_do_not_count_as_change() {
        let live = json!({"metadata": {"managedFields": [{"manager": "opm-controller", "time": "t1"}]}, "data": {"a": "1"}});
        let dry = json!({"metadata": {"managedFields": [{"manager": "opm-controller", "time": "t2"}]}, "data": {"a": "1"}});
        assert!(same_object(&live, &dry));
        let changed = json!({"metadata": {"managedFields": [{"manager": "opm-controller", "time": "t2"}]}, "data": {"a": "2"}});
        assert!(!same_object(&live, &changed));
        let new_owner = json!({"metadata": {"managedFields": [{"manager": "opm-controller"}, {"manager": "x"}]}, "data": {"a": "1"}});
        assert!(!same_object(&live, &new_owner));
    }
}
