//! Runs the operator in-process, on the test's tokio runtime, through the same code path as
//! `opm-operator run` (`build_runtime` + `controller::run`), scoped to one test namespace by
//! a label selector so parallel tests never reconcile each other's releases.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event as KEvent;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use opm_core::AllowOperatorIdentity;
use opm_core::api::{ModuleRelease, Release, ReleaseStatus};
use opm_operator::commands::run::{LogFormat, RunArgs, build_runtime};
use opm_operator::controller::controller::{self, Settings};
use opm_operator::controller::driver::Runtime;
use opm_testenv::archive::{Entry, tar_gz};
use opm_testenv::flux::{self, Artifact, SourceKind};
use opm_testenv::{ArtifactServer, CueRegistry, TestEnv, TestNamespace};
use serde_json::{Value, json};
use tokio::sync::{OnceCell, oneshot};

pub const TEST_LABEL: &str = "opm-test";
pub const WAIT: Duration = Duration::from_secs(90);

static CRDS: OnceCell<()> = OnceCell::const_new();

/// The cluster with our CRDs installed, and a fresh namespace.
pub async fn namespace() -> (&'static TestEnv, TestNamespace) {
    let env = TestEnv::global().await;
    CRDS.get_or_init(|| async {
        let client = env.client().expect("client");
        opm_testenv::install_crds(&client, opm_core::api::crds())
            .await
            .expect("installing our CRDs");
    })
    .await;
    let ns = env.namespace().await.expect("namespace");
    (env, ns)
}

