use super::module::substitute_str;
use super::*;

#[test]
fn web_module_substitutes_values_with_types() {
    let m = ModuleDef::web();
    let v = m
        .render(
            "app",
            "demo",
            Some(&json!({"replicas": 3, "message": "hi"})),
        )
        .unwrap();
    assert_eq!(v["kind"], "ModuleRelease");
    assert_eq!(v["metadata"], json!({"name": "app", "namespace": "demo"}));
    let dep = &v["components"]["web"]["deployment"];
    assert_eq!(dep["spec"]["replicas"], json!(3));
    assert_eq!(dep["metadata"]["name"], json!("app"));
    assert_eq!(
        v["components"]["config"]["configmap"]["metadata"]["name"],
        "app-config"
    );
    assert_eq!(
        v["components"]["config"]["configmap"]["data"]["message"],
        "hi"
    );
}

#[test]
fn closed_config_rejects_unknown_and_mistyped_values() {
    let m = ModuleDef::web();
    assert!(matches!(
        m.render("a", "d", Some(&json!({"nope": 1}))),
        Err(RenderError::Evaluation { .. })
    ));
    let e = m
        .render("a", "d", Some(&json!({"replicas": "three"})))
        .unwrap_err();
    assert!(e.to_string().contains("conflicting values"), "{e}");
}

#[test]
fn unknown_module_is_resolution_failure() {
    let c = Catalog::default();
    assert_eq!(
        c.render_module("example.com/x@v0", "v9.9.9", "a", "d", None),
        Err(RenderError::Resolution {
            message: "module example.com/x@v0@v9.9.9: module not found".into()
        })
    );
}

#[test]
fn artifacts_by_digest_and_path() {
    let mut c = Catalog::default();
    let adv = c.add_artifact(ArtifactDef::package(
        "main@sha1:1",
        "./apps/web",
        "web",
        "demo",
        json!({}),
    ));
    assert!(digest::is_sha256(&adv.digest));
    assert!(c.served(&adv.url).is_some());
    assert!(c.render_artifact(&adv.digest, "apps/web/").is_ok());
    assert!(matches!(
        c.render_artifact(&adv.digest, "apps"),
        Err(RenderError::ReleaseFileNotFound { .. })
    ));
    assert!(matches!(
        c.render_artifact(&adv.digest, "nope"),
        Err(RenderError::PathNotFound { .. })
    ));
    let other = c.add_artifact(ArtifactDef::package(
        "main@sha1:2",
        ".",
        "web",
        "demo",
        json!({}),
    ));
    assert_ne!(adv.digest, other.digest);
}

#[test]
fn embedded_placeholders_are_stringified() {
    let v = substitute_str(
        "${release.name}-${values.port}",
        "a",
        "d",
        &json!({"port": 80}),
    );
    assert_eq!(v, json!("a-80"));
    assert_eq!(
        substitute_str("${values}", "a", "d", &json!({"b": 1, "a": 2})),
        json!("{\"a\":2,\"b\":1}")
    );
}
