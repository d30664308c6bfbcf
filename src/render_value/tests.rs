use serde_json::json;

use super::*;

fn release() -> ReleaseIdentity {
    ReleaseIdentity {
        kind: Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "web".into(),
        uuid: release_uuid(Kind::ModuleRelease, "demo", "web"),
    }
}

fn exported(components: Value) -> Value {
    json!({"kind": "ModuleRelease", "metadata": {"name": "web", "namespace": "demo"}, "components": components})
}

#[test]
fn uuid_namespace_is_the_v5_of_the_operator_domain() {
    assert_eq!(
        UUID_NAMESPACE,
        uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, b"releases.opmodel.dev")
    );
}

#[test]
fn uuid_is_stable_v5() {
    let u = release_uuid(Kind::ModuleRelease, "demo", "web");
    assert_eq!(u, release_uuid(Kind::ModuleRelease, "demo", "web"));
    assert_ne!(u, release_uuid(Kind::Release, "demo", "web"));
    assert_eq!(uuid::Uuid::parse_str(&u).unwrap().get_version_num(), 5);
}

#[test]
fn flattens_stamps_and_defaults_namespace() {
    let v = exported(json!({
        "web": {
            "svc": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"app": "web"}}},
            "deploy": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
        },
        "ns": {"n": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra", "namespace": "x"}}}
    }));
    let objs = build(&v, &[], &release()).unwrap();
    let ids: Vec<String> = objs.iter().map(|o| o.id.display()).collect();
    assert_eq!(
        ids,
        ["Namespace/extra", "Service/demo/web", "Deployment/demo/web"]
    );
    let svc = &objs[1];
    assert_eq!(svc.component, "web");
    assert_eq!(svc.id.version, "v1");
    let labels = &svc.manifest["metadata"]["labels"];
    assert_eq!(labels["app"], "web");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
    assert_eq!(labels["module-release.opmodel.dev/name"], "web");
    assert_eq!(labels["module-release.opmodel.dev/namespace"], "demo");
    assert_eq!(
        labels["module-release.opmodel.dev/uuid"],
        release().uuid.as_str()
    );
    assert_eq!(labels["component.opmodel.dev/name"], "web");
    assert_eq!(svc.manifest["metadata"]["namespace"], "demo");
    assert!(objs[0].manifest["metadata"].get("namespace").is_none());
}

#[test]
fn reported_cluster_scoped_kinds_get_no_namespace() {
    let v = exported(
        json!({"c": {"w": {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}}}),
    );
    let gk = GroupKind {
        group: "example.com".into(),
        kind: "Widget".into(),
    };
    let objs = build(&v, &[gk], &release()).unwrap();
    assert_eq!(objs[0].id.namespace, "");
    let objs = build(&v, &[], &release()).unwrap();
    assert_eq!(objs[0].id.namespace, "demo");
}

#[test]
fn rejects_malformed_objects_naming_component_and_key() {
    let cases = [
        (
            json!({"c": {"k": {"kind": "Service", "metadata": {"name": "a"}}}}),
            "component \"c\" key \"k\": missing apiVersion",
        ),
        (
            json!({"c": {"k": {"apiVersion": "v1", "metadata": {"name": "a"}}}}),
            "component \"c\" key \"k\": missing kind",
        ),
        (
            json!({"c": {"k": {"apiVersion": "v1", "kind": "Service", "metadata": {}}}}),
            "component \"c\" key \"k\": missing metadata.name",
        ),
        (
            json!({"c": {"k": {"apiVersion": "v1", "kind": "Service"}}}),
            "component \"c\" key \"k\": missing metadata.name",
        ),
        (
            json!({"c": {"k": 3}}),
            "component \"c\" key \"k\": object is not a JSON object",
        ),
        (json!({"c": []}), "component \"c\" is not an object"),
    ];
    for (components, msg) in cases {
        let err = build(&exported(components), &[], &release()).unwrap_err();
        assert_eq!(err.reason, Reason::RenderFailed);
        assert_eq!(err.message, msg);
    }
}

#[test]
fn conflicting_operator_label_is_render_failed() {
    let v = exported(json!({"c": {"k": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "helm"}}}}}));
    let err = build(&v, &[], &release()).unwrap_err();
    assert_eq!(err.reason, Reason::RenderFailed);
    assert!(
        err.message.contains("app.kubernetes.io/managed-by"),
        "{}",
        err.message
    );
    // The same value is fine.
    let v = exported(json!({"c": {"k": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "a", "labels": {"component.opmodel.dev/name": "c"}}}}}));
    assert!(build(&v, &[], &release()).is_ok());
}