pub fn default_args(ns: &str) -> RunArgs {
    RunArgs {
        concurrency: 4,
        default_service_account: None,
        allow_cross_namespace_refs: false,
        // Suites that test something else run releases without a ServiceAccount as the
        // operator, confined to their namespace; tenancy tests set `Off` (the default).
        allow_operator_identity: AllowOperatorIdentity::On,
        watch_label_selector: Some(format!("{TEST_LABEL}={ns}")),
        requeue_dependency: Duration::from_secs(30),
        cue_binary: opm_testenv::tools::cue_bin().expect("cue binary"),
        cue_registry: None,
        cache_dir: None,
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

/// With `OPM_E2E_TRACE_DIR` set (`make test` sets it), each operator's traces go to their
/// own subdirectory there and outlive the test, so `opm-sim replay` can check them all
/// afterwards; otherwise to a temp dir.
fn e2e_trace_dir(ns: &str) -> Option<PathBuf> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let root = std::env::var_os("OPM_E2E_TRACE_DIR").filter(|v| !v.is_empty())?;
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Some(PathBuf::from(root).join(format!("{ns}-{}-{n}", std::process::id())))
}

/// A running in-process operator.
pub struct Operator {
    pub rt: Arc<Runtime>,
    pub trace_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Operator {
    /// Starts an operator for `ns` with the CUE registry configured; `tweak` edits the flags.
    pub async fn start(env: &TestEnv, ns: &str, tweak: impl FnOnce(&mut RunArgs)) -> Operator {
        let registry = CueRegistry::global().await;
        let cache = tempfile::tempdir().expect("tempdir");
        let traces = tempfile::tempdir().expect("tempdir");
        let trace_dir = e2e_trace_dir(ns).unwrap_or_else(|| traces.path().to_path_buf());
        let mut args = default_args(ns);
        args.cue_registry = Some(registry.registry());
        args.cache_dir = Some(cache.path().to_path_buf());
        args.trace_dir = Some(trace_dir.clone());
        tweak(&mut args);
        let rt = build_runtime(&args, env.config()).expect("runtime");
        let (tx, rx) = oneshot::channel::<()>();
        let settings = Settings {
            concurrency: args.concurrency,
            label_selector: args.watch_label_selector.clone(),
            max_concurrent_per_namespace: args.max_concurrent_per_namespace,
        };
        let shutdown = controller::shutdown_on(async move {
            let _ = rx.await;
        });
        let task = tokio::spawn(controller::run(rt.clone(), settings, shutdown));
        Operator {
            rt,
            trace_dir,
            stop: Some(tx),
            task: Some(task),
            _dirs: vec![cache, traces],
        }
    }

    /// The runtime alone, without controllers: every request it counts is an attempt's.
    pub async fn runtime_only(env: &TestEnv, ns: &str) -> (Arc<Runtime>, Vec<tempfile::TempDir>) {
        let registry = CueRegistry::global().await;
        let cache = tempfile::tempdir().expect("tempdir");
        let mut args = default_args(ns);
        args.cue_registry = Some(registry.registry());
        args.cache_dir = Some(cache.path().to_path_buf());
        let rt = build_runtime(&args, env.config()).expect("runtime");
        (rt, vec![cache])
    }

    /// Graceful stop: in-flight attempts finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
    }

    /// Replays every trace file with the core; returns how many replayed.
    pub fn replay_traces(&self) -> usize {
        let mut n = 0;
        for e in std::fs::read_dir(&self.trace_dir)
            .expect("trace dir")
            .flatten()
        {
            let text = std::fs::read_to_string(e.path()).unwrap();
            if let Err(d) = opm_core::trace::replay(text.lines()) {
                panic!("trace {} does not replay: {d}", e.path().display());
            }
            n += 1;
        }
        n
    }

    /// Every trace line written so far.
    pub fn traces(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(&self.trace_dir) {
            for e in rd.flatten() {
                out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
        out
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The built `opm-operator run` binary as its own process, with the same scoping and tools
/// as [`Operator`]: for tests that must SIGKILL it (no destructor, no graceful anything).
pub struct OperatorProcess {
    child: tokio::process::Child,
    _dirs: Vec<tempfile::TempDir>,
}

impl OperatorProcess {
    pub async fn spawn(env: &TestEnv, ns: &str) -> OperatorProcess {
        let registry = CueRegistry::global().await;
        let cache = tempfile::tempdir().expect("tempdir");
        let traces = tempfile::tempdir().expect("tempdir");
        let trace_dir = e2e_trace_dir(ns).unwrap_or_else(|| traces.path().to_path_buf());
        let cue = opm_testenv::tools::cue_bin().expect("cue binary");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .arg("run")
            .args(["--watch-label-selector", &format!("{TEST_LABEL}={ns}")])
            .args(["--allow-operator-identity", "on", "--concurrency", "4"])
            .args(["--metrics-bind-address", "0"])
            .args(["--health-probe-bind-address", "0"])
            .arg("--cue-binary")
            .arg(cue)
            .args(["--cue-registry", &registry.registry()])
            .arg("--cache-dir")
            .arg(cache.path())
            .arg("--trace-dir")
            .arg(&trace_dir)
            .env("KUBECONFIG", env.kubeconfig_path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn opm-operator run");
        OperatorProcess {
            child,
            _dirs: vec![cache, traces],
        }
    }

    /// SIGKILL, and reaped: the process is gone when this returns.
    pub async fn sigkill(mut self) {
        self.child.kill().await.expect("SIGKILL the operator");
    }
}

/// A ModuleRelease of the example module, labelled for this test's operator.
///
/// `wait` is false unless `extra_spec` says otherwise: the test cluster runs no workload
/// controllers, so the example's Deployment never rolls out, and these tests are about
/// something else than health (SPEC §26).
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

/// A Release of source `source` (OCIRepository) at `path` (`wait` false by default, as
/// [`module_release`]).
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

/// Merge-patches the spec (or metadata) of a release of either kind.
pub async fn patch_mr(client: &Client, ns: &str, name: &str, patch: Value) {
    Api::<ModuleRelease>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch ModuleRelease");
}

pub async fn patch_rel(client: &Client, ns: &str, name: &str, patch: Value) {
    Api::<Release>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch Release");
}

pub fn condition<'a>(s: &'a ReleaseStatus, t: &str) -> Option<&'a opm_core::api::Condition> {
    s.conditions.iter().find(|c| c.type_ == t)
}

/// (status, reason) of Ready.
pub fn ready(s: &ReleaseStatus) -> (String, String) {
    condition(s, "Ready")
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

/// Polls until `pred` holds for the ModuleRelease's status; panics with the last status.
pub async fn wait_mr(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&ModuleRelease) -> bool,
) -> ModuleRelease {
    let api = Api::<ModuleRelease>::namespaced(client.clone(), ns);
    let start = Instant::now();
    loop {
        let last = api.get_opt(name).await.expect("get");
        if let Some(o) = &last
            && pred(o)
        {
            return o.clone();
        }
        if start.elapsed() > WAIT {
            panic!(
                "timed out waiting for {what}; last status: {}",
                serde_json::to_string_pretty(&last.and_then(|o| o.status)).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn wait_rel(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&Release) -> bool,
) -> Release {
    let api = Api::<Release>::namespaced(client.clone(), ns);
    let start = Instant::now();
    loop {
        let last = api.get_opt(name).await.expect("get");
        if let Some(o) = &last
            && pred(o)
        {
            return o.clone();
        }
        if start.elapsed() > WAIT {
            panic!(
                "timed out waiting for {what}; last status: {}",
                serde_json::to_string_pretty(&last.and_then(|o| o.status)).unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls until the async check returns true.
pub async fn eventually<F, Fut>(what: &str, f: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !f().await {
        if start.elapsed() > WAIT {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn is_ready_mr(o: &ModuleRelease) -> bool {
    o.status.as_ref().is_some_and(|s| {
        ready(s).0 == "True" && s.observed_generation == o.metadata.generation.unwrap_or(0)
    })
}

pub fn is_ready_rel(o: &Release) -> bool {
    o.status.as_ref().is_some_and(|s| {
        ready(s).0 == "True" && s.observed_generation == o.metadata.generation.unwrap_or(0)
    })
}

pub fn reason_is_mr(reason: &'static str) -> impl Fn(&ModuleRelease) -> bool {
    move |o| o.status.as_ref().is_some_and(|s| ready(s).1 == reason)
}

pub fn reason_is_rel(reason: &'static str) -> impl Fn(&Release) -> bool {
    move |o| o.status.as_ref().is_some_and(|s| ready(s).1 == reason)
}

/// Events regarding the release `name` in `ns`, oldest first (by event time). Events of
/// other objects of that name (the workload controllers' events about a Deployment named
/// after its release, when the health suite has started them) are not the release's.
pub async fn events(client: &Client, ns: &str, name: &str) -> Vec<KEvent> {
    let mut evs: Vec<KEvent> = Api::<KEvent>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.name.as_deref() == Some(name)
                    && r.api_version
                        .as_deref()
                        .is_some_and(|v| v.starts_with("releases.opmodel.dev/"))
            })
        })
        .collect();
    evs.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    evs
}

/// [`events`] once every reason in `want` is among them: an attempt publishes its events
/// while its status patch is in flight, so they may land just after the status shows.
pub async fn events_with(client: &Client, ns: &str, name: &str, want: &[&str]) -> Vec<KEvent> {
    let start = Instant::now();
    loop {
        let evs = events(client, ns, name).await;
        let rs = reasons(&evs);
        if want.iter().all(|w| rs.iter().any(|r| r == w)) {
            return evs;
        }
        if start.elapsed() > WAIT {
            panic!("timed out waiting for events {want:?} of {ns}/{name}; got {rs:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn reasons(evs: &[KEvent]) -> Vec<String> {
    evs.iter().filter_map(|e| e.reason.clone()).collect()
}

/// A release package artifact: `files` (path → contents) as tar.gz, served over HTTP, and
/// an OCIRepository named `source` advertising it.
pub struct Package {
    pub server: ArtifactServer,
}

impl Package {
    pub async fn start() -> Package {
        Package {
            server: ArtifactServer::start().await.expect("artifact server"),
        }
    }

    /// Serves `files` and points `source` (created when absent) at them.
    pub async fn publish(
        &self,
        client: &Client,
        ns: &str,
        source: &str,
        files: &[(&str, String)],
    ) -> Artifact {
        let entries: Vec<Entry> = files
            .iter()
            .map(|(p, c)| Entry::new(*p, c.as_bytes().to_vec()))
            .collect();
        let bytes = tar_gz(&entries).expect("tar.gz");
        self.publish_bytes(client, ns, source, bytes).await
    }

    /// Serves `bytes` as the artifact of `source` (created when absent).
    pub async fn publish_bytes(
        &self,
        client: &Client,
        ns: &str,
        source: &str,
        bytes: Vec<u8>,
    ) -> Artifact {
        let path = format!(
            "{ns}/{source}/{}.tar.gz",
            opm_testenv::archive::sha256_digest(&bytes)
        );
        let url = self.server.put(&path, bytes.clone());
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
        artifact
    }
}

/// A self-contained release package: `cue.mod/module.cue` + `release.cue` whose components
/// are `objects` (CUE/JSON text of a struct of components).
pub fn release_package(name: &str, components: &Value) -> Vec<(&'static str, String)> {
    vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        (
            "release.cue",
            format!(
                "package release\n\nkind: \"ModuleRelease\"\nmetadata: {{name: \"{name}\", namespace: \"default\"}}\ncomponents: {}\n",
                serde_json::to_string_pretty(components).unwrap()
            ),
        ),
    ]
}

/// A ConfigMap manifest.
pub fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// Publishes `components` and creates a Release of them with `wait` on and `spec`.
pub async fn release_of(
    ns: &opm_testenv::TestNamespace,
    pkg: &Package,
    name: &str,
    components: Value,
    spec: Value,
) {
    let src = format!("{name}-src");
    pkg.publish(
        &ns.client,
        &ns.name,
        &src,
        &release_package(name, &components),
    )
    .await;
    let mut extra = json!({"wait": true});
    if let (Some(e), Value::Object(s)) = (extra.as_object_mut(), spec) {
        e.extend(s);
    }
    create_rel(&ns.client, &release(&ns.name, name, &src, ".", extra)).await;
}
