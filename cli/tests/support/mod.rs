//! What the `kubectl opm` tests share: the real test API server (opm-testenv) with our CRDs
//! and Flux's source CRDs, the real CUE registry with the example module, an in-process
//! operator scoped to one namespace (the same `build_runtime` + `controller::run` as
//! `opm-operator run`), the real `kubectl-opm` binary run as a child process, and golden
//! files for the table layouts.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, PostParams};
use opm_core::AllowOperatorIdentity;
use opm_core::api::{ModuleRelease, Release};
use opm_operator::commands::run::{LogFormat, RunArgs, build_runtime};
use opm_operator::controller::controller::{self, Settings};
use opm_operator::controller::driver::Runtime;
use opm_testenv::{CueRegistry, TestEnv, TestNamespace};
use serde_json::{Value, json};
use tokio::sync::{OnceCell, oneshot};

pub const TEST_LABEL: &str = "opm-test";
pub const WAIT: Duration = Duration::from_secs(90);

static CRDS: OnceCell<()> = OnceCell::const_new();

/// The cluster with our CRDs and Flux's installed, and a fresh namespace.
pub async fn namespace() -> (&'static TestEnv, TestNamespace) {
    let env = TestEnv::global().await;
    CRDS.get_or_init(|| async {
        let client = env.client().expect("client");
        opm_testenv::install_crds(&client, opm_core::api::crds())
            .await
            .expect("installing our CRDs");
        opm_testenv::install_crds(&client, opm_testenv::flux_source_crds().expect("flux CRDs"))
            .await
            .expect("installing Flux's CRDs");
    })
    .await;
    let ns = env.namespace().await.expect("namespace");
    (env, ns)
}

fn run_args(ns: &str, registry: &CueRegistry, cache: &Path) -> RunArgs {
    RunArgs {
        concurrency: 2,
        default_service_account: None,
        allow_cross_namespace_refs: false,
        allow_operator_identity: AllowOperatorIdentity::On,
        watch_label_selector: Some(format!("{TEST_LABEL}={ns}")),
        requeue_dependency: Duration::from_secs(30),
        cue_binary: opm_testenv::tools::cue_bin().expect("cue binary"),
        cue_registry: Some(registry.registry()),
        cache_dir: Some(cache.to_path_buf()),
        max_artifact_bytes: 64 * 1024 * 1024,
        max_extracted_bytes: opm_operator::artifact::extract::DEFAULT_MAX_EXTRACTED_BYTES,
        fetch_timeout: Duration::from_secs(60),
        render_timeout: Duration::from_secs(60),
        max_render_objects: opm_core::config::DEFAULT_MAX_RENDER_OBJECTS,
        max_render_bytes: opm_core::config::DEFAULT_MAX_RENDER_BYTES,
        max_hooks: opm_core::hooks::DEFAULT_MAX_HOOKS,
        max_values_bytes: opm_core::config::DEFAULT_MAX_VALUES_BYTES,
        allow_insecure_kubeconfig: false,
        max_kubeconfig_bytes: opm_core::config::DEFAULT_MAX_KUBECONFIG_BYTES,
        max_concurrent_renders: opm_operator::cue::render::DEFAULT_MAX_CONCURRENT_RENDERS as u64,
        max_render_batch: opm_operator::cue::render::DEFAULT_MAX_BATCH as u64,
        render_memory_limit: opm_operator::cue::render::DEFAULT_RENDER_MEMORY_LIMIT,
        max_cue_cache_bytes: opm_operator::cue::cue_cache::DEFAULT_MAX_CUE_CACHE_BYTES,
        trace_dir: None,
        trace_max_bytes: opm_operator::ops::trace_sink::DEFAULT_MAX_BYTES,
        trace_max_files: opm_operator::ops::trace_sink::DEFAULT_MAX_FILES,
        log_format: LogFormat::Text,
        kube_api_qps: opm_operator::commands::run::DEFAULT_KUBE_API_QPS,
        kube_api_burst: opm_operator::commands::run::DEFAULT_KUBE_API_BURST,
        metrics_bind_address: "0".into(),
        health_probe_bind_address: "0".into(),
        leader_elect: false,
        leader_elect_lease_duration: opm_operator::ops::leader::LEASE_DURATION,
        max_concurrent_per_namespace: None,
        health_stall_timeout: opm_operator::ops::health::DEFAULT_STALL_TIMEOUT,
        health_eval_timeout: opm_core::config::DEFAULT_HEALTH_EVAL_TIMEOUT,
        events_webhook: None,
        events_webhook_queue_size: opm_core::event_delivery::DEFAULT_QUEUE_SIZE,
        events_webhook_max_backoff: opm_core::event_delivery::DEFAULT_MAX_BACKOFF,
    }
}

