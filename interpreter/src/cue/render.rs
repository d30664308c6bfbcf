//! The CUE renderer (DESIGN §3, SPEC §18): runs the pinned `cue` binary as a child process with
//! a deadline and output caps, and turns its result into typed data.
//!
//! `cue` exits 1 on every failure, so this is the one place where its stderr is read and
//! classified; everything downstream matches on [`RenderError`] variants.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::OnceCell;

use crate::cue::module_ref::{ModuleRef, ReleaseIdentity, synthesise_release};
pub use crate::cue::rendered::Rendered;

/// Default deadline of one `cue` run (SPEC §18).
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on `cue`'s stdout (the exported JSON): `--max-render-bytes` (SPEC §24).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = opm_core::config::DEFAULT_MAX_RENDER_BYTES as usize;
/// `--max-concurrent-renders` (SPEC §24): `cue` runs at once; the others wait their turn.
pub const DEFAULT_MAX_CONCURRENT_RENDERS: usize = 2;
/// `--render-memory-limit` (SPEC §24): memory of one `cue` run.
pub const DEFAULT_RENDER_MEMORY_LIMIT: u64 = 1024 * 1024 * 1024;
/// Address space a `cue` run may reserve beyond its memory limit. Go reserves address
/// space it never touches: with `cue` v0.17.1 a trivial export does not start under a
/// 768 MiB `RLIMIT_AS` (page-allocator summaries, thread stacks, glibc arenas), and under
/// limit + 1.5 GiB a memory bomb dies with `fatal error: out of memory` at about the
/// limit of resident memory (measured: 1.0-1.25 GiB with a 1 GiB limit). `GOMEMLIMIT`
/// set to the limit makes the collector work to stay below it first.
pub const ADDRESS_SPACE_HEADROOM: u64 = 1536 * 1024 * 1024;
/// Stderr kept for messages; the rest is read and dropped so the child never blocks.
pub const DEFAULT_MAX_STDERR_BYTES: usize = 8 * 1024;
/// Lines of `cue`'s stderr kept in an error message: the first ones name the field.
const MESSAGE_LINES: usize = 12;
/// Bytes of exported JSON the render cache keeps (least recently used first out): a
/// thousand ModuleReleases of a small module take a few MB, so every unchanged release of
/// a large fleet is answered without a `cue` run.
const RENDER_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// How the renderer runs `cue`.
#[derive(Debug, Clone)]
pub struct RenderConfig {
    pub cue_binary: PathBuf,
    /// `CUE_REGISTRY` for the child (e.g. `127.0.0.1:5000+insecure`); inherited when `None`.
    pub registry: Option<String>,
    /// `CUE_CACHE_DIR` for the child; inherited when `None`.
    pub cue_cache_dir: Option<PathBuf>,
    pub timeout: Duration,
    pub max_output_bytes: usize,
    pub max_stderr_bytes: usize,
    /// `cue` runs at once (at least 1); further renders wait for a turn.
    pub max_concurrent: usize,
    /// `GOMEMLIMIT` and, plus [`ADDRESS_SPACE_HEADROOM`], `RLIMIT_AS` of each run;
    /// `None` runs `cue` unlimited.
    pub memory_limit: Option<u64>,
}

impl RenderConfig {
    pub fn new(cue_binary: impl Into<PathBuf>) -> Self {
        Self {
            cue_binary: cue_binary.into(),
            registry: None,
            cue_cache_dir: None,
            timeout: DEFAULT_RENDER_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_concurrent: DEFAULT_MAX_CONCURRENT_RENDERS,
            memory_limit: Some(DEFAULT_RENDER_MEMORY_LIMIT),
        }
    }
}

