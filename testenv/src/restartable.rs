//! An API server of its own that a chaos test may SIGKILL and start again on the same etcd
//! data and the same port, while clients keep their configuration.
//!
//! `opm-test-apiserver` makes a new CA and admin token on every start, so clients built
//! from its kubeconfig would fail after a restart. This server is started with an extra
//! client CA of ours (`--client-ca-file`, the last occurrence of the flag wins), and clients
//! authenticate with a client certificate signed by it (user `chaos-admin`, group
//! `system:masters`) and skip verifying the serving certificate, which changes on restart.
//! Test-only: the keys are made with the `openssl` command.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{Error, Result};
use crate::process::{self, ManagedPid};
use crate::tools;

const READY_TIMEOUT: Duration = Duration::from_secs(120);
const SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

/// A kube-apiserver (+ etcd) that survives being killed: see the module docs.
#[derive(Debug)]
pub struct RestartableApiServer {
    bin: PathBuf,
    /// Removed by the server itself on its final, clean exit (`--remove-data-dir`).
    data: PathBuf,
    port: u16,
    kubeconfig: PathBuf,
    pid: Mutex<Option<ManagedPid>>,
    starts: Mutex<u32>,
}

impl RestartableApiServer {
    /// Makes the client credentials and starts the server on a free port.
    pub async fn start() -> Result<Self> {
        let bin = tools::apiserver_bin()?;
        let data = tempfile::Builder::new()
            .prefix("opm-chaos-apiserver-")
            .tempdir()
            .map_err(|e| Error::io("create temp dir", e))?
            .keep();
        let auth = data.join("chaos-auth");
        std::fs::create_dir_all(&auth).map_err(|e| Error::io("create auth dir", e))?;
        make_client_cert(&auth)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Error::io("pick a port", e))?
            .port();
        let kubeconfig = data.join("chaos-kubeconfig");
        write_kubeconfig(&kubeconfig, port, &auth)?;
        let server = RestartableApiServer {
            bin,
            data,
            port,
            kubeconfig,
            pid: Mutex::new(None),
            starts: Mutex::new(0),
        };
        server.spawn().await?;
        Ok(server)
    }

    /// A kubeconfig that stays valid across restarts (client certificate, no CA pinning).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server's URL (`https://127.0.0.1:<port>`), the same across restarts.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The kubeconfig with the client certificate and key inline (`client-certificate-data`,
    /// `client-key-data`), as a remote cluster's kubeconfig Secret holds it: nothing in it
    /// names a file.
    pub fn inline_kubeconfig(&self) -> Result<String> {
        let auth = self.data.join("chaos-auth");
        let b64 = |file: &str| -> Result<String> {
            let out = Command::new("openssl")
                .args(["base64", "-A", "-in"])
                .arg(auth.join(file))
                .output()
                .map_err(|e| Error::io("run openssl base64", e))?;
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        Ok(format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: remote-admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: remote-admin\ncurrent-context: remote\n",
            self.server_url(),
            b64("admin.crt")?,
            b64("admin.key")?
        ))
    }

    /// Client configuration read from [`Self::kubeconfig_path`].
    pub async fn config(&self) -> Result<Config> {
        let kc = Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Kubeconfig(e.to_string()))
    }

    /// A new admin client bound to the current tokio runtime.
    pub async fn client(&self) -> Result<Client> {
        Ok(Client::try_from(self.config().await?)?)
    }

    /// SIGKILLs the server (etcd dies with it, mid-write if it was writing).
    pub fn kill(&self) {
        if let Some(pid) = self.pid.lock().unwrap_or_else(|p| p.into_inner()).take() {
            process::kill_now(pid);
        }
    }

    /// Starts the server again on the same data and port; returns once `/readyz` is ok.
    pub async fn restart(&self) -> Result<Duration> {
        self.kill();
        let begun = Instant::now();
        self.spawn().await?;
        Ok(begun.elapsed())
    }

    /// How many times the server was started.
    pub fn starts(&self) -> u32 {
        *self.starts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The API server's log (appended across restarts).
    pub fn log_path(&self) -> PathBuf {
        self.data.join("chaos-apiserver.log")
    }

    async fn spawn(&self) -> Result<()> {
        let ready = self.data.join("server-kubeconfig");
        // A killed server leaves its kubeconfig behind; only a fresh one means ready.
        let _ = std::fs::remove_file(&ready);
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| Error::io("open log", e))?;
        let err = log.try_clone().map_err(|e| Error::io("clone log", e))?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig-out")
            .arg(&ready)
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--remove-data-dir")
            .arg("--secure-port")
            .arg(self.port.to_string())
            .arg(format!(
                "--apiserver-arg=--client-ca-file={}",
                self.data.join("chaos-auth/ca.crt").display()
            ))
            .arg("--watch-stdin")
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(err);
        let pid = process::spawn_managed("opm-chaos-apiserver", cmd, SHUTDOWN_GRACE, None)
            .map_err(|e| Error::io(format!("start {}", self.bin.display()), e))?;
        *self.pid.lock().unwrap_or_else(|p| p.into_inner()) = Some(pid);
        *self.starts.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let deadline = Instant::now() + READY_TIMEOUT;
        while !ready.exists() {
            if let Some(status) = process::exit_status(pid) {
                return Err(Error::NotReady(format!(
                    "exited with {status}; see {}",
                    self.log_path().display()
                )));
            }
            if Instant::now() >= deadline {
                return Err(Error::NotReady(format!(
                    "not ready after {}s; see {}",
                    READY_TIMEOUT.as_secs(),
                    self.log_path().display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

fn openssl(args: &[&str], dir: &Path) -> Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| Error::io("run openssl", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::NotReady(format!(
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// `ca.crt`, and `admin.crt`/`admin.key` signed by it for `chaos-admin` in `system:masters`.
fn make_client_cert(dir: &Path) -> Result<()> {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=opm-chaos-ca",
    ]);
    openssl(&ca, dir)?;
    let mut csr = vec!["req", "-new"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "admin.key",
        "-out",
        "admin.csr",
        "-subj",
        "/O=system:masters/CN=chaos-admin",
    ]);
    openssl(&csr, dir)?;
    // Extensions make it an X.509 v3 certificate: rustls refuses v1 client certificates.
    std::fs::write(
        dir.join("admin.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .map_err(|e| Error::io("write admin.ext", e))?;
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "admin.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "admin.crt",
            "-days",
            "2",
            "-extfile",
            "admin.ext",
        ],
        dir,
    )
}

fn write_kubeconfig(path: &Path, port: u16, auth: &Path) -> Result<()> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: chaos\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: chaos-admin\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: chaos\n  context:\n    cluster: chaos\n    user: chaos-admin\ncurrent-context: chaos\n",
        auth.join("admin.crt").display(),
        auth.join("admin.key").display()
    );
    std::fs::write(path, text).map_err(|e| Error::io("write kubeconfig", e))
}
