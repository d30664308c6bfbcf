//! One real API server per test binary, started lazily by the first test that asks.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tokio::sync::OnceCell;

use crate::crds;
use crate::error::{Error, Result};
use crate::process::{self, ManagedPid};
use crate::tools;

const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The Go program bounds its own shutdown at 20s; leave it a little more.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

static GLOBAL: OnceCell<TestEnv> = OnceCell::const_new();

/// The process-wide test cluster: a real kube-apiserver (with embedded etcd) with the
/// Flux source CRDs installed.
///
/// Clients are cheap and tied to the tokio runtime that built them, and every
/// `#[tokio::test]` has its own runtime, so the environment hands out a fresh
/// [`Client`] per call instead of sharing one.
#[derive(Debug)]
pub struct TestEnv {
    config: Config,
    kubeconfig: PathBuf,
    log: PathBuf,
    pid: ManagedPid,
    startup: Duration,
    namespaces: AtomicU64,
}

/// A fresh namespace for one test, with an admin client.
#[derive(Clone)]
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
}

impl TestEnv {
    /// The shared environment; panics with the reason (e.g. "run ./tools/install") when
    /// it cannot be started.
    pub async fn global() -> &'static TestEnv {
        match Self::try_global().await {
            Ok(env) => env,
            Err(e) => panic!("opm-testenv: cannot start the test API server: {e}"),
        }
    }

    /// Like [`TestEnv::global`], returning the error instead of panicking.
    pub async fn try_global() -> Result<&'static TestEnv> {
        GLOBAL.get_or_try_init(Self::start).await
    }

    async fn start() -> Result<TestEnv> {
        let bin = tools::apiserver_bin()?;
        // Fail before starting anything when the CRDs are missing too.
        let flux = crds::flux_source_crds()?;
        let dir = tempfile::Builder::new()
            .prefix("opm-testenv-")
            .tempdir()
            .map_err(|e| Error::io("create temp dir", e))?;
        let kubeconfig = dir.path().join("kubeconfig");
        let log = dir.path().join("apiserver.log");
        let out = File::create(&log).map_err(|e| Error::io("create log file", e))?;
        let err = out
            .try_clone()
            .map_err(|e| Error::io("clone log file", e))?;
        let mut cmd = Command::new(&bin);
        // The server removes the whole directory itself when it exits, even when this
        // process is killed and cannot.
        cmd.arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--remove-data-dir")
            .arg("--watch-stdin")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        let begun = Instant::now();
        let pid = process::spawn_managed("opm-test-apiserver", cmd, SHUTDOWN_GRACE, Some(dir))
            .map_err(|e| Error::io(format!("start {}", bin.display()), e))?;
        wait_for_file(&kubeconfig, pid, &log).await?;
        let startup = begun.elapsed();
        tracing::info!(?startup, "test API server ready");

        let kc =
            Kubeconfig::read_from(&kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        let env = TestEnv {
            config,
            kubeconfig,
            log,
            pid,
            startup,
            namespaces: AtomicU64::new(0),
        };
        crds::install_crds(&env.client()?, flux).await?;
        Ok(env)
    }

    /// A copy of the admin client configuration (e.g. to impersonate from).
    pub fn config(&self) -> Config {
        self.config.clone()
    }

    /// A new admin client bound to the current tokio runtime.
    pub fn client(&self) -> Result<Client> {
        Ok(Client::try_from(self.config())?)
    }

    /// A client that acts as ServiceAccount `ns/sa` (see [`crate::rbac`]).
    pub fn impersonating_client(&self, sa: &str, ns: &str) -> Result<Client> {
        crate::rbac::impersonating_client(&self.config, sa, ns)
    }

    /// Creates a fresh, uniquely named namespace.
    pub async fn namespace(&self) -> Result<TestNamespace> {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        let name = format!("opm-test-{n}");
        let client = self.client()?;
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        Ok(TestNamespace { name, client })
    }

    /// The admin kubeconfig written by the server (valid while the process lives).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's log, for diagnosing a failing test.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// How long the server took from spawn to `/readyz` ok.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// The server's base URL.
    pub fn server_url(&self) -> String {
        self.config.cluster_url.to_string()
    }

    /// Whether the API server process is still running.
    pub fn is_running(&self) -> bool {
        process::exit_status(self.pid).is_none()
    }
}

impl TestNamespace {
    /// A namespaced API handle in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

async fn wait_for_file(path: &Path, pid: ManagedPid, log: &Path) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if path.exists() {
            return Ok(());
        }
        if let Some(status) = process::exit_status(pid) {
            return Err(Error::NotReady(format!(
                "exited with {status}; log tail:\n{}",
                log_tail(log)
            )));
        }
        if Instant::now() >= deadline {
            let tail = log_tail(log);
            process::terminate(pid);
            return Err(Error::NotReady(format!(
                "no kubeconfig after {}s; log tail:\n{tail}",
                READY_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