/// Why a render failed; [`crate::effects::local::render_error`] maps it to the core's typed error,
/// and the core picks the SPEC §4 row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The module or a dependency cannot be resolved (unknown version, bad module reference).
    #[error("module resolution failed: {message}")]
    Resolution { message: String },
    /// The registry could not be reached; may recover on its own.
    #[error("CUE registry unreachable: {message}")]
    RegistryUnreachable { message: String },
    #[error("cue did not finish within {}s", after.as_secs_f64())]
    Timeout { after: Duration },
    /// CUE evaluation failed: values do not satisfy `#config`, conflicts, incomplete values.
    #[error("CUE evaluation failed: {message}")]
    Evaluation { message: String },
    /// The exported value is not a `ModuleRelease`.
    #[error("unsupported kind {}: expected ModuleRelease", kind.as_deref().map_or("(none)".to_owned(), |k| format!("{k:?}")))]
    UnsupportedKind { kind: Option<String> },
    /// The exported value is not JSON of the expected shape.
    #[error("invalid render output: {message}")]
    InvalidOutput { message: String },
    /// More than `limit` bytes arrived on stdout: reading stopped and `cue` was killed, so
    /// only a lower bound of the size is known.
    #[error("cue output is more than {bytes_at_least} bytes; the cap is {limit}")]
    OutputTooLarge { bytes_at_least: u64, limit: usize },
    /// `cue` died of its memory limit (`fatal error: out of memory`, or killed).
    #[error("cue ran out of memory under its limit of {limit} bytes")]
    OutOfMemory { limit: u64 },
    /// `cue` could not be started or a temporary directory could not be made: an operator
    /// installation problem, retried with backoff until it is fixed.
    #[error("cannot run cue: {message}")]
    Io { message: String },
}

/// Classifies a failed `cue` run by its stderr. Message texts are pinned by tests against the
/// real binary, so an upgrade that changes them fails loudly.
///
/// An evaluation error quotes values, and a value may be a secret (SPEC §23): its quoted
/// strings are redacted. Resolution and registry errors quote module paths and registry
/// URLs from the spec and the flags, which stay readable.
pub fn classify_stderr(stderr: &str) -> RenderError {
    let message = first_lines(stderr);
    if stderr.contains("cannot fetch") && crate::cue::registry_auth::says_refused(stderr) {
        // 401/403 on a module pull: not an evaluation error, and not transient.
        RenderError::Resolution {
            message: format!(
                "the registry refused the module pull (no or wrong credentials; see spec.module.secretRef): {message}"
            ),
        }
    } else if is_registry_unreachable(stderr) {
        RenderError::RegistryUnreachable { message }
    } else if RESOLUTION.iter().any(|p| stderr.contains(p)) {
        RenderError::Resolution { message }
    } else {
        RenderError::Evaluation {
            message: crate::cue::redact::cue_message(&message),
        }
    }
}

/// The registry could not be asked, or answered with a server-side error: both may pass.
fn is_registry_unreachable(stderr: &str) -> bool {
    const NETWORK: [&str; 4] = [
        "cannot do HTTP request",
        "connection refused",
        "no such host",
        "i/o timeout",
    ];
    const SERVER: [&str; 5] = [
        "429 Too Many Requests",
        "500 Internal Server Error",
        "502 Bad Gateway",
        "503 Service Unavailable",
        "504 Gateway Timeout",
    ];
    NETWORK.iter().any(|p| stderr.contains(p))
        || (stderr.contains("cannot fetch") && SERVER.iter().any(|p| stderr.contains(p)))
}

/// A module, version or package that does not exist, or a module file that can never resolve.
const RESOLUTION: [&str; 4] = [
    "module not found",
    "cannot find module providing package",
    "invalid module file",
    "mismatched major version",
];

fn first_lines(s: &str) -> String {
    let lines: Vec<&str> = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(MESSAGE_LINES)
        .collect();
    let msg = lines.join("\n");
    if msg.is_empty() {
        "cue failed without a message".to_owned()
    } else {
        msg
    }
}

/// Identifies a render by its inputs (DESIGN §2): same inputs, same output, no CUE run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RenderKey {
    pub source_digest: String,
    pub config_digest: String,
    pub path: String,
    pub cue_version: String,
}

