//! The CUE contract, pinned with the real `cue` binary and a real `cue mod registry`.

use std::path::Path;

use opm_testenv::registry::{EXAMPLE_VERSIONS, WEB_MODULE};
use opm_testenv::{CueRegistry, Error, cue, tools};
use serde_json::{Value, json};

/// The package the operator synthesises for a ModuleRelease (DESIGN §3).
fn write_module_release(dir: &Path, version: &str, values: &Value, name: &str, ns: &str) {
    std::fs::create_dir_all(dir.join("cue.mod")).unwrap();
    std::fs::write(
        dir.join("cue.mod/module.cue"),
        format!(
            "module: \"opm.internal/release@v0\"\nlanguage: version: \"v0.17.0\"\n\
             deps: {{\"{WEB_MODULE}\": {{v: \"{version}\"}}}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("release.cue"),
        format!(
            "package release\n\nimport m \"{WEB_MODULE}:web\"\n\n\
             _m: m & {{\n\t#config: m.#config & {values}\n\t#release: {{name: \"{name}\", namespace: \"{ns}\"}}\n}}\n\
             kind: \"ModuleRelease\"\nmetadata: {{name: \"{name}\", namespace: \"{ns}\"}}\n\
             components: _m.components\n"
        ),
    )
    .unwrap();
}

fn stderr_of(result: Result<Value, Error>) -> String {
    match result {
        Err(Error::Command { stderr, .. }) => stderr,
        other => panic!("expected cue to fail, got {other:?}"),
    }
}

#[tokio::test]
async fn example_release_package_exports() {
    let out = cue::export(&tools::examples_dir().join("releases/web"), &[])
        .await
        .unwrap();
    assert_eq!(out["kind"], "ModuleRelease");
    assert_eq!(
        out["metadata"],
        json!({"name": "hello", "namespace": "default"})
    );
    let components = out["components"].as_object().unwrap();
    let mut names: Vec<_> = components.keys().cloned().collect();
    names.sort();
    assert_eq!(names, ["config", "web"]);
    assert_eq!(out["components"]["web"]["deployment"]["kind"], "Deployment");
    assert_eq!(
        out["components"]["web"]["deployment"]["spec"]["replicas"],
        2
    );
    assert_eq!(
        out["components"]["config"]["configmap"]["metadata"]["name"],
        "hello-config"
    );
    // Hidden fields stay out of the exported shape.
    assert!(out.get("_values").is_none());
}

#[tokio::test]
async fn published_module_resolves_through_cue_registry() {
    let registry = CueRegistry::global().await;
    assert!(registry.registry().starts_with("127.0.0.1:"));
    assert!(registry.registry().ends_with("+insecure"));
    for version in EXAMPLE_VERSIONS {
        let dir = tempfile::tempdir().unwrap();
        write_module_release(
            dir.path(),
            version,
            &json!({"replicas": 3, "message": "hi"}),
            "demo",
            "team-a",
        );
        let out = cue::export(dir.path(), &registry.cue_env()).await.unwrap();
        assert_eq!(out["kind"], "ModuleRelease");
        assert_eq!(out["metadata"]["name"], "demo");
        let deployment = &out["components"]["web"]["deployment"];
        assert_eq!(deployment["metadata"]["name"], "demo");
        assert_eq!(deployment["metadata"]["namespace"], "team-a");
        assert_eq!(deployment["spec"]["replicas"], 3);
        // defaults from #config
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        let cm = &out["components"]["config"]["configmap"];
        assert_eq!(cm["metadata"]["name"], "demo-config");
        assert_eq!(cm["data"]["message"], "hi");
        assert_eq!(cm["data"]["moduleVersion"], version);
        assert_eq!(
            out["components"]["identity"]["serviceaccount"]["kind"],
            "ServiceAccount"
        );
        assert_eq!(out["components"]["web"]["service"]["kind"], "Service");
    }
}

#[tokio::test]
async fn cue_failures_print_the_messages_the_renderer_classifies() {
    let registry = CueRegistry::global().await;
    let env = registry.cue_env();
    let values = json!({});

    let dir = tempfile::tempdir().unwrap();
    write_module_release(dir.path(), "v0.9.9", &values, "r", "ns");
    let err = stderr_of(cue::export(dir.path(), &env).await);
    assert!(
        err.contains("module example.com/modules/web@v0.9.9: module not found"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    write_module_release(dir.path(), "v1.0.0", &values, "r", "ns");
    let err = stderr_of(cue::export(dir.path(), &env).await);
    assert!(err.contains("mismatched major version suffix"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    write_module_release(
        dir.path(),
        "v0.2.1",
        &json!({"replicas": "three"}),
        "r",
        "ns",
    );
    let err = stderr_of(cue::export(dir.path(), &env).await);
    assert!(err.contains("conflicting values"), "{err}");
    assert!(err.contains("#config.replicas"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    write_module_release(dir.path(), "v0.2.1", &json!({"bogus": 1}), "r", "ns");
    let err = stderr_of(cue::export(dir.path(), &env).await);
    assert!(err.contains("#config.bogus: field not allowed"), "{err}");

    // Nothing listens on the port: a transient failure.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let cache = tempfile::tempdir().unwrap();
    let unreachable = [
        ("CUE_REGISTRY", format!("127.0.0.1:{port}+insecure")),
        ("CUE_CACHE_DIR", cache.path().to_string_lossy().into_owned()),
    ];
    let dir = tempfile::tempdir().unwrap();
    write_module_release(dir.path(), "v0.2.1", &values, "r", "ns");
    let err = stderr_of(cue::export(dir.path(), &unreachable).await);
    assert!(err.contains("cannot do HTTP request"), "{err}");
}

#[tokio::test]
async fn a_module_published_by_a_test_is_resolvable() {
    let registry = CueRegistry::global().await;
    registry
        .publish_versioned(&tools::examples_dir().join("modules/web"), "v0.3.0")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_module_release(dir.path(), "v0.3.0", &json!({}), "late", "ns");
    let out = cue::export(dir.path(), &registry.cue_env()).await.unwrap();
    assert_eq!(
        out["components"]["config"]["configmap"]["data"]["moduleVersion"],
        "v0.3.0"
    );
    assert_eq!(
        out["components"]["web"]["deployment"]["spec"]["replicas"],
        1
    );
}
