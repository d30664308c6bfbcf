use super::*;
use proptest::prelude::*;
use serde_json::json;

fn p(s: &str) -> Vec<String> {
    parse_pointer(s)
}

#[test]
fn pointers_round_trip_with_escapes() {
    assert_eq!(p("/a~1b/c~0d"), vec!["a/b".to_string(), "c~d".to_string()]);
    assert_eq!(format_pointer(&p("/a~1b/c~0d")), "/a~1b/c~0d");
    assert!(p("").is_empty());
    assert!(p("/").is_empty());
}

#[test]
fn differing_leaves_are_reported_by_path_status_and_bookkeeping_are_not() {
    let live = json!({"metadata": {"resourceVersion": "1", "labels": {"a": "1"}}, "data": {"m": "x", "k": "same"}, "status": {"s": 1}});
    let dry = json!({"metadata": {"resourceVersion": "2", "labels": {"a": "2"}}, "data": {"m": "y", "k": "same"}, "status": {"s": 2}});
    let got: Vec<String> = diff_paths(&managed_view(&live), &managed_view(&dry), &[])
        .iter()
        .map(|s| format_pointer(s))
        .collect();
    assert_eq!(got, vec!["/data/m", "/metadata/labels/a"]);
}

#[test]
fn an_ignored_path_inside_a_one_sided_subtree_is_still_ignored() {
    // The live object gained a whole annotations map; one annotation is ignored.
    let live = json!({"metadata": {"annotations": {"inject": "x", "other": "y"}}});
    let dry = json!({});
    let got = diff_paths(&live, &dry, &["/metadata/annotations/inject".to_string()]);
    assert_eq!(got, vec![p("/metadata/annotations/other")]);
    // A whole injected sidecar container ignored by index.
    let live = json!({"spec": {"containers": [{"name": "app"}, {"name": "sidecar"}]}});
    let dry = json!({"spec": {"containers": [{"name": "app"}]}});
    assert!(diff_paths(&live, &dry, &["/spec/containers/1".to_string()]).is_empty());
    assert_eq!(diff_paths(&live, &dry, &[]), vec![p("/spec/containers/1")]);
}

fn cm_live(manager_fields: Value) -> Value {
    json!({
        "metadata": {"name": "c", "managedFields": manager_fields},
        "data": {"message": "edited", "other": "x"},
        "spec": {"containers": [{"name": "app", "image": "a:1"}]}
    })
}

#[test]
fn the_manager_of_a_field_comes_from_managed_fields() {
    let live = cm_live(json!([
        {"manager": "opm-controller", "operation": "Apply", "fieldsV1": {"f:data": {"f:other": {}}}},
        {"manager": "kubectl-edit", "operation": "Update", "time": "2026-01-01T00:00:00Z",
         "fieldsV1": {"f:data": {"f:message": {}}}},
        {"manager": "image-bot", "operation": "Apply",
         "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}}}
    ]));
    assert_eq!(
        changed_by(&live, &p("/data/message"), "opm-controller"),
        "kubectl-edit"
    );
    assert_eq!(changed_by(&live, &p("/data/other"), "opm-controller"), "");
    assert_eq!(
        changed_by(&live, &p("/spec/containers/0/image"), "opm-controller"),
        "image-bot"
    );
    // Removed by someone: the latest other Update manager is named.
    assert_eq!(
        changed_by(&live, &p("/data/gone"), "opm-controller"),
        "kubectl-edit"
    );
    let dry = json!({"metadata": {"name": "c"}, "data": {"message": "desired", "other": "x"},
        "spec": {"containers": [{"name": "app", "image": "a:1"}]}});
    assert_eq!(
        compare(&live, &dry, &[], "opm-controller"),
        vec![FieldDrift {
            path: "/data/message".into(),
            manager: "kubectl-edit".into()
        }]
    );
    assert!(compare(&live, &dry, &["/data/message".into()], "opm-controller").is_empty());
}

#[test]
fn many_drifted_fields_are_bounded() {
    let live = json!({"data": (0..100).map(|i| (format!("k{i:03}"), json!("a"))).collect::<Map<String, Value>>()});
    let dry = json!({"data": (0..100).map(|i| (format!("k{i:03}"), json!("b"))).collect::<Map<String, Value>>()});
    assert_eq!(compare(&live, &dry, &[], "m").len(), MAX_FIELDS);
}

#[test]
fn remove_and_set_edit_by_pointer() {
    let mut v = json!({"spec": {"replicas": 3, "list": [1, 2, 3]}});
    assert_eq!(remove(&mut v, &p("/spec/replicas")), Some(json!(3)));
    assert_eq!(remove(&mut v, &p("/spec/list/1")), Some(json!(2)));
    assert_eq!(v, json!({"spec": {"list": [1, 3]}}));
    assert!(set(&mut v, &p("/spec/replicas"), json!(5)));
    assert!(set(&mut v, &p("/a/b"), json!(1)));
    assert!(!set(&mut v, &p("/spec/list/9"), json!(1)));
    assert_eq!(
        v,
        json!({"spec": {"replicas": 5, "list": [1, 3]}, "a": {"b": 1}})
    );
}

/// Arbitrary JSON of bounded depth, keys from a small alphabet so sides overlap.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(|n| json!(n)),
        "[a-c]{0,2}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-d]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every pointer into `v` (including the root's children).
fn pointers(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                path.push(k.clone());
                out.push(path.clone());
                pointers(c, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                path.push(i.to_string());
                out.push(path.clone());
                pointers(c, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The same value with every object's keys inserted in reverse order.
fn reordered(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.reverse();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), reordered(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(reordered).collect()),
        other => other.clone(),
    }
}

proptest! {
    #[test]
    fn ignored_paths_are_never_reported(a in json_value(), b in json_value(), pick in any::<prop::sample::Index>()) {
        let mut all = Vec::new();
        pointers(&a, &mut Vec::new(), &mut all);
        pointers(&b, &mut Vec::new(), &mut all);
        prop_assume!(!all.is_empty());
        let ignored = pick.get(&all).clone();
        let reported = diff_paths(&a, &b, &[format_pointer(&ignored)]);
        for r in &reported {
            prop_assert!(!r.starts_with(&ignored), "{r:?} is under ignored {ignored:?}");
        }
    }

    #[test]
    fn reordering_map_keys_is_never_drift(a in json_value()) {
        // Compare through text, as the values would arrive from the server.
        let text = serde_json::to_string(&reordered(&a)).unwrap();
        let b: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(diff_paths(&a, &b, &[]).is_empty());
        prop_assert!(diff_paths(&managed_view(&a), &managed_view(&b), &[]).is_empty());
    }

    #[test]
    fn equal_values_never_differ_and_different_ones_always_do(a in json_value(), b in json_value()) {
        prop_assert_eq!(diff_paths(&a, &a, &[]).is_empty(), true);
        prop_assert_eq!(diff_paths(&a, &b, &[]).is_empty(), a == b);
    }

    #[test]
    fn every_reported_path_really_differs(a in json_value(), b in json_value()) {
        for r in diff_paths(&a, &b, &[]) {
            prop_assert_ne!(get(&a, &r), get(&b, &r), "{:?}", r);
        }
    }
}
