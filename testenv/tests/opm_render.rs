//! The OPM render package of `interpreter/src/cue/opm/LAYOUT.md`, built here file by file
//! exactly as written there and exported with the real `cue` against the real `cue mod
//! registry` holding the fixtures of `examples/opm/` (SPEC §30). If `cue`, the glue or
//! a fixture changes what a layout exports, these fail.

use std::path::Path;

use opm_testenv::opm::{self, OpmFixtures};
use opm_testenv::{Error, cue, tools};
use serde_json::{Value, json};

/// The render module's path; the glue imports its `instance` and `platform` packages.
const RENDER_MODULE: &str = "opm.internal/render@v0";

/// One enabled catalog of a Platform: its module path and version (with the `v`).
#[derive(Clone, Copy)]
struct Catalog {
    path: &'static str,
    version: &'static str,
}

const OPM_NEW: Catalog = Catalog {
    path: opm::CATALOG,
    version: opm::CATALOG_NEW,
};
const OPM_OLD: Catalog = Catalog {
    path: opm::CATALOG,
    version: opm::CATALOG_OLD,
};
const EXTRA: Catalog = Catalog {
    path: opm::EXTRA_CATALOG,
    version: opm::EXTRA_CATALOG_VERSION,
};

/// A JSON string literal, which is also a CUE string literal.
fn q(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `cue.mod/module.cue` of the render module: `deps` as given, in order.
fn module_cue(language: &str, deps: &[(String, String)]) -> String {
    let mut text = format!(
        "module: {}\nlanguage: version: {}\ndeps: {{\n",
        q(RENDER_MODULE),
        q(language)
    );
    for (path, version) in deps {
        text.push_str(&format!("\t{}: v: {}\n", q(path), q(version)));
    }
    text.push_str("}\n");
    text
}

/// `platform/platform.cue`: the platform package of LAYOUT.md.
fn platform_cue(catalogs: &[Catalog]) -> String {
    let mut imports = String::from("\tcore \"opmodel.dev/core@v2\"\n");
    let mut registry = String::new();
    for (i, c) in catalogs.iter().enumerate() {
        imports.push_str(&format!("\tcatalog{i} {}\n", q(c.path)));
        let bare = c.version.strip_prefix('v').unwrap_or(c.version);
        registry.push_str(&format!(
            "\t{}: {{\n\t\tversion:  {}\n\t\tenable:   true\n\t\t#catalog: catalog{i}\n\t}}\n",
            q(c.path),
            q(bare)
        ));
    }
    format!(
        "package platform\n\nimport (\n{imports})\n\ncore.#Platform\n\n\
         metadata: name: \"cluster\"\ntype: \"kubernetes\"\n#registry: {{\n{registry}}}\n"
    )
}

fn catalog_deps(catalogs: &[Catalog]) -> Vec<(String, String)> {
    catalogs
        .iter()
        .map(|c| (c.path.to_owned(), c.version.to_owned()))
        .collect()
}

fn write_glue(dir: &Path) {
    std::fs::copy(opm::glue_cue(), dir.join("glue.cue")).unwrap();
}

/// Layout (a): a ModuleRelease of `module`@`version` named `name` in `namespace`.
fn write_module_release(
    dir: &Path,
    module: &str,
    version: &str,
    catalogs: &[Catalog],
    (name, namespace): (&str, &str),
    values: &Value,
) {
    let mut deps = vec![(module.to_owned(), version.to_owned())];
    deps.extend(catalog_deps(catalogs));
    write(
        &dir.join("cue.mod/module.cue"),
        &module_cue("v0.17.0", &deps),
    );
    write(
        &dir.join("instance/instance.cue"),
        &format!(
            "package instance\n\nimport (\n\tcore \"opmodel.dev/core@v2\"\n\tmod {}\n)\n\n\
             core.#ModuleInstance\n\nmetadata: {{\n\tname:      {}\n\tnamespace: {}\n}}\n\
             #module: mod\nvalues: {values}\n",
            q(module),
            q(name),
            q(namespace)
        ),
    );
    write(&dir.join("platform/platform.cue"), &platform_cue(catalogs));
    write_glue(dir);
}

/// Layout (a), batched: several releases of `module`@`version`, member `r<i>` of the
/// instance package's `members` each.
fn write_batch(
    dir: &Path,
    module: &str,
    version: &str,
    catalogs: &[Catalog],
    members: &[((&str, &str), Value)],
) {
    let mut deps = vec![(module.to_owned(), version.to_owned())];
    deps.extend(catalog_deps(catalogs));
    write(
        &dir.join("cue.mod/module.cue"),
        &module_cue("v0.17.0", &deps),
    );
    let mut text = format!(
        "package instance\n\nimport (\n\tcore \"opmodel.dev/core@v2\"\n\tmod {}\n)\n\nmembers: {{\n",
        q(module)
    );
    for (i, ((name, namespace), values)) in members.iter().enumerate() {
        text.push_str(&format!(
            "\tr{i}: core.#ModuleInstance & {{\n\t\tmetadata: {{name: {}, namespace: {}}}\n\t\t#module: mod\n\t\tvalues: {values}\n\t}}\n",
            q(name),
            q(namespace)
        ));
    }
    text.push_str("}\n");
    write(&dir.join("instance/instance.cue"), &text);
    write(&dir.join("platform/platform.cue"), &platform_cue(catalogs));
    write_glue(dir);
}

/// `cue export --out json <file>` (an artifact's module file is plain CUE data).
async fn export_file(file: &Path) -> Value {
    let out = tokio::process::Command::new(tools::cue_bin().unwrap())
        .args(["export", "--out", "json"])
        .arg(file)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Layout (b): a Release whose artifact holds the authored instance package in `artifact`
/// (its module root; `spec.path` is the root here).
async fn write_release(dir: &Path, artifact: &Path, catalogs: &[Catalog]) {
    let modfile = export_file(&artifact.join("cue.mod/module.cue")).await;
    let mut deps: Vec<(String, String)> = modfile["deps"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(path, _)| !catalogs.iter().any(|c| c.path == path.as_str()))
        .map(|(path, dep)| (path.clone(), dep["v"].as_str().unwrap().to_owned()))
        .collect();
    deps.extend(catalog_deps(catalogs));
    let language = modfile["language"]["version"].as_str().unwrap();
    write(
        &dir.join("cue.mod/module.cue"),
        &module_cue(language, &deps),
    );
    let mut package = None;
    for entry in std::fs::read_dir(artifact).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cue") {
            let text = std::fs::read_to_string(&path).unwrap();
            if path.file_name().unwrap() == "instance.cue" {
                package = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("package "))
                    .map(|p| p.trim().to_owned());
            }
            write(&dir.join("release").join(path.file_name().unwrap()), &text);
        }
    }
    let package = package.expect("instance.cue with a package clause");
    write(
        &dir.join("instance/instance.cue"),
        &format!(
            "package instance\n\nimport authored \"opm.internal/render/release:{package}\"\n\nauthored\n"
        ),
    );
    write(&dir.join("platform/platform.cue"), &platform_cue(catalogs));
    write_glue(dir);
}

