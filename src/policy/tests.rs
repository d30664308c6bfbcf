use super::*;
use crate::object::ResourceId;
use serde_json::json;

fn obj(kind: &str, name: &str, manifest: Value) -> DesiredObject {
    DesiredObject {
        id: ResourceId {
            group: if kind == "Deployment" {
                "apps".into()
            } else {
                String::new()
            },
            kind: kind.into(),
            namespace: "demo".into(),
            name: name.into(),
            version: "v1".into(),
        },
        component: "c".into(),
        manifest,
        policy: ObjectPolicy::default(),
    }
}

fn rule(paths: &[&str], target: Option<IgnoreTarget>) -> IgnoreRule {
    IgnoreRule {
        paths: paths.iter().map(|s| s.to_string()).collect(),
        target,
    }
}

#[test]
fn annotations_are_read_and_stripped() {
    let mut objects = vec![
        obj(
            "ConfigMap",
            "a",
            json!({"metadata": {"name": "a", "annotations": {
            SSA_ANNOTATION: "IfNotPresent", FORCE_ANNOTATION: "enabled", "keep": "me"}}}),
        ),
        obj(
            "ConfigMap",
            "b",
            json!({"metadata": {"name": "b", "annotations": {SSA_ANNOTATION: "Merge"}}}),
        ),
        obj("ConfigMap", "c", json!({"metadata": {"name": "c"}})),
    ];
    extract(&mut objects, &[]).unwrap();
    assert_eq!(objects[0].policy.ssa, SsaPolicy::IfNotPresent);
    assert!(objects[0].policy.force);
    assert_eq!(
        objects[0].manifest,
        json!({"metadata": {"name": "a", "annotations": {"keep": "me"}}})
    );
    assert_eq!(objects[1].policy.ssa, SsaPolicy::Merge);
    assert_eq!(objects[1].manifest, json!({"metadata": {"name": "b"}}));
    assert!(objects[2].policy.is_default());
}

#[test]
fn an_unknown_policy_value_stalls_naming_the_object() {
    let mut objects = vec![obj(
        "ConfigMap",
        "a",
        json!({"metadata": {"annotations": {SSA_ANNOTATION: "ifnotpresent"}}}),
    )];
    let f = extract(&mut objects, &[]).unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
    assert!(
        f.message.contains("ConfigMap/demo/a") && f.message.contains("IfNotPresent"),
        "{}",
        f.message
    );
    let mut objects = vec![obj(
        "ConfigMap",
        "a",
        json!({"metadata": {"annotations": {FORCE_ANNOTATION: "yes"}}}),
    )];
    assert!(extract(&mut objects, &[]).is_err());
}

#[test]
fn ignore_rules_attach_to_the_objects_their_target_selects() {
    let mut objects = vec![
        obj(
            "Deployment",
            "web",
            json!({"metadata": {"labels": {"app": "web", "tier": "front"}}}),
        ),
        obj(
            "Deployment",
            "db",
            json!({"metadata": {"labels": {"app": "db"}}}),
        ),
        obj(
            "ConfigMap",
            "web",
            json!({"metadata": {"labels": {"app": "web"}}}),
        ),
    ];
    let rules = vec![
        rule(
            &["/spec/replicas"],
            Some(IgnoreTarget {
                kind: "Deployment".into(),
                label_selector: "app in (web, api),tier".into(),
                ..Default::default()
            }),
        ),
        rule(&["/metadata/annotations/injected"], None),
    ];
    extract(&mut objects, &rules).unwrap();
    assert_eq!(
        objects[0].policy.ignore,
        vec!["/spec/replicas", "/metadata/annotations/injected"]
    );
    assert_eq!(
        objects[1].policy.ignore,
        vec!["/metadata/annotations/injected"]
    );
    assert_eq!(
        objects[2].policy.ignore,
        vec!["/metadata/annotations/injected"]
    );
}

