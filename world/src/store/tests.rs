use serde_json::json;

use super::*;

fn cm(name: &str) -> ResourceId {
    ResourceId {
        kind: "ConfigMap".into(),
        namespace: "demo".into(),
        name: name.into(),
        version: "v1".into(),
        ..Default::default()
    }
}

fn manifest(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "demo", "labels": {"app": "web"}},
        "data": data})
}

fn store() -> Store {
    let mut s = Store::new(7);
    s.ensure_namespace("demo");
    s
}

#[test]
fn create_then_unchanged_then_updated() {
    let mut s = store();
    let m = manifest(json!({"a": "1"}));
    assert_eq!(
        s.apply(&cm("c"), &m, "opm", false, false),
        Ok(ApplyAction::Created)
    );
    let uid = s.get(&cm("c")).unwrap().uid.clone();
    assert_eq!(
        s.apply(&cm("c"), &m, "opm", false, false),
        Ok(ApplyAction::Unchanged)
    );
    let m2 = manifest(json!({"a": "2"}));
    assert_eq!(
        s.apply(&cm("c"), &m2, "opm", false, true),
        Ok(ApplyAction::Updated)
    );
    assert_eq!(
        s.get(&cm("c")).unwrap().fields[&FieldPath::new("data", "a")],
        json!("1")
    );
    assert_eq!(
        s.apply(&cm("c"), &m2, "opm", false, false),
        Ok(ApplyAction::Updated)
    );
    let live = s.get(&cm("c")).unwrap();
    assert_eq!(live.uid, uid);
    assert_eq!(live.manifest()["data"]["a"], json!("2"));
    assert_eq!(live.label("app"), Some("web"));
}

#[test]
fn dry_run_create_writes_nothing() {
    let mut s = store();
    let m = manifest(json!({"a": "1"}));
    assert_eq!(
        s.apply(&cm("c"), &m, "opm", false, true),
        Ok(ApplyAction::Created)
    );
    assert!(s.get(&cm("c")).is_none());
}

#[test]
fn missing_namespace_is_not_found() {
    let mut s = Store::new(1);
    let err = s.apply(&cm("c"), &manifest(json!({})), "opm", false, false);
    assert!(matches!(err, Err(ApiError::NotFound { .. })));
}

#[test]
fn conflict_unless_forced_and_same_value_is_shared() {
    let mut s = store();
    s.apply(&cm("c"), &manifest(json!({"a": "1"})), "opm", false, false)
        .unwrap();
    s.write_field(
        &cm("c"),
        "kubectl-edit",
        FieldPath::new("data", "a"),
        json!("9"),
    );
    let err = s
        .apply(&cm("c"), &manifest(json!({"a": "1"})), "opm", false, false)
        .unwrap_err();
    assert_eq!(
        err,
        ApiError::Conflict {
            message: "Apply failed with 1 conflict: conflict with \"kubectl-edit\": .data.a".into()
        }
    );
    // Applying the value the other manager set shares ownership: no conflict.
    assert_eq!(
        s.apply(&cm("c"), &manifest(json!({"a": "9"})), "opm", false, false),
        Ok(ApplyAction::Updated)
    );
    let owners = &s.get(&cm("c")).unwrap().owners[&FieldPath::new("data", "a")];
    assert_eq!(owners.len(), 2);
    // Forcing takes the field.
    s.write_field(
        &cm("c"),
        "kubectl-edit",
        FieldPath::new("data", "a"),
        json!("7"),
    );
    assert_eq!(
        s.apply(&cm("c"), &manifest(json!({"a": "1"})), "opm", true, false),
        Ok(ApplyAction::Updated)
    );
    let live = s.get(&cm("c")).unwrap();
    assert_eq!(
        live.owners[&FieldPath::new("data", "a")],
        Managers::one("opm")
    );
}

#[test]
fn fields_no_longer_applied_are_removed() {
    let mut s = store();
    s.apply(
        &cm("c"),
        &manifest(json!({"a": "1", "b": "2"})),
        "opm",
        false,
        false,
    )
    .unwrap();
    assert!(!s.drifted(&cm("c"), &manifest(json!({"a": "1", "b": "2"})), "opm"));
    assert!(s.drifted(&cm("c"), &manifest(json!({"a": "1"})), "opm"));
    s.apply(&cm("c"), &manifest(json!({"a": "1"})), "opm", false, false)
        .unwrap();
    assert!(
        !s.get(&cm("c"))
            .unwrap()
            .fields
            .contains_key(&FieldPath::new("data", "b"))
    );
}

