//! A real OCI registry for CUE modules: `cue mod registry` on a free 127.0.0.1 port, with
//! the example modules published to it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

use crate::error::{Error, Result};
use crate::process::{self, ManagedPid};
use crate::tools;

/// Versions at which every module under `examples/modules/` is published.
pub const EXAMPLE_VERSIONS: [&str; 2] = ["v0.2.0", "v0.2.1"];
/// The example module's path, as imported (`<path>:<package>`).
pub const WEB_MODULE: &str = "example.com/modules/web@v0";

const START_TIMEOUT: Duration = Duration::from_secs(30);

static GLOBAL: OnceCell<CueRegistry> = OnceCell::const_new();

/// A running `cue mod registry` (in-memory; one per test binary).
///
/// Every `cue` run against it should use [`CueRegistry::cache_dir`] as `CUE_CACHE_DIR`:
/// CUE caches modules by path and version, so a shared cache would keep serving what an
/// earlier run published under the same version.
#[derive(Debug)]
pub struct CueRegistry {
    host: String,
    cache: PathBuf,
    pid: ManagedPid,
}

impl CueRegistry {
    /// The shared registry with the example modules published at [`EXAMPLE_VERSIONS`];
    /// panics with the reason when it cannot be started.
    pub async fn global() -> &'static CueRegistry {
        match Self::try_global().await {
            Ok(r) => r,
            Err(e) => panic!("opm-testenv: cannot start the CUE registry: {e}"),
        }
    }

    /// Like [`CueRegistry::global`], returning the error.
    pub async fn try_global() -> Result<&'static CueRegistry> {
        GLOBAL
            .get_or_try_init(|| async {
                let registry = Self::start().await?;
                registry.publish_examples().await?;
                Ok(registry)
            })
            .await
    }

    async fn start() -> Result<CueRegistry> {
        let cue = tools::cue_bin()?;
        let port = free_port()?;
        let host = format!("127.0.0.1:{port}");
        let dir = tempfile::Builder::new()
            .prefix("opm-testenv-cue-")
            .tempdir()
            .map_err(|e| Error::io("create temp dir", e))?;
        let cache = dir.path().join("cache");
        let mut cmd = Command::new(&cue);
        cmd.args(["mod", "registry", &host])
            .env("CUE_CACHE_DIR", &cache)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let pid =
            process::spawn_managed("cue mod registry", cmd, Duration::from_secs(2), Some(dir))
                .map_err(|e| Error::io(format!("start {}", cue.display()), e))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if tokio::net::TcpStream::connect(&host).await.is_ok() {
                break;
            }
            if let Some(status) = process::exit_status(pid) {
                return Err(Error::NotReady(format!(
                    "cue mod registry exited with {status}"
                )));
            }
            if Instant::now() >= deadline {
                process::terminate(pid);
                return Err(Error::Timeout {
                    what: "cue mod registry to listen".into(),
                    secs: START_TIMEOUT.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Ok(CueRegistry { host, cache, pid })
    }

    /// Publishes every module under `examples/modules/` at each of [`EXAMPLE_VERSIONS`].
    async fn publish_examples(&self) -> Result<()> {
        let root = tools::examples_dir().join("modules");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
            .map_err(|e| Error::io(format!("read {}", root.display()), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("cue.mod/module.cue").is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            for version in EXAMPLE_VERSIONS {
                self.publish_versioned(&dir, version).await?;
            }
        }
        Ok(())
    }

    /// `CUE_REGISTRY` for this registry: `127.0.0.1:<port>+insecure` (plain HTTP).
    pub fn registry(&self) -> String {
        format!("{}+insecure", self.host)
    }

    /// `127.0.0.1:<port>`
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The `CUE_CACHE_DIR` to use with this registry.
    pub fn cache_dir(&self) -> &Path {
        &self.cache
    }

    /// The environment a `cue` command needs to resolve modules from this registry.
    pub fn cue_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CUE_REGISTRY", self.registry()),
            ("CUE_CACHE_DIR", self.cache.to_string_lossy().into_owned()),
        ]
    }

    /// Whether the registry process is still running.
    pub fn is_running(&self) -> bool {
        process::exit_status(self.pid).is_none()
    }

    /// Publishes the CUE module in `module_dir` at `version` as it is (`cue mod publish`
    /// runs on a temporary copy, so the source tree is never touched).
    pub async fn publish(&self, module_dir: &Path, version: &str) -> Result<()> {
        let copy = copy_to_temp(module_dir)?;
        self.publish_dir(copy.path(), version).await
    }

    /// Like [`CueRegistry::publish`], adding a file that sets the package's hidden
    /// `_version` field to `version`, so output rendered from it shows which version
    /// was resolved (the example module puts it in its ConfigMap).
    pub async fn publish_versioned(&self, module_dir: &Path, version: &str) -> Result<()> {
        let copy = copy_to_temp(module_dir)?;
        let package = root_package(copy.path())?;
        std::fs::write(
            copy.path().join("zz_published_version.cue"),
            format!("package {package}\n\n_version: \"{version}\"\n"),
        )
        .map_err(|e| Error::io("write version file", e))?;
        self.publish_dir(copy.path(), version).await
    }

    async fn publish_dir(&self, dir: &Path, version: &str) -> Result<()> {
        let output = tokio::process::Command::new(tools::cue_bin()?)
            .args(["mod", "publish", version])
            .current_dir(dir)
            .envs(self.cue_env())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| Error::io("run cue mod publish", e))?;
        if !output.status.success() {
            return Err(Error::Command {
                command: format!("cue mod publish {version} (in {})", dir.display()),
                status: output.status,
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            });
        }
        tracing::debug!(dir = %dir.display(), version, "published CUE module");
        Ok(())
    }
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("pick a port", e))?;
    Ok(l.local_addr()
        .map_err(|e| Error::io("pick a port", e))?
        .port())
}

/// The `package` clause of the first `.cue` file at the module root.
fn root_package(dir: &Path) -> Result<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("read {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cue"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| Error::io(format!("read {}", file.display()), e))?;
        if let Some(pkg) = text.lines().find_map(|l| l.trim().strip_prefix("package ")) {
            return Ok(pkg.trim().to_owned());
        }
    }
    Err(Error::Archive(format!(
        "no package clause in the .cue files of {}",
        dir.display()
    )))
}

/// A recursive copy of `src` into a new temporary directory.
pub fn copy_to_temp(src: &Path) -> Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("opm-testenv-copy-")
        .tempdir()
        .map_err(|e| Error::io("create temp dir", e))?;
    copy_dir(src, dir.path())?;
    Ok(dir)
}

/// Copies the regular files and directories under `src` into `dst`.
pub fn copy_dir(src: &Path, dst: &Path) -> Result<()> {
    std::fs::create_dir_all(dst).map_err(|e| Error::io(format!("create {}", dst.display()), e))?;
    for entry in
        std::fs::read_dir(src).map_err(|e| Error::io(format!("read {}", src.display()), e))?
    {
        let entry = entry.map_err(|e| Error::io(format!("read {}", src.display()), e))?;
        let ty = entry
            .file_type()
            .map_err(|e| Error::io(format!("stat {}", entry.path().display()), e))?;
        let to = dst.join(entry.file_name());
        if ty.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), &to)
                .map_err(|e| Error::io(format!("copy {}", entry.path().display()), e))?;
        }
    }
    Ok(())
}