#[test]
fn duplicates_and_wrong_kind_are_rejected() {
    let v = exported(json!({
        "a": {"k": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}},
        "b": {"k": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "demo"}}}
    }));
    assert!(
        build(&v, &[], &release())
            .unwrap_err()
            .message
            .starts_with("duplicate object ConfigMap/demo/x")
    );
    let err = build(
        &json!({"kind": "Bundle", "components": {}}),
        &[],
        &release(),
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::UnsupportedKind);
    let err = build(&json!({"components": {}}), &[], &release()).unwrap_err();
    assert_eq!(err.reason, Reason::UnsupportedKind);
    assert_eq!(
        build(&exported(json!({})), &[], &release()).unwrap(),
        vec![]
    );
}

#[test]
fn stages_follow_spec_order() {
    let mk = |api: &str, kind: &str, name: &str| json!({"apiVersion": api, "kind": kind, "metadata": {"name": name}});
    let v = exported(json!({"c": {
        "a": mk("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "hook"),
        "b": mk("apps/v1", "Deployment", "web"),
        "c": mk("v1", "Service", "web"),
        "d": mk("v1", "ConfigMap", "cfg"),
        "e": mk("v1", "ServiceAccount", "sa"),
        "f": mk("rbac.authorization.k8s.io/v1", "RoleBinding", "rb"),
        "g": mk("storage.k8s.io/v1", "StorageClass", "fast"),
        "h": mk("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com"),
        "i": mk("v1", "Namespace", "extra"),
        "j": mk("v1", "PersistentVolumeClaim", "data")
    }}));
    let objs = build(&v, &[], &release()).unwrap();
    let st = stages(&objs);
    let names: Vec<(u8, Vec<&str>)> = st
        .iter()
        .map(|s| {
            (
                s.stage,
                s.objects.iter().map(|o| o.id.kind.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (1, vec!["Namespace", "CustomResourceDefinition"]),
            (2, vec!["StorageClass"]),
            (
                3,
                vec![
                    "ServiceAccount",
                    "RoleBinding",
                    "ConfigMap",
                    "Service",
                    "PersistentVolumeClaim",
                    "Deployment",
                    "ValidatingWebhookConfiguration"
                ]
            ),
        ]
    );
}

fn configmaps(n: usize) -> Value {
    let objs: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            (
                format!("cm{i}"),
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm{i}")}}),
            )
        })
        .collect();
    exported(json!({ "a": objs }))
}

#[test]
fn object_cap_names_the_count_and_the_cap() {
    let v = configmaps(6);
    assert_eq!(object_count(&v), 6);
    assert!(check_caps(&v, 0, 6, 100).is_ok(), "at the cap is fine");
    let f = check_caps(&v, 0, 5, 100).unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
    assert_eq!(f.class, crate::outcome::FailureClass::Stalled);
    assert!(
        f.message.starts_with("rendered 6 objects; the cap is 5"),
        "{}",
        f.message
    );
}

#[test]
fn byte_cap_names_the_size_and_the_cap() {
    let v = configmaps(1);
    assert!(check_caps(&v, 100, 10, 100).is_ok());
    let f = check_caps(&v, 33 * 1024 * 1024, 10, 32 * 1024 * 1024).unwrap_err();
    assert_eq!(f.reason, Reason::RenderFailed);
    assert!(f.message.contains("34603008 bytes"), "{}", f.message);
    assert!(
        f.message.contains("the cap is 33554432 (32.0 MiB"),
        "{}",
        f.message
    );
    let e = crate::input::RenderError::TooLarge {
        bytes_at_least: 33554433,
        cap: 33554432,
    };
    let f = crate::exits::render_failure(&e);
    assert_eq!(
        (f.reason, f.class),
        (Reason::RenderFailed, crate::outcome::FailureClass::Stalled)
    );
    assert!(
        f.message.contains("more than 33554433 bytes"),
        "{}",
        f.message
    );
    let f = crate::exits::render_failure(&crate::input::RenderError::OutOfMemory {
        limit_bytes: 1 << 30,
    });
    assert_eq!(f.class, crate::outcome::FailureClass::Stalled);
    assert!(
        f.message.contains("1.0 GiB (--render-memory-limit)"),
        "{}",
        f.message
    );
}

#[test]
fn owned_build_equals_borrowed_build() {
    let v = configmaps(3);
    let a = build(&v, &[], &release()).unwrap();
    let b = build_owned(v, &[], &release()).unwrap();
    assert_eq!(a, b);
}

proptest::proptest! {
    /// The object cap refuses exactly the renders above it, whatever the sizes.
    #[test]
    fn caps_refuse_exactly_what_is_over(n in 0usize..40, cap in 0u64..40, bytes in 0u64..1000, max in 0u64..1000) {
        let v = configmaps(n);
        let r = check_caps(&v, bytes, cap, max);
        proptest::prop_assert_eq!(r.is_err(), n as u64 > cap || bytes > max);
    }
}