/// Counters for metrics (SPEC §21 cache hits) and tests.
#[derive(Debug, Default)]
pub struct RenderStats {
    /// `cue export` runs started.
    pub runs: AtomicU64,
    /// Renders served from the render cache.
    pub cache_hits: AtomicU64,
    /// `cue` runs that had to wait for a turn (`--max-concurrent-renders`).
    pub queued: AtomicU64,
    /// Most `cue` runs seen at once.
    pub peak_running: AtomicU64,
}

/// Exported JSON by render inputs, with the tick of its last use.
/// `Arc<Vec<u8>>`, not `Arc<[u8]>`: the output of `cue` is kept without a second copy.
type RenderCache = BTreeMap<RenderKey, (Arc<Vec<u8>>, u64)>;

/// Runs `cue` and caches successful renders.
#[derive(Debug)]
pub struct Renderer {
    config: RenderConfig,
    cue_version: OnceCell<String>,
    /// The exported JSON by inputs (kept as bytes: a third of the parsed value's size), with
    /// the tick of its last use.
    cache: Mutex<RenderCache>,
    tick: AtomicU64,
    stats: RenderStats,
    /// Turns of `cue` (SPEC §24 `--max-concurrent-renders`); waiting renders queue here.
    turns: tokio::sync::Semaphore,
    running: AtomicU64,
}

impl Renderer {
    pub fn new(config: RenderConfig) -> Self {
        Self {
            turns: tokio::sync::Semaphore::new(config.max_concurrent.max(1)),
            running: 0.into(),
            config,
            cue_version: OnceCell::new(),
            cache: Mutex::new(BTreeMap::new()),
            tick: 0.into(),
            stats: RenderStats::default(),
        }
    }

    pub fn stats(&self) -> &RenderStats {
        &self.stats
    }

    pub fn config(&self) -> &RenderConfig {
        &self.config
    }

    /// `cue version`'s version string (e.g. `v0.17.1`), asked once.
    pub async fn cue_version(&self) -> Result<String, RenderError> {
        self.cue_version
            .get_or_try_init(|| async {
                let out = tokio::time::timeout(
                    self.config.timeout,
                    tokio::process::Command::new(&self.config.cue_binary)
                        .arg("version")
                        .stdin(Stdio::null())
                        .kill_on_drop(true)
                        .output(),
                )
                .await
                .map_err(|_| RenderError::Timeout {
                    after: self.config.timeout,
                })?
                .map_err(|e| self.spawn_error(e))?;
                let text = String::from_utf8_lossy(&out.stdout);
                text.lines()
                    .find_map(|l| l.strip_prefix("cue version "))
                    .map(|v| v.trim().to_owned())
                    .ok_or_else(|| RenderError::Io {
                        message: format!("unexpected `cue version` output: {}", first_lines(&text)),
                    })
            })
            .await
            .cloned()
    }

    /// Exports the release package in `dir` (its module root is found by `cue`).
    pub async fn render_package(&self, dir: &Path) -> Result<Rendered, RenderError> {
        let out = self.export(dir).await?;
        Rendered::from_json(&out)
    }

    /// Synthesises the release package for `module` with `values` and exports it.
    pub async fn render_module(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
    ) -> Result<Rendered, RenderError> {
        Rendered::from_json(&self.export_module(module, values, identity).await?)
    }

    /// [`Self::render_module`]'s `cue` output.
    async fn export_module(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
    ) -> Result<Vec<u8>, RenderError> {
        self.export_module_with(module, values, identity, None)
            .await
    }

