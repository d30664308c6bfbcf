//! `opm-operator render`, run as a process with the real `cue` (DESIGN §3: the first tool a
//! module author reaches for).

mod support;

use std::process::{Command, Output};

use support::cue::{MODULE_PATH, Registry, cue_bin, write_tree};

fn opm(args: &[&str], cue_cache: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(args)
        .env("OPM_CUE_BIN", cue_bin())
        .env("CUE_CACHE_DIR", cue_cache)
        .env_remove("CUE_REGISTRY")
        .output()
        .expect("run opm-operator")
}

fn docs(stdout: &[u8]) -> Vec<serde_json::Value> {
    let text = std::str::from_utf8(stdout).unwrap();
    serde_saphyr::from_str_multiple::<serde_json::Value, Vec<_>>(text).expect("YAML documents")
}

#[test]
fn render_prints_a_release_package_as_yaml_documents() {
    let pkg = tempfile::tempdir().unwrap();
    write_tree(
        pkg.path(),
        &[
            (
                "cue.mod/module.cue",
                "module: \"test.example/r@v0\"\nlanguage: version: \"v0.17.0\"\n",
            ),
            (
                "release.cue",
                "package release\nkind: \"ModuleRelease\"\nmetadata: {name: \"r\", namespace: \"n\"}\ncomponents: {\n\tb: x: {apiVersion: \"v1\", kind: \"ConfigMap\", metadata: name: \"x\", data: k: \"v: 1\"}\n\ta: y: {apiVersion: \"v1\", kind: \"ServiceAccount\", metadata: name: \"y\"}\n}\n",
            ),
        ],
    );
    let cache = tempfile::tempdir().unwrap();
    let out = opm(&["render", pkg.path().to_str().unwrap()], cache.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("# component: a, key: y\n"), "{text}");
    let d = docs(&out.stdout);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0]["kind"], "ServiceAccount");
    assert_eq!(
        d[1]["data"]["k"], "v: 1",
        "strings that look like YAML stay strings"
    );
}

#[test]
fn render_a_module_with_values_from_the_registry() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("values.yaml"),
        "replicas: 5\nmessage: from a file\n",
    )
    .unwrap();
    let values = dir.path().join("values.yaml");
    let module = format!("{}@v0.2.1", MODULE_PATH.trim_end_matches("@v0"));
    let out = opm(
        &[
            "render",
            "--module",
            &module,
            "--values",
            values.to_str().unwrap(),
            "--name",
            "shop",
            "--namespace",
            "prod",
            "--cue-registry",
            &reg.cue_registry(),
        ],
        reg.cue_cache.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = docs(&out.stdout);
    let kinds: Vec<&str> = d.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ConfigMap", "Deployment"]);
    assert_eq!(d[0]["data"]["message"], "from a file");
    assert_eq!(d[1]["spec"]["replicas"], 5);
    assert_eq!(d[1]["metadata"]["namespace"], "prod");
    assert_eq!(d[1]["metadata"]["name"], "shop");
}

#[test]
fn render_failures_exit_non_zero_with_the_message() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let module = format!("{MODULE_PATH}@v0.4.0");
    let out = opm(
        &[
            "render",
            "--module",
            &module,
            "--cue-registry",
            &reg.cue_registry(),
        ],
        reg.cue_cache.path(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("module resolution failed") && err.contains("module not found"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    let out = opm(&["render", "/nonexistent/dir"], reg.cue_cache.path());
    assert!(!out.status.success());
}

#[test]
fn crds_prints_both_definitions_and_run_needs_a_cluster() {
    let cache = tempfile::tempdir().unwrap();
    let out = opm(&["crds"], cache.path());
    assert!(out.status.success());
    let crds = docs(&out.stdout);
    let names: Vec<&str> = crds
        .iter()
        .filter_map(|d| d.pointer("/metadata/name").and_then(|n| n.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            "modulereleases.releases.opmodel.dev",
            "releases.releases.opmodel.dev"
        ]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .arg("run")
        .env("KUBECONFIG", cache.path().join("missing-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert!(!out.status.success(), "run without a cluster must fail");
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));
}
