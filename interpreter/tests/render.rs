//! The CUE renderer with the real `cue` binary and a real `cue mod registry` (DESIGN §3).
//! Each classified case is pinned here so a `cue` upgrade that changes a message fails loudly.

mod support;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use opm_core::outcome::FailureClass;
use opm_operator::cue::module_ref::{ModuleRef, ReleaseIdentity};
use opm_operator::cue::render::{RenderConfig, RenderError, Renderer};
use opm_operator::effects::local::Verdict;
use serde_json::json;
use support::cue::{MODULE_PATH, Registry, cue_bin, write_tree};

fn renderer(registry: Option<&Registry>, cache: &Path) -> Renderer {
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.registry = registry.map(Registry::cue_registry);
    cfg.cue_cache_dir = Some(cache.to_path_buf());
    cfg.timeout = Duration::from_secs(30);
    Renderer::new(cfg)
}

fn identity() -> ReleaseIdentity {
    ReleaseIdentity {
        name: "demo".into(),
        namespace: "team-a".into(),
    }
}

fn module(version: &str) -> ModuleRef {
    ModuleRef::new(MODULE_PATH, version, None).unwrap()
}

/// A release package inside an "artifact": module root at the top, package in `apps/web`.
fn release_package(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_tree(
        dir.path(),
        &[
            (
                "cue.mod/module.cue",
                "module: \"test.example/releases@v0\"\nlanguage: version: \"v0.17.0\"\n",
            ),
            ("apps/web/release.cue", body),
        ],
    );
    dir
}

const RELEASE_OK: &str = r#"package release

kind: "ModuleRelease"
metadata: {name: "site", namespace: "web"}
components: {
	app: {
		cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "site", data: greeting: "hi \(metadata.name)"}
		sa: {apiVersion: "v1", kind: "ServiceAccount", metadata: name: "site"}
	}
}
"#;

#[tokio::test]
async fn a_release_package_renders_from_its_directory() {
    let pkg = release_package(RELEASE_OK);
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(None, cache.path());
    let out = r
        .render_package(&pkg.path().join("apps/web"))
        .await
        .expect("render");
    assert_eq!(
        out.exported["metadata"],
        json!({"name": "site", "namespace": "web"})
    );
    let objs: Vec<String> = out
        .objects()
        .map(|(c, k, v)| format!("{c}/{k}/{}", v["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(objs, ["app/cm/ConfigMap", "app/sa/ServiceAccount"]);
    assert_eq!(
        out.exported["components"]["app"]["cm"]["data"]["greeting"],
        "hi site"
    );
    assert_eq!(r.cue_version().await.unwrap(), "v0.17.1");
}

#[tokio::test]
async fn wrong_or_missing_kind_is_unsupported() {
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(None, cache.path());
    let pkg = release_package(&RELEASE_OK.replace("kind: \"ModuleRelease\"", "kind: \"Bundle\""));
    let err = r
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        RenderError::UnsupportedKind {
            kind: Some("Bundle".into())
        }
    );
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Stalled, opm_core::Reason::UnsupportedKind)
    );
    let pkg = release_package(&RELEASE_OK.replace("kind: \"ModuleRelease\"\n", ""));
    let err = r
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    assert_eq!(err, RenderError::UnsupportedKind { kind: None });
}

#[tokio::test]
async fn an_evaluation_error_names_the_field() {
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(None, cache.path());
    let pkg = release_package(&format!(
        "{RELEASE_OK}\ncomponents: app: cm: data: greeting: 42\n"
    ));
    let err = r
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    let RenderError::Evaluation { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("components.app.cm.data.greeting"),
        "{message}"
    );
    assert!(message.contains("conflicting values"), "{message}");
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Stalled, opm_core::Reason::RenderFailed)
    );
}