    async fn export_module_with(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<Vec<u8>, RenderError> {
        let files = synthesise_release(module, values, identity)?;
        let dir = tempfile::Builder::new()
            .prefix("opm-release-")
            .tempdir()
            .map_err(|e| RenderError::Io {
                message: format!("temporary directory: {e}"),
            })?;
        let write = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(p, text)
        };
        write("cue.mod/module.cue", &files.module_cue)
            .and_then(|()| write("release.cue", &files.release_cue))
            .map_err(|e| RenderError::Io {
                message: format!("writing release package: {e}"),
            })?;
        match credentials {
            None => self.export(dir.path()).await,
            Some((digest, bytes)) => {
                let auth =
                    crate::cue::registry_auth::PrivateDockerConfig::new(bytes).map_err(|e| {
                        RenderError::Io {
                            message: format!("private Docker config: {e}"),
                        }
                    })?;
                let cache = self
                    .config
                    .cue_cache_dir
                    .as_ref()
                    .map(|c| crate::cue::registry_auth::cache_dir_for(c, digest));
                let env = auth.env(cache.as_deref());
                let out = self.export_env(dir.path(), &env).await;
                drop(auth);
                out.map_err(crate::cue::registry_auth::refused_credentials)
            }
        }
    }

    /// [`Self::render_package`] through the render cache. `source_digest` names the artifact
    /// and `spec_path` the directory inside it, so equal keys mean equal inputs.
    pub async fn render_package_cached(
        &self,
        source_digest: &str,
        spec_path: &str,
        dir: &Path,
    ) -> Result<Arc<Rendered>, RenderError> {
        let key = RenderKey {
            source_digest: source_digest.to_owned(),
            config_digest: String::new(),
            path: spec_path.to_owned(),
            cue_version: self.cue_version().await?,
        };
        self.cached(key, self.export(dir)).await
    }

    /// [`Self::render_module`] through the render cache. A published module version is
    /// immutable, so the module reference stands for the source digest.
    pub async fn render_module_cached(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
    ) -> Result<Arc<Rendered>, RenderError> {
        self.render_module_cached_with(module, values, identity, None)
            .await
    }

    /// [`Self::render_module_cached`] pulling with a Docker config (`digest`, bytes) of
    /// `module.secretRef` (SPEC §27). The cache key carries the credentials' digest, so a
    /// render made with one tenant's credentials never answers another's request.
    pub async fn render_module_cached_with(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<(String, Vec<u8>)>,
    ) -> Result<Arc<Rendered>, RenderError> {
        let mut config = serde_json::json!({
            "values": values,
            "name": identity.name,
            "namespace": identity.namespace,
            "package": module.package,
            "registry": self.config.registry,
        });
        if let Some((digest, _)) = &credentials {
            config["credentials"] = Value::String(digest.clone());
        }
        let key = RenderKey {
            source_digest: format!("module:{}@{}", module.path, module.version),
            config_digest: format!("sha256:{}", hex::encode(Sha256::digest(config.to_string()))),
            path: ".".to_owned(),
            cue_version: self.cue_version().await?,
        };
        self.cached(
            key,
            self.export_module_with(module, values, identity, credentials.as_ref()),
        )
        .await
    }