/// A running in-process operator for one namespace.
pub struct Operator {
    pub rt: Arc<Runtime>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _cache: tempfile::TempDir,
}

impl Operator {
    pub async fn start(env: &TestEnv, ns: &str) -> Operator {
        let registry = CueRegistry::global().await;
        let cache = tempfile::tempdir().expect("tempdir");
        let args = run_args(ns, registry, cache.path());
        let rt = build_runtime(&args, env.config()).expect("runtime");
        let (tx, rx) = oneshot::channel::<()>();
        let settings = Settings {
            concurrency: args.concurrency,
            label_selector: args.watch_label_selector.clone(),
            max_concurrent_per_namespace: None,
        };
        let shutdown = controller::shutdown_on(async move {
            let _ = rx.await;
        });
        let task = tokio::spawn(controller::run(rt.clone(), settings, shutdown));
        Operator {
            rt,
            stop: Some(tx),
            task: Some(task),
            _cache: cache,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A ModuleRelease of the example module, labelled for this namespace's operator, not
/// waiting for health (the test cluster runs no workload controllers).
pub fn module_release(ns: &str, name: &str, values: Value, extra_spec: Value) -> ModuleRelease {
    let mut spec = json!({
        "module": {"path": "example.com/modules/web@v0", "version": "v0.2.1"},
        "values": values,
        "wait": false,
    });
    merge(&mut spec, extra_spec);
    serde_json::from_value(json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": "ModuleRelease",
        "metadata": {"name": name, "namespace": ns, "labels": {TEST_LABEL: ns}},
        "spec": spec,
    }))
    .expect("ModuleRelease")
}

/// A Release of the OCIRepository `source` at `path`.
pub fn release(ns: &str, name: &str, source: &str, path: &str, extra_spec: Value) -> Release {
    let mut spec = json!({
        "sourceRef": {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "name": source},
        "path": path,
        "wait": false,
    });
    merge(&mut spec, extra_spec);
    serde_json::from_value(json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": "Release",
        "metadata": {"name": name, "namespace": ns, "labels": {TEST_LABEL: ns}},
        "spec": spec,
    }))
    .expect("Release")
}

fn merge(into: &mut Value, extra: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), extra) {
        for (k, v) in b {
            a.insert(k, v);
        }
    }
}

pub async fn create_mr(client: &Client, mr: &ModuleRelease) {
    let ns = mr.metadata.namespace.clone().unwrap();
    Api::<ModuleRelease>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), mr)
        .await
        .expect("create ModuleRelease");
}

pub async fn create_rel(client: &Client, rel: &Release) {
    let ns = rel.metadata.namespace.clone().unwrap();
    Api::<Release>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), rel)
        .await
        .expect("create Release");
}

