use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::values_from::{ValuesKind, ValuesReference};

fn cm(name: &str) -> ValuesReference {
    ValuesReference {
        kind: ValuesKind::ConfigMap,
        name: name.into(),
        ..Default::default()
    }
}

fn found(v: Value) -> Result<ValuesContent, ApiError> {
    Ok(ValuesContent::Found { value: v })
}

#[test]
fn target_paths_split_on_unescaped_dots() {
    assert_eq!(parse_target_path("a.b.c").unwrap(), ["a", "b", "c"]);
    assert_eq!(
        parse_target_path(r"ingress.annotations.nginx\.io/x").unwrap(),
        ["ingress", "annotations", "nginx.io/x"]
    );
    assert_eq!(parse_target_path(r"a\\.b").unwrap(), [r"a\", "b"]);
    assert_eq!(parse_target_path(r"a\b").unwrap(), [r"a\b"]);
    for bad in ["", "a..b", ".a", "a.", r"a\"] {
        assert!(parse_target_path(bad).is_err(), "{bad:?}");
    }
    assert!(parse_target_path("a.".repeat(40).trim_end_matches('.')).is_err());
    assert!(parse_target_path(&"x".repeat(MAX_TARGET_PATH + 1)).is_err());
}

#[test]
fn later_entries_win_maps_merge_and_values_come_last() {
    let refs = [cm("base"), cm("env")];
    let read = [
        found(json!({"image": "nginx", "db": {"host": "a", "port": 5432}, "list": [1, 2]})),
        found(json!({"db": {"host": "b"}, "list": [3]})),
    ];
    let values = json!({"db": {"port": 6432}, "replicas": 2});
    let got = compose("demo", &refs, &read, Some(&values), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        got,
        json!({"image": "nginx", "db": {"host": "b", "port": 6432}, "list": [3], "replicas": 2})
    );
}

#[test]
fn target_path_sets_one_value_creating_and_replacing_on_the_way() {
    let mut r = cm("pw");
    r.kind = ValuesKind::Secret;
    r.values_key = Some("password".into());
    r.target_path = Some("db.auth.password".into());
    let read = [found(json!("sha256:00"))];
    let values = json!({"db": {"auth": "was-a-string", "host": "h"}});
    let got = compose("demo", &[r.clone()], &read, Some(&values), None)
        .unwrap()
        .unwrap();
    // `values` last: its scalar `auth` replaces the mapping made for the path.
    assert_eq!(got, json!({"db": {"auth": "was-a-string", "host": "h"}}));
    let got = compose("demo", &[r], &read, None, None).unwrap().unwrap();
    assert_eq!(got, json!({"db": {"auth": {"password": "sha256:00"}}}));
}

#[test]
fn missing_stalls_unless_optional_and_names_object_and_key() {
    let mut r = cm("gone");
    let f = compose(
        "demo",
        &[r.clone()],
        &[Ok(ValuesContent::ObjectMissing)],
        None,
        None,
    )
    .unwrap_err();
    assert_eq!(f.reason, Reason::ValuesNotFound);
    assert!(f.message.contains("ConfigMap demo/gone") && f.message.contains("values.yaml"));
    r.values_key = Some("app.yaml".into());
    let f = compose(
        "demo",
        &[r.clone()],
        &[Ok(ValuesContent::KeyMissing)],
        None,
        None,
    )
    .unwrap_err();
    assert_eq!(f.reason, Reason::ValuesNotFound);
    assert!(f.message.contains("\"app.yaml\""), "{}", f.message);
    r.optional = true;
    let v = json!({"a": 1});
    for c in [ValuesContent::ObjectMissing, ValuesContent::KeyMissing] {
        let got = compose("demo", &[r.clone()], &[Ok(c)], Some(&v), None).unwrap();
        assert_eq!(got, Some(v.clone()), "optional: values alone");
    }
    let got = compose(
        "demo",
        &[r],
        &[Ok(ValuesContent::ObjectMissing)],
        None,
        None,
    )
    .unwrap();
    assert_eq!(
        got, None,
        "nothing contributed: same digest as no valuesFrom"
    );
}

#[test]
fn forbidden_is_impersonation_failed_and_other_errors_are_transient() {
    let who = crate::impersonation::impersonation("demo", "deployer");
    let f = compose(
        "demo",
        &[cm("x")],
        &[Err(ApiError::Forbidden {
            message: "no get".into(),
        })],
        None,
        Some(&who),
    )
    .unwrap_err();
    assert_eq!(f.reason, Reason::ImpersonationFailed);
    assert!(f.message.contains("system:serviceaccount:demo:deployer"));
    let f = compose(
        "demo",
        &[cm("x")],
        &[Err(ApiError::Unavailable {
            message: "down".into(),
        })],
        None,
        Some(&who),
    )
    .unwrap_err();
    assert_eq!(f.reason, Reason::ValuesNotFound);
    assert_eq!(f.class, crate::outcome::FailureClass::Transient);
}

#[test]
fn a_root_entry_must_be_a_mapping() {
    let f = compose("demo", &[cm("x")], &[found(json!("plain"))], None, None).unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
    assert!(
        !f.message.contains("plain"),
        "never the value: {}",
        f.message
    );
    let f = compose(
        "demo",
        &[cm("x")],
        &[Ok(ValuesContent::Unparsable {
            message: "line 3 column 1".into(),
        })],
        None,
        None,
    )
    .unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
    assert!(f.message.contains("line 3"));
}

#[test]
fn a_short_read_is_refused_not_misaligned() {
    let f = compose("demo", &[cm("a"), cm("b")], &[found(json!({}))], None, None).unwrap_err();
    assert_eq!(f.class, crate::outcome::FailureClass::Transient);
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_map() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-c]", arb_value(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Every leaf path of `v` with its value (mappings descended, anything else a leaf).
fn leaves(v: &Value, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                prefix.push(k.clone());
                leaves(x, prefix, out);
                prefix.pop();
            }
        }
        other => out.push((prefix.clone(), other.clone())),
    }
}

fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k))
}

proptest! {
    #[test]
    fn merge_keeps_every_leaf_of_the_overlay(a in arb_map(), b in arb_map()) {
        let mut m = a.clone();
        merge(&mut m, b.clone());
        let mut out = Vec::new();
        leaves(&b, &mut Vec::new(), &mut out);
        for (path, leaf) in out {
            if path.is_empty() { continue; }
            let got = at(&m, &path);
            // An empty overlay mapping merges into whatever is there.
            if leaf.as_object().is_some_and(|o| o.is_empty()) {
                prop_assert!(got.is_some());
            } else {
                prop_assert_eq!(got, Some(&leaf), "path {:?}", path);
            }
        }
        // Keys of `a` the overlay does not mention survive untouched.
        if let (Value::Object(am), Value::Object(bm)) = (&a, &b) {
            for (k, v) in am {
                if !bm.contains_key(k) {
                    prop_assert_eq!(m.get(k), Some(v));
                }
            }
        }
    }

    #[test]
    fn merging_the_same_overlay_twice_changes_nothing(a in arb_map(), b in arb_map()) {
        // Not associative (a scalar between two mappings cuts the older one off), so the
        // order of valuesFrom matters, as in Helm; but repeating an entry is harmless.
        let mut once = a;
        merge(&mut once, b.clone());
        let mut twice = once.clone();
        merge(&mut twice, b);
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn target_path_round_trips(keys in prop::collection::vec("[a-z.\\\\/]{1,5}", 1..5)) {
        let escaped: Vec<String> = keys
            .iter()
            .map(|k| k.replace('\\', "\\\\").replace('.', "\\."))
            .collect();
        let parsed = parse_target_path(&escaped.join(".")).unwrap();
        prop_assert_eq!(&parsed, &keys);
        let mut root = json!({});
        merge_at(&mut root, &parsed, json!("v"));
        prop_assert_eq!(at(&root, &parsed), Some(&json!("v")));
    }

    #[test]
    fn compose_never_panics(entries in prop::collection::vec((arb_value(), any::<bool>(), proptest::option::of("[a-c.]{0,6}")), 0..4), values in proptest::option::of(arb_value())) {
        let refs: Vec<ValuesReference> = entries.iter().enumerate().map(|(i, (_, optional, tp))| ValuesReference {
            kind: ValuesKind::ConfigMap, name: format!("c{i}"), values_key: None,
            target_path: tp.clone(), optional: *optional }).collect();
        let read: Vec<_> = entries.into_iter().map(|(v, _, _)| found(v)).collect();
        let _ = compose("demo", &refs, &read, values.as_ref(), None);
    }
}

#[test]
fn the_size_cap_counts_distinct_entries_and_names_objects_and_bytes() {
    let big = json!({"k": "x".repeat(1000)});
    let n = size_of(&big);
    assert_eq!(n, 2 + 1 + 3 + 1000 + 2);
    // Named twice (same object, key and form): counted once.
    let refs = [cm("a"), cm("a"), cm("b")];
    let read = [found(big.clone()), found(big.clone()), found(json!({}))];
    let small = size_of(&json!({}));
    assert!(check_size(&refs, &read, n + small).is_ok());
    let f = check_size(&refs, &read, n).unwrap_err();
    assert_eq!(f.reason, Reason::ValuesNotFound);
    assert_eq!(f.class, crate::outcome::FailureClass::Stalled);
    assert_eq!(
        f.message,
        format!(
            "values from 2 objects are {} bytes; the cap is {n}",
            n + small
        )
    );
    // Parsing stopped at the cap: refused, with at least the cap + 1.
    let read = [
        Ok(ValuesContent::TooLarge { bytes: 900 }),
        Ok(ValuesContent::TooLarge { bytes: 0 }),
        Ok(ValuesContent::TooLarge { bytes: 0 }),
    ];
    let f = check_size(&refs, &read, 800).unwrap_err();
    assert_eq!(
        f.message,
        "values from 2 objects are 900 bytes; the cap is 800"
    );
    // Every value counts at least MIN_VALUE_BYTES: a list of tiny numbers is not cheap.
    assert_eq!(size_of(&json!([0, 0, 0])), 3 * MIN_VALUE_BYTES + 2);
}