    async fn cached(
        &self,
        key: RenderKey,
        export: impl Future<Output = Result<Vec<u8>, RenderError>>,
    ) -> Result<Arc<Rendered>, RenderError> {
        use std::sync::atomic::Ordering::Relaxed;
        let hit = self.lock_cache().get_mut(&key).map(|(bytes, used)| {
            *used = self.tick.fetch_add(1, Relaxed);
            bytes.clone()
        });
        if let Some(bytes) = hit {
            self.stats.cache_hits.fetch_add(1, Relaxed);
            return Rendered::from_json(&bytes).map(Arc::new);
        }
        let bytes = Arc::new(export.await?);
        // Only what passes the shape check is cached.
        let rendered = Arc::new(Rendered::from_json(&bytes)?);
        let mut cache = self.lock_cache();
        cache.insert(key, (bytes, self.tick.fetch_add(1, Relaxed)));
        let mut total: usize = cache.values().map(|(b, _)| b.len()).sum();
        while total > RENDER_CACHE_BYTES && cache.len() > 1 {
            let oldest = cache
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone());
            match oldest.and_then(|k| cache.remove(&k)) {
                Some((b, _)) => total -= b.len(),
                None => break,
            }
        }
        Ok(rendered)
    }

    /// Number of cached renders.
    pub fn cached_renders(&self) -> usize {
        self.lock_cache().len()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, RenderCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn spawn_error(&self, e: std::io::Error) -> RenderError {
        RenderError::Io {
            message: format!("{}: {e}", self.config.cue_binary.display()),
        }
    }

    /// `cue export . --out json` in `dir`, bounded by the deadline and the output caps.
    async fn export(&self, dir: &Path) -> Result<Vec<u8>, RenderError> {
        self.export_env(dir, &[]).await
    }

    /// [`Self::export`] with extra environment for the child (set last, so they win).
    async fn export_env(
        &self,
        dir: &Path,
        env: &[(String, std::ffi::OsString)],
    ) -> Result<Vec<u8>, RenderError> {
        let mut cmd = tokio::process::Command::new(&self.config.cue_binary);
        cmd.args(["export", ".", "--out", "json"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(r) = &self.config.registry {
            cmd.env("CUE_REGISTRY", r);
        }
        if let Some(c) = &self.config.cue_cache_dir {
            cmd.env("CUE_CACHE_DIR", c);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(limit) = self.config.memory_limit {
            crate::cue::cue_limits::limit_memory(&mut cmd, limit);
        }
        if !dir.is_dir() {
            return Err(RenderError::Io {
                message: format!("{} is not a directory", dir.display()),
            });
        }
        let _turn = match self.turns.try_acquire() {
            Ok(t) => t,
            Err(_) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(dir = %dir.display(), "waiting for a cue turn (--max-concurrent-renders)");
                self.turns.acquire().await.map_err(|_| RenderError::Io {
                    message: "renderer closed".into(),
                })?
            }
        };
        let _running = Running::enter(&self.running, &self.stats.peak_running);
        let started = std::time::Instant::now();
        self.stats.runs.fetch_add(1, Ordering::Relaxed);
        let mut child = cmd.spawn().map_err(|e| self.spawn_error(e))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(RenderError::Io {
                message: "cue stdio was not captured".into(),
            });
        };
        let stderr_cap = self.config.max_stderr_bytes;
        let stderr_task = tokio::spawn(read_head(stderr, stderr_cap));
        let out_cap = self.config.max_output_bytes;
        let run = async {
            let out = read_capped(stdout, out_cap).await;
            let status = if out.is_ok() {
                child.wait().await.ok()
            } else {
                None
            };
            (out, status)
        };
        let result = tokio::time::timeout(self.config.timeout, run).await;
        let (out, status) = match result {
            Err(_) => {
                let _ = child.kill().await;
                stderr_task.abort();
                return Err(RenderError::Timeout {
                    after: self.config.timeout,
                });
            }
            Ok((Err(seen), _)) => {
                let _ = child.kill().await;
                stderr_task.abort();
                return Err(RenderError::OutputTooLarge {
                    bytes_at_least: seen as u64,
                    limit: out_cap,
                });
            }
            Ok((Ok(out), status)) => (out, status),
        };
        let stderr = stderr_task.await.unwrap_or_default();
        tracing::debug!(dir = %dir.display(), elapsed_ms = started.elapsed().as_millis() as u64, "cue export finished");
        match status {
            Some(s) if s.success() => Ok(out),
            Some(s) => {
                let stderr = String::from_utf8_lossy(&stderr);
                match self.config.memory_limit {
                    Some(limit) if crate::cue::cue_limits::died_of_memory(&s, &stderr) => {
                        tracing::warn!(dir = %dir.display(), limit, "cue ran out of memory");
                        Err(RenderError::OutOfMemory { limit })
                    }
                    _ => Err(classify_stderr(&stderr)),
                }
            }
            None => Err(RenderError::Io {
                message: "waiting for cue failed".into(),
            }),
        }
    }
}

/// Counts a running `cue` for [`RenderStats::peak_running`] until dropped.
struct Running<'a>(&'a AtomicU64);

