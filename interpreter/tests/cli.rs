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

/// `--values-from-file` merges like `valuesFrom` (SPEC §27): files in order, a
/// `PATH=FILE` one as a single string at that path, `--values` last; `#config` checks it.
#[test]
fn render_merges_values_from_files_like_values_from() {
    let reg = Registry::start();
    reg.publish("v0.2.1");
    let dir = tempfile::tempdir().unwrap();
    let w = |n: &str, t: &str| {
        std::fs::write(dir.path().join(n), t).unwrap();
        dir.path().join(n).to_str().unwrap().to_owned()
    };
    let base = w(
        "base.yaml",
        "replicas: 4
message: from base
image: nginx:base
",
    );
    let msg = w("msg.txt", "from: a file, as text");
    let values = w(
        "values.yaml",
        "replicas: 2
",
    );
    let module = format!("{}@v0.2.1", MODULE_PATH.trim_end_matches("@v0"));
    let target = format!("message={msg}");
    let out = opm(
        &[
            "render",
            "--module",
            &module,
            "--values-from-file",
            &base,
            "--values-from-file",
            &target,
            "--values",
            &values,
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
    assert_eq!(d[0]["data"]["message"], "from: a file, as text");
    assert_eq!(d[1]["spec"]["replicas"], 2, "--values wins");
    assert_eq!(
        d[1]["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:base"
    );
    // A value #config refuses fails the render, naming the field.
    let bad = w(
        "bad.yaml",
        "replicas: 0
",
    );
    let out = opm(
        &[
            "render",
            "--module",
            &module,
            "--values-from-file",
            &bad,
            "--cue-registry",
            &reg.cue_registry(),
        ],
        reg.cue_cache.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("replicas"));
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
            "releases.releases.opmodel.dev",
            "platforms.releases.opmodel.dev"
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

/// Runs `cmd` to completion, or kills it after `limit` (a flag that parsed starts an
/// operator, which runs until stopped): then the exit code is `None`.
fn output_within(mut cmd: Command, limit: std::time::Duration) -> Output {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn opm-operator");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait for opm-operator"),
        Err(_) => {
            // Our own child, by its id.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            rx.recv()
                .expect("killed child")
                .expect("wait for opm-operator")
        }
    }
}

/// A kubeconfig that parses but points nowhere: `run` gets past the cluster config to its
/// own setup (clients, rate limits) before anything is sent.
fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:9\"}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    path
}

#[test]
fn bad_flags_are_a_message_and_exit_2_never_a_panic() {
    // SPEC §22. Each case: the flag with a bad value, and what the message must name.
    let huge = "9".repeat(400);
    let cases: Vec<(Vec<String>, &str)> = [
        (
            vec!["--requeue-dependency", "99999999999999999999"],
            "--requeue-dependency",
        ),
        (
            vec!["--requeue-dependency", huge.as_str()],
            "--requeue-dependency",
        ),
        (
            vec!["--fetch-timeout", "5124095576030431h"],
            "--fetch-timeout",
        ),
        (vec!["--fetch-timeout", "0s"], "--fetch-timeout"),
        (vec!["--render-timeout=-5s"], "--render-timeout"),
        (vec!["--render-timeout", "1.2.3s"], "--render-timeout"),
        (
            vec!["--leader-elect-lease-duration", "0"],
            "--leader-elect-lease-duration",
        ),
        (vec!["--requeue-dependency", "25h"], "--requeue-dependency"),
        // A zero requeue would spin every soft-blocked release.
        (vec!["--requeue-dependency", "0s"], "--requeue-dependency"),
        (vec!["--kube-api-qps", "NaN"], "--kube-api-qps"),
        (vec!["--kube-api-qps", "1e-40"], "--kube-api-qps"),
        (vec!["--kube-api-qps", "inf"], "--kube-api-qps"),
        (vec!["--kube-api-qps=-3"], "--kube-api-qps"),
        (
            vec!["--metrics-bind-address", "not-an-address"],
            "--metrics-bind-address",
        ),
        (
            vec!["--health-probe-bind-address", "1.2.3.4:99999"],
            "--health-probe-bind-address",
        ),
        (vec!["--max-artifact-bytes", "0"], "--max-artifact-bytes"),
        (vec!["--max-extracted-bytes=-1"], "--max-extracted-bytes"),
        (vec!["--max-artifact-bytes", "64QB"], "--max-artifact-bytes"),
        (vec!["--concurrency", "70000"], "--concurrency"),
        (
            vec!["--default-service-account", "Not A Name"],
            "--default-service-account",
        ),
        (vec!["--log-format", "xml"], "--log-format"),
    ]
    .into_iter()
    .map(|(a, f)| (a.into_iter().map(String::from).collect(), f))
    .collect();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let mut wrong = Vec::new();
    for (args, flag) in &cases {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_opm-operator"));
        cmd.arg("run")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("RUST_BACKTRACE", "0");
        let out = output_within(cmd, std::time::Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("").to_owned();
        eprintln!("{args:?}: exit {:?}: {first}", out.status.code());
        if out.status.code() != Some(2) || err.contains("panicked") || !err.contains(flag) {
            wrong.push(format!("{args:?}: exit {:?}: {err}", out.status.code()));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} bad flags mishandled:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // The render subcommand's deadline flag parses the same way.
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["render", "--render-timeout", &huge, "/nonexistent"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn good_flag_values_in_the_crd_syntax_are_accepted() {
    // Durations as the CRD writes them, sizes with binary suffixes: parsing passes and `run`
    // fails only for want of a reachable cluster (exit 1, not a usage error).
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args([
            "run",
            "--requeue-dependency",
            "1m30s",
            "--fetch-timeout",
            "90",
            "--render-timeout",
            "1.5m",
            "--max-artifact-bytes",
            "128Mi",
            "--max-extracted-bytes",
            "1073741824",
            "--kube-api-qps",
            "0",
            "--metrics-bind-address",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", dir.path().join("missing"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `render --platform FILE` (SPEC §30): an OPM module renders through the given Platform,
/// with the Platform's catalog build (the web module was built against the older one); an
/// `instance.cue` package likewise; without `--platform` both say what is missing.
#[tokio::test(flavor = "multi_thread")]
async fn render_an_opm_module_and_instance_through_a_platform_file() {
    use opm_testenv::opm::{self as fx, OpmFixtures};
    let fixtures = OpmFixtures::global().await;
    let registry = fixtures.registry().registry();
    let dir = tempfile::tempdir().unwrap();
    let platform = dir.path().join("platform.yaml");
    std::fs::write(
        &platform,
        format!(
            "apiVersion: releases.opmodel.dev/v1alpha1\nkind: Platform\nmetadata:\n  name: cluster\nspec:\n  type: kubernetes\n  registry:\n    {}:\n      version: {}\n",
            fx::CATALOG,
            fx::CATALOG_NEW.trim_start_matches('v')
        ),
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let module = format!(
        "{}@{}",
        fx::WEB.trim_end_matches("@v1"),
        fx::WEB_VERSIONS[0]
    );
    let base = [
        "render",
        "--module",
        &module,
        "--name",
        "web",
        "--namespace",
        "demo",
        "--cue-registry",
        &registry,
    ];
    let out = opm(&base, cache.path());
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--platform FILE"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args = base.to_vec();
    args.extend(["--platform", platform.to_str().unwrap()]);
    let out = opm(&args, cache.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = docs(&out.stdout);
    let deploy = d
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    assert_eq!(deploy["metadata"]["name"], "web-server");
    assert_eq!(
        deploy["metadata"]["annotations"][fx::CATALOG_VERSION_ANNOTATION],
        fx::CATALOG_NEW.trim_start_matches('v')
    );
    let out = opm(
        &[
            "render",
            fx::instance_dir().to_str().unwrap(),
            "--platform",
            platform.to_str().unwrap(),
            "--cue-registry",
            &registry,
        ],
        cache.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(docs(&out.stdout).iter().any(|o| o["kind"] == "Deployment"));
}