async fn export(dir: &Path) -> Result<Value, Error> {
    let fixtures = OpmFixtures::global().await;
    cue::export(dir, &fixtures.registry().cue_env()).await
}

async fn render(
    module: &str,
    version: &str,
    catalogs: &[Catalog],
    identity: (&str, &str),
    values: Value,
) -> Result<Value, Error> {
    let dir = tempfile::tempdir().unwrap();
    write_module_release(dir.path(), module, version, catalogs, identity, &values);
    export(dir.path()).await
}

fn stderr_of(result: Result<Value, Error>) -> String {
    match result {
        Err(Error::Command { stderr, .. }) => stderr,
        other => panic!("expected cue to fail, got {other:?}"),
    }
}

fn fqn(catalog: Catalog, transformer: &str) -> String {
    let base = catalog.path.split('@').next().unwrap();
    let version = catalog.version.strip_prefix('v').unwrap();
    format!("{base}/transformers/{transformer}@{version}")
}

/// The (kind, name) of every object in `matches`, lists flattened, sorted.
fn objects(out: &Value) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for (component, by_transformer) in out["matches"].as_object().unwrap() {
        for output in by_transformer.as_object().unwrap().values() {
            let items = match output {
                Value::Array(items) => items.clone(),
                one => vec![one.clone()],
            };
            for o in items {
                all.push((
                    component.clone(),
                    o["kind"].as_str().unwrap().to_owned(),
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    all.sort();
    all
}

fn no_verdicts(out: &Value) {
    assert_eq!(out["unmatched"], json!([]));
    assert_eq!(out["unhandled"], json!([]));
    assert_eq!(out["duplicates"], json!([]));
}

#[tokio::test]
async fn module_release_renders_the_web_module_through_the_platform() {
    let out = render(
        opm::WEB,
        opm::WEB_VERSIONS[0],
        &[OPM_NEW],
        ("web", "demo"),
        json!({"replicas": 3, "message": "hi"}),
    )
    .await
    .unwrap();
    assert_eq!(
        out["instance"],
        json!({
            "name": "web",
            "namespace": "demo",
            // UUIDv5(OPM namespace, "example.com/opm/web:web:demo"): upstream's rule.
            "uuid": "d82eaadc-8ec5-541d-8b48-4841d9617b89",
            "module": "example.com/opm/web@v1",
            "version": "1.0.0",
        })
    );
    no_verdicts(&out);
    assert_eq!(
        objects(&out),
        [
            (
                "config".into(),
                "ConfigMap".into(),
                "web-config-settings".into()
            ),
            (
                "identity".into(),
                "ServiceAccount".into(),
                "web-identity".into()
            ),
            ("server".into(), "Deployment".into(), "web-server".into()),
            ("server".into(), "Service".into(), "web-server".into()),
        ]
    );
    let deployment = &out["matches"]["server"][fqn(OPM_NEW, "deployment-transformer")];
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "MESSAGE", "value": "hi"}])
    );
    let labels = &deployment["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
    assert_eq!(labels["module-instance.opmodel.dev/name"], "web");
    assert_eq!(
        labels["module-instance.opmodel.dev/uuid"],
        "d82eaadc-8ec5-541d-8b48-4841d9617b89"
    );
    assert_eq!(deployment["metadata"]["namespace"], "demo");
    // A list output stays a list in the JSON (flattened by the renderer, not in CUE).
    let config = &out["matches"]["config"][fqn(OPM_NEW, "configmap-transformer")];
    assert_eq!(config[0]["data"], json!({"message": "hi", "port": "8080"}));
}

#[tokio::test]
async fn the_platforms_catalog_pin_wins_over_the_modules_own() {
    // web is built against the older build, worker against the newer: each renders with
    // whichever the Platform pins, and the objects say which.
    for (module, catalog) in [(opm::WEB, OPM_NEW), (opm::WORKER, OPM_OLD)] {
        let version = if module == opm::WEB {
            opm::WEB_VERSIONS[0]
        } else {
            opm::MODULE_VERSION
        };
        let out = render(module, version, &[catalog], ("r", "demo"), json!({}))
            .await
            .unwrap();
        no_verdicts(&out);
        let bare = catalog.version.strip_prefix('v').unwrap();
        for by_transformer in out["matches"].as_object().unwrap().values() {
            for (key, output) in by_transformer.as_object().unwrap() {
                assert!(key.ends_with(&format!("@{bare}")), "{module}: {key}");
                let first = match output {
                    Value::Array(items) => &items[0],
                    one => one,
                };
                assert_eq!(
                    first["metadata"]["annotations"][opm::CATALOG_VERSION_ANNOTATION],
                    bare,
                    "{module}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_platform_version_change_changes_the_rendered_objects() {
    let old = render(opm::WEB, "v1.0.0", &[OPM_OLD], ("web", "demo"), json!({}))
        .await
        .unwrap();
    let new = render(opm::WEB, "v1.0.0", &[OPM_NEW], ("web", "demo"), json!({}))
        .await
        .unwrap();
    assert_eq!(objects(&old), objects(&new));
    let annotation = |out: &Value, c: Catalog| {
        out["matches"]["server"][fqn(c, "deployment-transformer")]["metadata"]["annotations"]
            [opm::CATALOG_VERSION_ANNOTATION]
            .clone()
    };
    assert_eq!(annotation(&old, OPM_OLD), "2.0.0-test.1");
    assert_eq!(annotation(&new, OPM_NEW), "2.0.0-test.2");
}

#[tokio::test]
async fn core_is_the_one_the_module_and_catalogs_require_not_the_newest() {
    let fixtures = OpmFixtures::global().await;
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    write_module_release(
        dir.path(),
        opm::CACHE,
        opm::MODULE_VERSION,
        &[OPM_NEW],
        ("cache", "demo"),
        &json!({}),
    );
    let module_file = std::fs::read_to_string(dir.path().join("cue.mod/module.cue")).unwrap();
    assert!(!module_file.contains(opm::CORE), "core is not listed");
    let env = [
        ("CUE_REGISTRY", fixtures.registry().registry()),
        ("CUE_CACHE_DIR", cache.path().to_string_lossy().into_owned()),
    ];
    let out = cue::export(dir.path(), &env).await.unwrap();
    no_verdicts(&out);
    // Both core builds are published; the one required (test.1) is the one fetched.
    let extracted = cache.path().join("mod/extract/opmodel.dev");
    assert!(
        extracted
            .join(format!("core@{}", opm::CORE_VERSIONS[0]))
            .is_dir()
    );
    assert!(
        !extracted
            .join(format!("core@{}", opm::CORE_VERSIONS[1]))
            .exists()
    );
}

#[tokio::test]
async fn traits_and_labels_select_transformers() {
    let cache = render(
        opm::CACHE,
        opm::MODULE_VERSION,
        &[OPM_NEW],
        ("c", "demo"),
        json!({}),
    )
    .await
    .unwrap();
    no_verdicts(&cache);
    let kinds: Vec<_> = objects(&cache).into_iter().map(|(_, k, _)| k).collect();
    assert_eq!(kinds, ["Deployment", "PodDisruptionBudget", "Service"]);
    let pdb = &cache["matches"]["cache"][fqn(OPM_NEW, "pdb-transformer")];
    assert_eq!(pdb["spec"]["minAvailable"], 1);

    let worker = render(
        opm::WORKER,
        opm::MODULE_VERSION,
        &[OPM_NEW],
        ("w", "demo"),
        json!({"replicas": 2}),
    )
    .await
    .unwrap();
    no_verdicts(&worker);
    assert_eq!(
        objects(&worker),
        [
            (
                "settings".into(),
                "ConfigMap".into(),
                "w-settings-logging".into()
            ),
            (
                "settings".into(),
                "ConfigMap".into(),
                "w-settings-queue".into()
            ),
            ("worker".into(), "StatefulSet".into(), "w-worker".into()),
        ]
    );
    // The stateful label picked the StatefulSet transformer, not the Deployment one.
    assert!(
        worker["matches"]["worker"]
            .get(fqn(OPM_NEW, "deployment-transformer"))
            .is_none()
    );
}

#[tokio::test]
async fn release_renders_the_authored_instance_package() {
    let dir = tempfile::tempdir().unwrap();
    write_release(dir.path(), &opm::instance_dir(), &[OPM_NEW]).await;
    let module_file = std::fs::read_to_string(dir.path().join("cue.mod/module.cue")).unwrap();
    // The artifact pins the older catalog; the Platform's build replaces it.
    assert!(module_file.contains("\"opmodel.dev/catalogs/opm@v2\": v: \"v2.0.0-test.2\""));
    assert_eq!(
        module_file.matches("opmodel.dev/catalogs/opm@v2").count(),
        1
    );
    // Its other pins stay as the author wrote them.
    assert!(module_file.contains("\"example.com/opm/web@v1\": v: \"v1.0.0\""));
    assert!(module_file.contains("\"opmodel.dev/core@v2\": v: \"v2.0.0-test.1\""));
    let out = export(dir.path()).await.unwrap();
    no_verdicts(&out);
    assert_eq!(out["instance"]["name"], "web");
    assert_eq!(out["instance"]["namespace"], "demo");
    assert_eq!(
        out["instance"]["uuid"],
        "d82eaadc-8ec5-541d-8b48-4841d9617b89"
    );
    assert_eq!(objects(&out).len(), 4);
    let config = &out["matches"]["config"][fqn(OPM_NEW, "configmap-transformer")];
    assert_eq!(
        config[0]["data"]["message"],
        "hello from an authored instance"
    );
    let deployment = &out["matches"]["server"][fqn(OPM_NEW, "deployment-transformer")];
    assert_eq!(deployment["spec"]["replicas"], 2);
}

#[tokio::test]
async fn verdict_unmatched_component() {
    let out = render(
        opm::UNMATCHED,
        opm::VERDICT_VERSION,
        &[OPM_NEW],
        ("u", "demo"),
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(out["unmatched"], json!(["nightly"]));
    assert_eq!(
        out["unhandled"],
        json!([{"component": "nightly", "kind": "resource", "fqn": opm::UNMATCHED_RESOURCE}])
    );
    assert_eq!(out["duplicates"], json!([]));
    assert!(out["matches"].get("nightly").is_none());
    assert!(out["matches"].get("config").is_some());
}

#[tokio::test]
async fn verdict_unhandled_trait() {
    let out = render(
        opm::UNHANDLED,
        opm::VERDICT_VERSION,
        &[OPM_NEW],
        ("u", "demo"),
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(out["unmatched"], json!([]));
    assert_eq!(
        out["unhandled"],
        json!([{"component": "server", "kind": "trait", "fqn": opm::UNHANDLED_TRAIT}])
    );
    assert_eq!(out["duplicates"], json!([]));
}

#[tokio::test]
async fn verdict_transformer_provided_by_two_catalogs() {
    let out = render(
        opm::WEB,
        "v1.0.0",
        &[OPM_NEW, EXTRA],
        ("web", "demo"),
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(
        out["duplicates"],
        json!([{"transformer": "deployment-transformer", "catalogs": [opm::CATALOG, opm::EXTRA_CATALOG]}])
    );
    assert_eq!(out["unmatched"], json!([]));
    assert_eq!(out["unhandled"], json!([]));
}

#[tokio::test]
async fn verdict_incomplete_output_names_component_transformer_and_field() {
    let stderr = stderr_of(
        render(
            opm::INCOMPLETE,
            opm::VERDICT_VERSION,
            &[OPM_NEW],
            ("i", "demo"),
            json!({}),
        )
        .await,
    );
    let expected = format!(
        "matches.server.\"{}\".spec.template.spec.containers.0.env.0.value: incomplete value string",
        fqn(OPM_NEW, "deployment-transformer")
    );
    assert!(stderr.contains(&expected), "{stderr}");
    // With the value given, the same module renders.
    let out = render(
        opm::INCOMPLETE,
        opm::VERDICT_VERSION,
        &[OPM_NEW],
        ("i", "demo"),
        json!({"greeting": "hello"}),
    )
    .await
    .unwrap();
    no_verdicts(&out);
}

#[tokio::test]
async fn values_that_break_the_config_fail_naming_the_field() {
    for (values, expected) in [
        (json!({"nope": 1}), "_values.nope: field not allowed"),
        (
            json!({"replicas": 50}),
            "_values.replicas: 2 errors in empty disjunction",
        ),
        (
            json!({"image": {"tag": 5}}),
            "_values.image.tag: conflicting values 5 and string",
        ),
    ] {
        let stderr =
            stderr_of(render(opm::WEB, "v1.0.0", &[OPM_NEW], ("web", "demo"), values).await);
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
}

#[tokio::test]
async fn a_catalog_serving_another_version_than_the_pin_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    write_module_release(
        dir.path(),
        opm::WEB,
        "v1.0.0",
        &[OPM_NEW],
        ("web", "demo"),
        &json!({}),
    );
    // The platform package says test.1 while the module file loads test.2.
    write(
        &dir.path().join("platform/platform.cue"),
        &platform_cue(&[OPM_OLD]),
    );
    let stderr = stderr_of(export(dir.path()).await);
    assert!(
        stderr.contains(
            "#registry.\"opmodel.dev/catalogs/opm@v2\".version: conflicting values \"2.0.0-test.2\" and \"2.0.0-test.1\""
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_platform_evaluates_alone() {
    let fixtures = OpmFixtures::global().await;
    for (catalogs, count) in [(vec![OPM_NEW], 6), (vec![OPM_NEW, EXTRA], 7)] {
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("cue.mod/module.cue"),
            &module_cue("v0.17.0", &catalog_deps(&catalogs)),
        );
        write(
            &dir.path().join("platform/platform.cue"),
            &platform_cue(&catalogs),
        );
        let out = tokio::process::Command::new(tools::cue_bin().unwrap())
            .args([
                "export",
                "./platform",
                "--out",
                "json",
                "-e",
                "{transformers: [for k, _ in #composedTransformers {k}], catalogs: [for p, e in #registry {path: p, version: e.version, transformers: len(e.#transformers)}]}",
            ])
            .current_dir(dir.path())
            .envs(fixtures.registry().cue_env())
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["transformers"].as_array().unwrap().len(), count);
        assert_eq!(
            v["catalogs"][0],
            json!({"path": opm::CATALOG, "version": "2.0.0-test.2", "transformers": 6})
        );
    }
}

#[tokio::test]
async fn a_core_v0_module_is_not_renderable_as_opm() {
    // The decision must come before cue (SPEC §30: a clear stall); this pins that the
    // fixture really is of core v0 and that rendering it anyway gives no usable result.
    let modfile = export_file(&opm::opm_dir().join("verdicts/legacy/cue.mod/module.cue")).await;
    assert!(modfile["deps"].get(opm::CORE_V0).is_some());
    assert!(modfile["deps"].get(opm::CORE).is_none());
    let result = render(
        opm::LEGACY,
        opm::LEGACY_VERSION,
        &[OPM_NEW],
        ("l", "demo"),
        json!({}),
    )
    .await;
    stderr_of(result);
}

fn manifest(name: &str) -> Value {
    let path = tools::examples_dir().join("manifests").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn example_manifests_render_through_their_platform() {
    let platform = manifest("platform.yaml");
    assert_eq!(platform["apiVersion"], "releases.opmodel.dev/v1alpha1");
    assert_eq!(platform["kind"], "Platform");
    assert_eq!(platform["metadata"]["name"], "cluster");
    assert_eq!(platform["spec"]["type"], "kubernetes");
    let registry = platform["spec"]["registry"].as_object().unwrap();
    assert_eq!(registry.len(), 1);
    let pinned = registry[opm::CATALOG]["version"].as_str().unwrap();
    // Written without the `v`, as upstream's Platform writes it; published with it.
    assert_eq!(format!("v{pinned}"), opm::CATALOG_NEW);

    let mr = manifest("opm-modulerelease.yaml");
    assert_eq!(mr["kind"], "ModuleRelease");
    assert_eq!(mr["spec"]["module"]["path"], opm::WEB);
    let version = mr["spec"]["module"]["version"].as_str().unwrap();
    assert!(opm::WEB_VERSIONS.contains(&version), "{version}");
    let name = mr["metadata"]["name"].as_str().unwrap();
    let namespace = mr["metadata"]["namespace"].as_str().unwrap();
    let out = render(
        opm::WEB,
        version,
        &[OPM_NEW],
        (name, namespace),
        mr["spec"]["values"].clone(),
    )
    .await
    .unwrap();
    no_verdicts(&out);
    let names: Vec<_> = objects(&out)
        .into_iter()
        .map(|(_, k, n)| format!("{k}/{n}"))
        .collect();
    assert_eq!(
        names,
        [
            "ConfigMap/opm-web-config-settings",
            "ServiceAccount/opm-web-identity",
            "Deployment/opm-web-server",
            "Service/opm-web-server"
        ]
    );
}

#[tokio::test]
async fn opm_cue_files_are_cue_fmt_clean() {
    let mut dirs = vec![
        opm::opm_dir().join("core"),
        opm::opm_dir().join("catalog"),
        opm::instance_dir(),
    ];
    for group in ["modules", "verdicts"] {
        for entry in std::fs::read_dir(opm::opm_dir().join(group)).unwrap() {
            dirs.push(entry.unwrap().path());
        }
    }
    for dir in dirs {
        let out = tokio::process::Command::new(tools::cue_bin().unwrap())
            .args(["fmt", "--check", "./..."])
            .current_dir(&dir)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{} is not `cue fmt` clean:\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let glue = opm::glue_cue();
    let out = tokio::process::Command::new(tools::cue_bin().unwrap())
        .args(["fmt", "--check"])
        .arg(&glue)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{} is not `cue fmt` clean: {}",
        glue.display(),
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test]
async fn a_batch_exports_each_member_exactly_as_its_own_render() {
    let members = [
        (("a", "team-a"), json!({"replicas": 2})),
        (("b", "team-b"), json!({"message": "bee"})),
        (("c", "team-a"), json!({})),
    ];
    let dir = tempfile::tempdir().unwrap();
    write_batch(dir.path(), opm::WEB, "v1.0.0", &[OPM_NEW], &members);
    let batch = export(dir.path()).await.unwrap();
    let exported = batch["members"].as_object().unwrap();
    assert_eq!(exported.len(), members.len());
    for (i, (identity, values)) in members.iter().enumerate() {
        let single = render(opm::WEB, "v1.0.0", &[OPM_NEW], *identity, values.clone())
            .await
            .unwrap();
        assert_eq!(exported[&format!("r{i}")], single, "member r{i}");
    }
}

#[tokio::test]
async fn a_batch_fails_naming_the_member() {
    let dir = tempfile::tempdir().unwrap();
    write_batch(
        dir.path(),
        opm::WEB,
        "v1.0.0",
        &[OPM_NEW],
        &[
            (("a", "demo"), json!({})),
            (("b", "demo"), json!({"nope": 1})),
        ],
    );
    let stderr = stderr_of(export(dir.path()).await);
    assert!(
        stderr.contains("_values.r1.nope: field not allowed"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    write_batch(
        dir.path(),
        opm::INCOMPLETE,
        opm::VERDICT_VERSION,
        &[OPM_NEW],
        &[
            (("a", "demo"), json!({"greeting": "hi"})),
            (("b", "demo"), json!({})),
        ],
    );
    let stderr = stderr_of(export(dir.path()).await);
    let expected = format!(
        "members.r1.matches.server.\"{}\".spec.template.spec.containers.0.env.0.value: incomplete value string",
        fqn(OPM_NEW, "deployment-transformer")
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(!stderr.contains("members.r0."), "{stderr}");
}

#[tokio::test]
async fn instance_uuid_is_upstreams() {
    // OPM.md records upstream's uuid for its web_app module deployed as `web` in
    // `default`; our core must compute the same (UUIDv5 of the module's registry path,
    // without the major, the instance name and namespace).
    let fixtures = OpmFixtures::global().await;
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("cue.mod/module.cue"),
        &module_cue(
            "v0.17.0",
            &[(opm::CORE.to_owned(), opm::CORE_VERSIONS[0].to_owned())],
        ),
    );
    write(
        &dir.path().join("uuid.cue"),
        "package uuid\n\nimport core \"opmodel.dev/core@v2\"\n\n\
         _i: core.#ModuleInstance & {\n\
         \tmetadata: {name: \"web\", namespace: \"default\"}\n\
         \t#module: core.#Module & {\n\
         \t\tmetadata: {name: \"web_app\", modulePath: \"opmodel.dev/modules/web_app@v1\", version: \"1.0.0\"}\n\
         \t\t#config: {}\n\t\tdebugValues: {}\n\t\t#components: {}\n\t}\n\tvalues: {}\n}\n\
         fqn:  _i.metadata.fqn\nuuid: _i.metadata.uuid\n",
    );
    let out = cue::export(dir.path(), &fixtures.registry().cue_env())
        .await
        .unwrap();
    assert_eq!(
        out,
        json!({
            "fqn": "opmodel.dev/modules/web_app:web:default",
            "uuid": "e27ed9b2-d7f8-528c-91d8-df4fed3e911a",
        })
    );
}

#[tokio::test]
async fn publish_script_publishes_every_fixture() {
    // examples/opm/publish.sh (for the demo and for people) publishes what testenv::opm
    // does, to a registry of its own here.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let host = format!("127.0.0.1:{port}");
    let cache = tempfile::tempdir().unwrap();
    let cue_bin = tools::cue_bin().unwrap();
    let _registry = tokio::process::Command::new(&cue_bin)
        .args(["mod", "registry", &host])
        .env("CUE_CACHE_DIR", cache.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    opm_testenv::wait::eventually(
        "cue mod registry to listen",
        std::time::Duration::from_secs(30),
        || async { tokio::net::TcpStream::connect(&host).await.ok().map(|_| ()) },
    )
    .await
    .unwrap();
    let out = tokio::process::Command::new(opm::opm_dir().join("publish.sh"))
        .env("CUE_REGISTRY", format!("{host}+insecure"))
        .env("CUE_CACHE_DIR", cache.path())
        .env("OPM_CUE_BIN", &cue_bin)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for module in [
        format!(
            "{}@{}",
            opm::CORE.split('@').next().unwrap(),
            opm::CORE_VERSIONS[1]
        ),
        format!(
            "{}@{}",
            opm::CATALOG.split('@').next().unwrap(),
            opm::CATALOG_OLD
        ),
        format!(
            "{}@{}",
            opm::WEB.split('@').next().unwrap(),
            opm::WEB_VERSIONS[1]
        ),
        format!(
            "{}@{}",
            opm::LEGACY.split('@').next().unwrap(),
            opm::LEGACY_VERSION
        ),
    ] {
        assert!(
            stdout.contains(&format!("published {module} ")),
            "{module}: {stdout}"
        );
    }
    assert_eq!(stdout.matches("published ").count(), 14, "{stdout}");
}