#[test]
fn label_selectors_follow_kubernetes_syntax() {
    let l: BTreeMap<String, String> = [("app", "web"), ("env", "prod")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (sel, want) in [
        ("app=web", true),
        ("app==web", true),
        ("app!=web", false),
        ("app=db", false),
        ("env", true),
        ("!env", false),
        ("!missing", true),
        ("env in (prod,stage)", true),
        ("env notin (prod)", false),
        ("app=web,env=prod", true),
        ("app=web,env=dev", false),
        ("app in prod", false),
        ("", true),
    ] {
        assert_eq!(selector_matches(sel, &l), want, "{sel}");
    }
}

fn deployment_live(replicas_owner: &str) -> Value {
    json!({
        "metadata": {"name": "web", "managedFields": [
            {"manager": "opm-controller", "operation": "Apply",
             "fieldsV1": {"f:spec": {"f:template": {}}}},
            {"manager": replicas_owner, "operation": "Update",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}
        ]},
        "spec": {"replicas": 7, "template": {"x": 1}}
    })
}

#[test]
fn an_ignored_field_another_manager_owns_is_left_out_of_the_apply() {
    let policy = ObjectPolicy {
        ignore: vec!["/spec/replicas".into()],
        ..Default::default()
    };
    let desired =
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "template": {"x": 1}}});
    let live = deployment_live("hpa-controller");
    assert_eq!(
        prepare(&desired, Some(&live), &policy, "opm-controller"),
        json!({"metadata": {"name": "web"}, "spec": {"template": {"x": 1}}})
    );
    // Only we manage it: the live value is kept, so the apply never resets it.
    let ours = json!({
        "metadata": {"name": "web", "managedFields": [
            {"manager": "opm-controller", "operation": "Apply",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}}]},
        "spec": {"replicas": 7, "template": {"x": 1}}
    });
    assert_eq!(
        prepare(&desired, Some(&ours), &policy, "opm-controller"),
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 7, "template": {"x": 1}}})
    );
    // Created: applied as rendered.
    assert_eq!(prepare(&desired, None, &policy, "opm-controller"), desired);
}

#[test]
fn merge_never_takes_a_field_another_manager_owns() {
    let policy = ObjectPolicy {
        ssa: SsaPolicy::Merge,
        ..Default::default()
    };
    let desired =
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "template": {"x": 1}}});
    let live = deployment_live("someone");
    assert_eq!(
        prepare(&desired, Some(&live), &policy, "opm-controller"),
        json!({"metadata": {"name": "web"}, "spec": {"template": {"x": 1}}})
    );
    // Same value: nothing to take, nothing stripped.
    let mut same = desired.clone();
    same["spec"]["replicas"] = json!(7);
    assert_eq!(prepare(&same, Some(&live), &policy, "opm-controller"), same);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn small() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            (0i64..4).prop_map(|n| json!(n)),
            "[ab]".prop_map(Value::String)
        ];
        leaf.prop_recursive(3, 16, 3, |inner| {
            prop::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        })
    }

    proptest! {
        /// An ignored path never changes hands: after `prepare`, what would be applied
        /// there is the live value (we are its only manager), or nothing at all (another
        /// manager owns it); every other path is applied as rendered.
        #[test]
        fn ignored_paths_keep_the_live_state_and_nothing_else_changes(
            desired in small(), live_spec in small(), key in "[a-c]", other in any::<bool>(),
        ) {
            // Rendered and live objects share one schema: `spec` is an object on both.
            prop_assume!(desired.is_object() && live_spec.is_object());
            let pointer = format!("/spec/{key}");
            let owner = if other { "hpa" } else { "opm-controller" };
            let live = json!({
                "metadata": {"managedFields": [{"manager": owner, "operation": "Update",
                    "fieldsV1": {"f:spec": {format!("f:{key}"): {}}}}]},
                "spec": live_spec,
            });
            let manifest = json!({"spec": desired});
            let policy = ObjectPolicy { ignore: vec![pointer.clone()], ..Default::default() };
            let out = prepare(&manifest, Some(&live), &policy, "opm-controller");
            let segs = fields::parse_pointer(&pointer);
            let live_has = fields::get(&live, &segs).is_some();
            if other && live_has {
                prop_assert!(fields::get(&out, &segs).is_none());
            } else {
                prop_assert_eq!(fields::get(&out, &segs), fields::get(&live, &segs));
            }
            let mut a = out.clone();
            let mut b = manifest.clone();
            fields::remove(&mut a, &segs);
            fields::remove(&mut b, &segs);
            prop_assert_eq!(a, b);
        }
    }
}