impl<'a> Running<'a> {
    fn enter(running: &'a AtomicU64, peak: &AtomicU64) -> Self {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        Self(running)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Reads everything, or stops once more than `cap` bytes arrived and returns how many had
/// (the buffer never grows past the cap, whatever `cue` writes).
async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize) -> Result<Vec<u8>, usize> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return Ok(out),
            Ok(n) => {
                if out.len() + n > cap {
                    return Err(out.len() + n);
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}

/// Keeps the first `cap` bytes and drains the rest.
async fn read_head(mut r: impl AsyncRead + Unpin, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => {
                let keep = n.min(cap.saturating_sub(out.len()));
                out.extend_from_slice(&buf[..keep]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::local::Verdict;
    use opm_core::outcome::FailureClass;

    #[test]
    fn stderr_classification() {
        let not_found = "x: import failed: cannot fetch a@v0.9.9: module a@v0.9.9: module not found:\n    ./release.cue:3:8\n";
        assert!(matches!(
            classify_stderr(not_found),
            RenderError::Resolution { .. }
        ));
        let unreachable = "cannot fetch a@v0.2.1: module a@v0.2.1: cannot do HTTP request: Get \"http://127.0.0.1:1/v2\": dial tcp 127.0.0.1:1: connect: connection refused:";
        let e = classify_stderr(unreachable);
        assert!(matches!(e, RenderError::RegistryUnreachable { .. }));
        assert_eq!(
            (e.class(), e.reason()),
            (FailureClass::Transient, opm_core::Reason::RenderFailed)
        );
        let no_module = "x: import failed: cannot find package \"foo.example/bar\": cannot find module providing package foo.example/bar:";
        assert_eq!(classify_stderr(no_module).reason(), "ResolutionFailed");
        let server = "cannot fetch a@v0.2.1: module a@v0.2.1: 503 Service Unavailable: non-JSON error response";
        assert!(matches!(
            classify_stderr(server),
            RenderError::RegistryUnreachable { .. }
        ));
        let value = "x: conflicting values \"503 Service Unavailable\" and 1";
        assert!(matches!(
            classify_stderr(value),
            RenderError::Evaluation { .. }
        ));
        let major = "invalid module file /t/cue.mod/module.cue: cannot make version: mismatched major version suffix";
        assert_eq!(classify_stderr(major).reason(), "ResolutionFailed");
        let eval = "_m.#config.replicas: conflicting values \"x\" and int (mismatched types string and int):\n    ./release.cue:5:5\n";
        let e = classify_stderr(eval);
        assert_eq!(
            e,
            RenderError::Evaluation {
                message: eval.trim_end().replace("\"x\"", "\"<redacted>\"")
            }
        );
        assert_eq!(
            (e.class(), e.reason()),
            (FailureClass::Stalled, opm_core::Reason::RenderFailed)
        );
    }

    #[test]
    fn long_stderr_is_cut_to_the_first_lines() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let RenderError::Evaluation { message } = classify_stderr(&text) else {
            panic!()
        };
        assert_eq!(message.lines().count(), MESSAGE_LINES);
        assert!(message.starts_with("line 0\n"));
    }

    /// The executable is written by a child process (`install`), never through a file
    /// descriptor of this multi-threaded test process: a descriptor inherited by a concurrent
    /// fork would make the exec fail with ETXTBSY.
    fn fake_cue(dir: &Path, script: &str) -> PathBuf {
        let src = dir.join("fake-cue.txt");
        std::fs::write(&src, format!("#!/bin/sh\n{script}\n")).unwrap();
        let p = dir.join("fake-cue");
        let ok = std::process::Command::new("install")
            .args(["-m", "755"])
            .arg(&src)
            .arg(&p)
            .status()
            .unwrap();
        assert!(ok.success());
        p
    }

    #[tokio::test]
    async fn a_slow_cue_is_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = RenderConfig::new(fake_cue(dir.path(), "sleep 30"));
        cfg.timeout = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let err = Renderer::new(cfg)
            .render_package(dir.path())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            RenderError::Timeout {
                after: Duration::from_millis(300)
            }
        );
        assert_eq!(err.class(), FailureClass::Transient);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn output_over_the_cap_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = RenderConfig::new(fake_cue(dir.path(), "yes '{}' | head -c 1000000"));
        cfg.max_output_bytes = 10_000;
        let err = Renderer::new(cfg)
            .render_package(dir.path())
            .await
            .unwrap_err();
        let RenderError::OutputTooLarge {
            bytes_at_least,
            limit,
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(limit, 10_000);
        assert!(
            bytes_at_least > 10_000 && bytes_at_least <= 10_000 + 64 * 1024,
            "{bytes_at_least}"
        );
    }

    #[tokio::test]
    async fn stderr_of_a_failing_run_is_classified_and_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let script = "echo 'a.b: conflicting values 1 and 2' >&2; head -c 100000 /dev/zero | tr '\\0' x >&2; exit 1";
        let mut cfg = RenderConfig::new(fake_cue(dir.path(), script));
        cfg.max_stderr_bytes = 64;
        let err = Renderer::new(cfg)
            .render_package(dir.path())
            .await
            .unwrap_err();
        let RenderError::Evaluation { message } = err else {
            panic!("{err:?}")
        };
        assert!(
            message.starts_with("a.b: conflicting values 1 and 2"),
            "{message}"
        );
        assert!(message.len() <= 64, "{}", message.len());
    }

    #[tokio::test]
    async fn a_successful_run_with_garbage_output_is_invalid_output() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RenderConfig::new(fake_cue(dir.path(), "echo 'not json'"));
        let err = Renderer::new(cfg)
            .render_package(dir.path())
            .await
            .unwrap_err();
        assert!(matches!(err, RenderError::InvalidOutput { .. }), "{err:?}");
        assert_eq!(
            (err.class(), err.reason()),
            (FailureClass::Stalled, opm_core::Reason::RenderFailed)
        );
    }