/// Polls the release (as JSON) until `pred` holds; panics with the last status.
pub async fn wait_for(
    client: &Client,
    kind: &str,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let v: Option<Value> = match kind {
            "ModuleRelease" => Api::<ModuleRelease>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
                .expect("get")
                .map(|o| serde_json::to_value(o).unwrap()),
            _ => Api::<Release>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
                .expect("get")
                .map(|o| serde_json::to_value(o).unwrap()),
        };
        if let Some(o) = &v
            && pred(o)
        {
            return o.clone();
        }
        if start.elapsed() > WAIT {
            panic!(
                "timed out waiting for {what}; last: {}",
                serde_json::to_string_pretty(&v).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `Ready` (status, reason) of a release as JSON.
pub fn ready(o: &Value) -> (String, String) {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

pub fn is_ready(o: &Value) -> bool {
    ready(o).0 == "True"
        && o.pointer("/status/observedGeneration") == o.pointer("/metadata/generation")
}

/// One run of the real binary.
pub struct Run {
    pub code: i32,
    /// Wall time of the process, for the figures the suite prints (never asserted).
    pub elapsed: Duration,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `kubectl-opm` with `args`, the test cluster's admin kubeconfig, `-n ns` where the
/// verb takes it (every verb but `render` and `completion`), and the CUE registry.
pub async fn opm(env: &TestEnv, ns: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-opm"));
    cmd.args(args);
    cmd.arg("--kubeconfig").arg(env.kubeconfig_path());
    if let Some(ns) = ns {
        cmd.args(["-n", ns]);
    }
    run(cmd).await
}

/// Runs `kubectl-opm` with `args` only (no cluster flags).
pub async fn opm_bare(args: &[&str]) -> Run {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-opm"));
    cmd.args(args);
    run(cmd).await
}

async fn run(mut cmd: tokio::process::Command) -> Run {
    let registry = CueRegistry::global().await;
    cmd.env("OPM_CUE_BIN", opm_testenv::tools::cue_bin().expect("cue"))
        .env("CUE_REGISTRY", registry.registry())
        .env_remove("KUBECONFIG");
    let start = Instant::now();
    let out = cmd.output().await.expect("run kubectl-opm");
    Run {
        elapsed: start.elapsed(),
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Replaces what changes from run to run: the namespaces (as `NS`, `NS2`, …, in the order
/// given), ages and future times in tables (`<age>`, `in <age>`), RFC 3339 times
/// (`<time>`), temporary directory names, and runs of padding (three spaces, since a column's width follows its
/// longest cell).
pub fn normalise(text: &str, namespaces: &[&str]) -> String {
    let mut out = text.to_string();
    // Longest first, so `opm-test-12` is not replaced inside `opm-test-123`.
    let mut ns: Vec<(usize, &str)> = namespaces.iter().copied().enumerate().collect();
    ns.sort_by_key(|(_, n)| std::cmp::Reverse(n.len()));
    for (i, n) in ns {
        let token = if i == 0 {
            "NS".to_string()
        } else {
            format!("NS{}", i + 1)
        };
        let re = regex::Regex::new(&format!(r"\b{}\b", regex::escape(n))).unwrap();
        out = re.replace_all(&out, token.as_str()).into_owned();
    }
    // Temporary directories (cue's module cache in the operator's cache dir).
    let tmp = regex::Regex::new(r"\.tmp[A-Za-z0-9]{6}").unwrap();
    out = tmp.replace_all(&out, ".tmpXXXXXX").into_owned();
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap();
    out = time.replace_all(&out, "<time>").into_owned();
    let age = regex::Regex::new(r"\b\d+(y\d+d|y|d\d+h|d|h\d+m|h|m\d+s|m|s)\b").unwrap();
    out = age.replace_all(&out, "<age>").into_owned();
    // Between cells only: indentation (tree branches, diff fields) is layout to keep.
    let pad = regex::Regex::new(r"(\S) {2,}").unwrap();
    out = pad.replace_all(&out, "$1   ").into_owned();
    out
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// Compares `actual` with `tests/golden/<name>`; `KUBECTL_OPM_BLESS=1` writes it instead
/// (then review the change with `git diff`).
pub fn golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("KUBECTL_OPM_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no golden file {}; run with KUBECTL_OPM_BLESS=1 and review it",
            path.display()
        )
    });
    assert_eq!(
        actual,
        want,
        "output differs from {} (KUBECTL_OPM_BLESS=1 re-blesses; review with git diff)",
        path.display()
    );
}

/// Writes a release package (`cue.mod/module.cue` + `release.cue` with `components`).
pub fn write_package(dir: &Path, components: &Value) {
    for (p, c) in package_files(components) {
        let path = dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    }
}

pub fn package_files(components: &Value) -> Vec<(&'static str, String)> {
    vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        (
            "release.cue",
            format!(
                "package release\n\nkind: \"ModuleRelease\"\nmetadata: {{name: \"r\", namespace: \"default\"}}\ncomponents: {}\n",
                serde_json::to_string_pretty(components).unwrap()
            ),
        ),
    ]
}

/// Serves `files` as a tar.gz artifact and points the OCIRepository `source` at it.
pub async fn publish(
    server: &opm_testenv::ArtifactServer,
    client: &Client,
    ns: &str,
    source: &str,
    files: &[(&str, String)],
) {
    use opm_testenv::flux::{self, Artifact, SourceKind};
    let entries: Vec<opm_testenv::archive::Entry> = files
        .iter()
        .map(|(p, c)| opm_testenv::archive::Entry::new(*p, c.as_bytes().to_vec()))
        .collect();
    let bytes = opm_testenv::archive::tar_gz(&entries).expect("tar.gz");
    let path = format!(
        "{ns}/{source}/{}.tar.gz",
        opm_testenv::archive::sha256_digest(&bytes)
    );
    let url = server.put(&path, bytes.clone());
    let artifact = Artifact::for_bytes(url, &bytes);
    if flux::get_source(client, ns, SourceKind::OciRepository, source)
        .await
        .is_err()
    {
        flux::create_source(client, ns, SourceKind::OciRepository, source)
            .await
            .expect("create source");
    }
    flux::set_artifact(client, ns, SourceKind::OciRepository, source, &artifact)
        .await
        .expect("set artifact");
}