#[tokio::test]
async fn a_module_release_renders_through_the_registry() {
    let reg = Registry::start();
    reg.publish("v0.2.0");
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(Some(&reg), cache.path());
    let out = r
        .render_module(&module("v0.2.1"), &json!({"replicas": 3}), &identity())
        .await
        .expect("render");
    assert_eq!(out.exported["kind"], "ModuleRelease");
    assert_eq!(
        out.exported["metadata"],
        json!({"name": "demo", "namespace": "team-a"})
    );
    let deploy = &out.exported["components"]["web"]["deployment"];
    assert_eq!(deploy["spec"]["replicas"], 3);
    assert_eq!(
        deploy["metadata"],
        json!({"name": "demo", "namespace": "team-a"})
    );
    let cm = &out.exported["components"]["config"]["cm"];
    assert_eq!(cm["metadata"]["name"], "demo-config");
    assert_eq!(
        cm["data"]["message"], "hello from v0.2.1",
        "the pinned version is used"
    );
    // Null values mean all defaults; the other version is resolvable too.
    let out = r
        .render_module(&module("v0.2.0"), &serde_json::Value::Null, &identity())
        .await
        .unwrap();
    assert_eq!(
        out.exported["components"]["web"]["deployment"]["spec"]["replicas"],
        1
    );
    assert_eq!(
        out.exported["components"]["config"]["cm"]["data"]["message"],
        "hello from v0.2.0"
    );
}

#[tokio::test]
async fn an_unknown_version_is_a_resolution_failure() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let err = renderer(Some(&reg), cache.path())
        .render_module(&module("v0.9.9"), &json!({}), &identity())
        .await
        .unwrap_err();
    let RenderError::Resolution { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("module not found"), "{message}");
    assert!(message.contains("v0.9.9"), "{message}");
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Stalled, opm_core::Reason::ResolutionFailed)
    );
}

#[tokio::test]
async fn a_major_version_mismatch_is_a_resolution_failure_before_and_inside_cue() {
    let err = ModuleRef::new(MODULE_PATH, "v1.2.1", None).unwrap_err();
    assert_eq!(err.reason(), "ResolutionFailed");
    // The same mistake written by hand in a release package is caught by cue itself.
    let pkg = tempfile::tempdir().unwrap();
    write_tree(
        pkg.path(),
        &[
            (
                "cue.mod/module.cue",
                "module: \"x.example/r@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: \"test.example/modules/web@v0\": v: \"v1.2.1\"\n",
            ),
            ("release.cue", RELEASE_OK),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let err = renderer(None, cache.path())
        .render_package(pkg.path())
        .await
        .unwrap_err();
    let RenderError::Resolution { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("mismatched major version"), "{message}");
}

#[tokio::test]
async fn an_unreachable_registry_is_transient() {
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.registry = Some(format!("127.0.0.1:{}+insecure", support::closed_port()));
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    let err = Renderer::new(cfg)
        .render_module(&module("v0.2.1"), &json!({}), &identity())
        .await
        .unwrap_err();
    let RenderError::RegistryUnreachable { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("cannot do HTTP request"), "{message}");
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Transient, opm_core::Reason::RenderFailed)
    );
}

/// With credentials, a refusal by the registry stalls as `ResolutionFailed`; a module path
/// that merely holds a refusal word (a tenant's choice) must not read as one when the
/// registry is only unreachable.
#[tokio::test]
async fn a_refusal_word_in_the_module_path_is_not_a_refusal() {
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.registry = Some(format!("127.0.0.1:{}+insecure", support::closed_port()));
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    let module =
        ModuleRef::new("test.example/denied/forbidden@v0", "v0.2.1", None).expect("module ref");
    let auth = br#"{"auths":{}}"#.to_vec();
    let err = Renderer::new(cfg)
        .render_module_cached_with(
            &module,
            &json!({}),
            &identity(),
            Some(("sha256:test".into(), auth)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, RenderError::RegistryUnreachable { .. }),
        "{err:?}"
    );
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Transient, opm_core::Reason::RenderFailed)
    );
}

#[tokio::test]
async fn invalid_values_stall_with_the_field_named() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(Some(&reg), cache.path());
    let cases = [
        (
            json!({"replicas": "three"}),
            "#config.replicas",
            "conflicting values",
        ),
        (json!({"replicas": 0}), "#config.replicas", "out of bound"),
        (json!({"bogus": true}), "#config.bogus", "field not allowed"),
    ];
    for (values, field, what) in cases {
        let err = r
            .render_module(&module("v0.2.1"), &values, &identity())
            .await
            .unwrap_err();
        let RenderError::Evaluation { message } = &err else {
            panic!("{values}: {err:?}")
        };
        assert!(
            message.contains(field) && message.contains(what),
            "{values}: {message}"
        );
        assert_eq!(
            (err.class(), err.reason()),
            (FailureClass::Stalled, opm_core::Reason::RenderFailed)
        );
    }
    let err = r
        .render_module(
            &module("v0.2.1"),
            &json!(["not", "a", "struct"]),
            &identity(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason(), "RenderFailed");
}