#[test]
fn drift_sees_foreign_edits_and_deletion() {
    let mut s = store();
    let m = manifest(json!({"a": "1"}));
    s.apply(&cm("c"), &m, "opm", false, false).unwrap();
    assert!(!s.drifted(&cm("c"), &m, "opm"));
    s.write_field(
        &cm("c"),
        "kubectl-edit",
        FieldPath::new("data", "a"),
        json!("2"),
    );
    assert!(s.drifted(&cm("c"), &m, "opm"));
    // A field nobody asked us for is not drift.
    s.apply(&cm("c"), &m, "opm", true, false).unwrap();
    s.write_field(&cm("c"), "hpa", FieldPath::new("data", "extra"), json!("x"));
    assert!(!s.drifted(&cm("c"), &m, "opm"));
    let uid = s.get(&cm("c")).unwrap().uid.clone();
    s.delete(&cm("c"), Some(&uid)).unwrap();
    assert!(s.drifted(&cm("c"), &m, "opm"));
}

#[test]
fn delete_checks_uid() {
    let mut s = store();
    s.apply(&cm("c"), &manifest(json!({})), "opm", false, false)
        .unwrap();
    assert!(matches!(
        s.delete(&cm("c"), Some("other")),
        Err(ApiError::Conflict { .. })
    ));
    let uid = s.get(&cm("c")).unwrap().uid.clone();
    assert_eq!(s.delete(&cm("c"), Some(&uid)), Ok(()));
    assert!(matches!(
        s.delete(&cm("c"), None),
        Err(ApiError::NotFound { .. })
    ));
}

#[test]
fn immutable_field_change_is_invalid() {
    let mut s = store();
    let id = ResourceId {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "demo".into(),
        name: "web".into(),
        version: "v1".into(),
    };
    let dep = |sel: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"app": sel}, "replicas": 1}})
    };
    s.apply(&id, &dep("a"), "opm", false, false).unwrap();
    assert!(matches!(
        s.apply(&id, &dep("b"), "opm", true, false),
        Err(ApiError::Invalid { .. })
    ));
    assert_eq!(
        s.get(&id).unwrap().fields[&FieldPath::new("spec", "selector")],
        json!({"app": "a"})
    );
}

#[test]
fn scope() {
    let s = store();
    assert!(s.is_cluster_scoped("", "Namespace"));
    assert!(!s.is_cluster_scoped("", "ConfigMap"));
    assert!(s.namespace_exists("demo"));
}

#[test]
fn drift_compares_every_field_both_ways() {
    let mut s = store();
    let m = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "demo", "labels": {"a": "1", "b": "2"}},
        "data": {"x": "1", "y": "2"}});
    s.apply(&cm("c"), &m, "opm", false, false).unwrap();
    assert!(!s.drifted(&cm("c"), &m, "opm"));
    // A field asked for that the live object lacks (first, middle, last in order).
    for (path, value) in [("/metadata/labels/0", "v"), ("/data/xx", "v"), ("/zz", "v")] {
        let mut more = m.clone();
        let (parent, key) = path.rsplit_once('/').unwrap();
        more.pointer_mut(if parent.is_empty() { "" } else { parent })
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert(key.into(), json!(value));
        assert!(s.drifted(&cm("c"), &more, "opm"), "{path}");
    }
    // A field we manage that is no longer asked for.
    let mut fewer = m.clone();
    fewer["data"].as_object_mut().unwrap().remove("y");
    assert!(s.drifted(&cm("c"), &fewer, "opm"));
    // Someone else's field we do not ask for is not drift; nor is another manager's view.
    s.write_field(&cm("c"), "hpa", FieldPath::new("data", "z"), json!("9"));
    assert!(!s.drifted(&cm("c"), &m, "opm"));
    assert!(s.drifted(&cm("c"), &fewer, "opm"));
    assert!(!s.drifted(&cm("c"), &fewer, "hpa-only-owns-z"));
}

#[test]
fn objects_come_out_in_identity_order() {
    let mut s = store();
    for name in ["b", "a", "c"] {
        s.apply(&cm(name), &manifest(json!({})), "opm", false, false)
            .unwrap();
    }
    let names: Vec<(&str, &str)> = s
        .objects()
        .map(|o| (o.id.kind.as_str(), o.id.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("ConfigMap", "a"),
            ("ConfigMap", "b"),
            ("ConfigMap", "c"),
            ("Namespace", "demo")
        ]
    );
}

#[test]
fn managers_stay_sorted_and_serialise_as_a_set() {
    let mut m = Managers::one("opm");
    m.insert("hpa");
    m.insert("opm");
    m.insert("zeta");
    assert_eq!(m.iter().collect::<Vec<_>>(), ["hpa", "opm", "zeta"]);
    assert_eq!(m.len(), 3);
    let as_set: BTreeSet<String> = ["hpa", "opm", "zeta"].map(String::from).into();
    assert_eq!(
        serde_json::to_value(&m).unwrap(),
        serde_json::to_value(&as_set).unwrap()
    );
    let back: Managers = serde_json::from_value(json!(["zeta", "hpa", "hpa"])).unwrap();
    assert_eq!(back.iter().collect::<Vec<_>>(), ["hpa", "zeta"]);
    m.remove("opm");
    assert!(!m.contains("opm") && m.contains("hpa"));
    m.clear();
    assert!(m.is_empty());
}