    #[tokio::test]
    async fn at_most_max_concurrent_cue_runs_at_once_the_rest_queue() {
        let dir = tempfile::tempdir().unwrap();
        let script = "sleep 0.3; echo '{\"kind\":\"ModuleRelease\",\"components\":{}}'";
        let mut cfg = RenderConfig::new(fake_cue(dir.path(), script));
        cfg.max_concurrent = 2;
        let r = Renderer::new(cfg);
        let renders = (0..5).map(|_| r.render_package(dir.path()));
        for res in futures::future::join_all(renders).await {
            res.unwrap();
        }
        let s = r.stats();
        assert_eq!(s.runs.load(Ordering::Relaxed), 5);
        assert_eq!(s.peak_running.load(Ordering::Relaxed), 2);
        assert!(s.queued.load(Ordering::Relaxed) >= 3);
    }

    #[tokio::test]
    async fn cue_gets_gomemlimit_and_an_address_space_limit() {
        let dir = tempfile::tempdir().unwrap();
        let script = "echo \"$GOMEMLIMIT $(ulimit -v)\" >&2; exit 1";
        let mut cfg = RenderConfig::new(fake_cue(dir.path(), script));
        cfg.memory_limit = Some(1 << 30);
        let err = Renderer::new(cfg)
            .render_package(dir.path())
            .await
            .unwrap_err();
        let kib = crate::cue::cue_limits::address_space_for(1 << 30) / 1024;
        assert_eq!(
            err,
            RenderError::Evaluation {
                message: format!("{} {kib}", 1u64 << 30)
            }
        );
    }

    #[tokio::test]
    async fn a_missing_binary_is_a_transient_spawn_error() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RenderConfig::new(dir.path().join("no-such-cue"));
        let err = Renderer::new(cfg)
            .render_package(dir.path())
            .await
            .unwrap_err();
        assert!(matches!(err, RenderError::Io { .. }), "{err:?}");
        assert_eq!(err.class(), FailureClass::Transient);
    }
}