#[tokio::test]
async fn the_real_cue_is_killed_at_a_tiny_deadline() {
    let pkg = release_package(RELEASE_OK);
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    cfg.timeout = Duration::from_millis(1);
    let err = Renderer::new(cfg)
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        RenderError::Timeout {
            after: Duration::from_millis(1)
        }
    );
    assert_eq!(err.class(), FailureClass::Transient);
}

#[tokio::test]
async fn renders_are_cached_by_their_inputs() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(Some(&reg), cache.path());
    let m = module("v0.2.1");
    let a = r
        .render_module_cached(&m, &json!({"replicas": 2}), &identity())
        .await
        .unwrap();
    let b = r
        .render_module_cached(&m, &json!({"replicas": 2}), &identity())
        .await
        .unwrap();
    assert_eq!(a, b, "same inputs, same render");
    assert_eq!(r.stats().runs.load(Ordering::Relaxed), 1);
    assert_eq!(r.stats().cache_hits.load(Ordering::Relaxed), 1);
    let c = r
        .render_module_cached(&m, &json!({"replicas": 4}), &identity())
        .await
        .unwrap();
    assert_eq!(
        c.exported["components"]["web"]["deployment"]["spec"]["replicas"],
        4
    );
    assert_eq!(r.cached_renders(), 2);
    // A failure is not cached: once the version exists, the same request succeeds.
    assert!(
        r.render_module_cached(&module("v0.3.0"), &json!({}), &identity())
            .await
            .is_err()
    );
    reg.publish("v0.3.0");
    assert!(
        r.render_module_cached(&module("v0.3.0"), &json!({}), &identity())
            .await
            .is_ok()
    );

    let pkg = release_package(RELEASE_OK);
    let dir = pkg.path().join("apps/web");
    let digest = format!("sha256:{}", "1".repeat(64));
    let x = r
        .render_package_cached(&digest, "apps/web", &dir)
        .await
        .unwrap();
    std::fs::write(dir.join("release.cue"), "broken").unwrap();
    let y = r
        .render_package_cached(&digest, "apps/web", &dir)
        .await
        .unwrap();
    // The package is broken now: only the cache can have answered.
    assert_eq!(x, y, "same artifact digest and path: served from the cache");
    let other = format!("sha256:{}", "2".repeat(64));
    assert!(
        r.render_package_cached(&other, "apps/web", &dir)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_registry_answering_503_is_transient() {
    // A real HTTP server standing in for a registry that is up but failing.
    let app = axum::Router::new()
        .fallback(|| async { (axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy") });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.registry = Some(format!("{addr}+insecure"));
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    let err = Renderer::new(cfg)
        .render_module(&module("v0.2.1"), &json!({}), &identity())
        .await
        .unwrap_err();
    let RenderError::RegistryUnreachable { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("503 Service Unavailable"), "{message}");
    assert_eq!(err.class(), FailureClass::Transient);
    server.abort();
}

#[tokio::test]
async fn an_import_no_module_provides_is_a_resolution_failure() {
    let body = RELEASE_OK.replacen(
        "package release\n",
        "package release\n\nimport \"missing.example/lib\"\n\nx: lib.y\n",
        1,
    );
    let pkg = release_package(&body);
    let cache = tempfile::tempdir().unwrap();
    let err = renderer(None, cache.path())
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    let RenderError::Resolution { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("cannot find module providing package missing.example/lib"),
        "{message}"
    );
}

/// Issue 13 item 8: a U+FEFF (and other non-ASCII) in values used to stall the render
/// with cue's "illegal byte order mark"; the value now reaches the object unchanged.
#[tokio::test]
async fn odd_unicode_in_values_renders_unchanged() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let cache = tempfile::tempdir().unwrap();
    let r = renderer(Some(&reg), cache.path());
    for message in [
        "\u{feff}hello",
        "a\u{feff}b",
        "é \u{202e}rtl 😀 \u{0}\u{1f}",
        "\u{2028}\u{fffd}",
    ] {
        let out = r
            .render_module(
                &module("v0.2.1"),
                &json!({ "message": message }),
                &identity(),
            )
            .await
            .unwrap_or_else(|e| panic!("{message:?}: {e}"));
        assert_eq!(
            out.exported["components"]["config"]["cm"]["data"]["message"],
            message
        );
    }
}

/// A cue evaluation error quoting a Secret's value (SPEC §23) carries `<redacted>`.
#[tokio::test]
async fn a_cue_error_quoting_a_secret_value_is_redacted() {
    let pkg = release_package(
        r#"package release

kind: "ModuleRelease"
metadata: {name: "db", namespace: "web"}
components: db: s: {
	apiVersion: "v1", kind: "Secret", metadata: name: "db"
	stringData: password: "hunter2-s3cret" & =~"^[0-9]+$"
}
"#,
    );
    let cache = tempfile::tempdir().unwrap();
    let err = renderer(None, cache.path())
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    let RenderError::Evaluation { message } = &err else {
        panic!("{err:?}")
    };
    println!("cue error as reported: {message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("<redacted>"), "{message}");
    assert!(
        message.contains("stringData.password"),
        "the field stays: {message}"
    );
}

/// The real cue writing more than the cap: reading stops, cue is killed, the size seen
/// is reported.
#[tokio::test]
async fn the_real_cue_over_the_byte_cap_is_cut_off() {
    let pkg = release_package(
        r#"package release

import "list"

kind: "ModuleRelease"
metadata: {name: "big", namespace: "web"}
components: c: {for i in list.Range(0, 2000, 1) {"cm\(i)": {apiVersion: "v1", kind: "ConfigMap", metadata: name: "cm\(i)", data: v: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}}
"#,
    );
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    cfg.max_output_bytes = 50_000;
    let err = Renderer::new(cfg)
        .render_package(&pkg.path().join("apps/web"))
        .await
        .unwrap_err();
    let RenderError::OutputTooLarge {
        bytes_at_least,
        limit,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(limit, 50_000);
    assert!(bytes_at_least > 50_000, "{bytes_at_least}");
    assert_eq!(err_reason(bytes_at_least, limit), "RenderFailed");
}

fn err_reason(bytes_at_least: u64, limit: usize) -> opm_core::Reason {
    RenderError::OutputTooLarge {
        bytes_at_least,
        limit,
    }
    .reason()
}

/// A memory-bomb package under a small `--render-memory-limit` dies of it: `OutOfMemory`,
/// a stall, and the test process (the operator) is untouched. The same package renders
/// nothing else wrong: a trivial package still renders under the limit.
#[tokio::test]
async fn a_memory_bomb_dies_of_its_limit() {
    let bomb = release_package(
        r#"package release

import "list"

kind: "ModuleRelease"
metadata: {name: "bomb", namespace: "web"}
_big: [for i in list.Range(0, 20000000, 1) {n: i, s: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}]
components: c: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "x", data: n: "\(len(_big))"}
"#,
    );
    let cache = tempfile::tempdir().unwrap();
    let mut cfg = RenderConfig::new(cue_bin());
    cfg.cue_cache_dir = Some(cache.path().to_path_buf());
    cfg.timeout = Duration::from_secs(120);
    cfg.memory_limit = Some(256 << 20);
    let r = Renderer::new(cfg);
    let started = std::time::Instant::now();
    let err = r
        .render_package(&bomb.path().join("apps/web"))
        .await
        .unwrap_err();
    println!(
        "memory bomb under a 256 MiB limit: {err} after {:?}",
        started.elapsed()
    );
    assert_eq!(err, RenderError::OutOfMemory { limit: 256 << 20 });
    assert_eq!(
        (err.class(), err.reason()),
        (FailureClass::Stalled, opm_core::Reason::RenderFailed)
    );
    let ok = release_package(RELEASE_OK);
    r.render_package(&ok.path().join("apps/web"))
        .await
        .expect("a normal package renders under the same limit");
}
