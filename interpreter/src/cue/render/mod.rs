//! The CUE renderer (DESIGN §3, SPEC §18): runs the pinned `cue` binary as a child process with
//! a deadline and output caps, and turns its result into typed data.
//!
//! - [`classify`]: `cue`'s stderr to a [`RenderError`];
//! - `child`: one `cue export` process, its limits and turn;
//! - `cache`: the render cache by [`RenderKey`];
//! - [`batch`] and `split`: many renders of one module version in one `cue` run (issue 18).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::OnceCell;

pub use crate::cue::cue_limits::ADDRESS_SPACE_HEADROOM;
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity, synthesise_release};
pub use crate::cue::render_error::RenderError;
pub use crate::cue::rendered::Rendered;

pub mod ahead;
pub mod batch;
#[cfg(test)]
mod batch_tests;
mod cache;
mod child;
pub mod classify;
mod gate;
mod opm_run;
pub mod split;
#[cfg(test)]
mod tests;

pub use ahead::Ahead;
pub(crate) use cache::RENDER_CACHE_BYTES;
use cache::RenderCache;
pub use cache::RenderKey;
pub use classify::classify_stderr;
use classify::first_lines;
pub use gate::{RenderGate, Ungated};

/// Default deadline of one `cue` run (SPEC §18).
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on `cue`'s stdout (the exported JSON): `--max-render-bytes` (SPEC §24).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = opm_core::config::DEFAULT_MAX_RENDER_BYTES as usize;
/// `--max-concurrent-renders` (SPEC §24): `cue` runs at once; the others wait their turn.
pub const DEFAULT_MAX_CONCURRENT_RENDERS: usize = 2;
/// `--render-memory-limit` (SPEC §24): memory of one `cue` run.
pub const DEFAULT_RENDER_MEMORY_LIMIT: u64 = 1024 * 1024 * 1024;
/// Stderr kept for messages; the rest is read and dropped so the child never blocks.
pub const DEFAULT_MAX_STDERR_BYTES: usize = 8 * 1024;
/// Most releases in one batched `cue` run ([`RenderConfig::max_batch`]): 16 releases of a
/// small module export in about the time of two single runs (bench/README.md), and the
/// batch stays far below one run's output cap and memory limit.
pub const DEFAULT_MAX_BATCH: usize = 16;

/// How the renderer runs `cue`.
#[derive(Debug, Clone)]
pub struct RenderConfig {
    /// The pinned `cue` binary (DESIGN §3).
    pub cue_binary: PathBuf,
    /// `CUE_REGISTRY` for the child (e.g. `127.0.0.1:5000+insecure`); inherited when `None`.
    pub registry: Option<String>,
    /// `CUE_CACHE_DIR` of runs without credentials, shared and bounded
    /// ([`crate::cue::cue_cache`]); inherited when `None`. Runs with credentials use a
    /// private cache of their own, removed with the run.
    pub cue_cache_dir: Option<PathBuf>,
    /// `--max-cue-cache-bytes`: the bound of the shared cache in `cue_cache_dir`.
    pub max_cue_cache_bytes: u64,
    /// `--render-timeout`: one run past it is killed and is a `Timeout`.
    pub timeout: Duration,
    /// `--max-render-bytes`: stdout read no further than this (SPEC §24).
    pub max_output_bytes: usize,
    /// Stderr kept for the message; the rest is drained.
    pub max_stderr_bytes: usize,
    /// `cue` runs at once (at least 1); further renders wait for a turn.
    pub max_concurrent: usize,
    /// `GOMEMLIMIT` and, plus [`ADDRESS_SPACE_HEADROOM`], `RLIMIT_AS` of each run;
    /// `None` runs `cue` unlimited.
    pub memory_limit: Option<u64>,
    /// Most module renders in one batched `cue` run ([`batch`]); 1 renders each alone.
    pub max_batch: usize,
}

impl RenderConfig {
    /// The defaults of SPEC §24 for this `cue` binary.
    pub fn new(cue_binary: impl Into<PathBuf>) -> Self {
        Self {
            cue_binary: cue_binary.into(),
            registry: None,
            cue_cache_dir: None,
            max_cue_cache_bytes: crate::cue::cue_cache::DEFAULT_MAX_CUE_CACHE_BYTES,
            timeout: DEFAULT_RENDER_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_concurrent: DEFAULT_MAX_CONCURRENT_RENDERS,
            memory_limit: Some(DEFAULT_RENDER_MEMORY_LIMIT),
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
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
    /// `cue` runs of batches of two or more releases ([`batch`]).
    pub batch_runs: AtomicU64,
    /// Releases answered by a batch run.
    pub batched: AtomicU64,
    /// Batch runs that failed, after which each member rendered alone.
    pub batch_fallbacks: AtomicU64,
    /// Releases rendered ahead of their attempts and cached ([`ahead`]).
    pub ahead: AtomicU64,
    /// `cue` runs of the OPM read-ahead: batches rendered in the background, no attempt
    /// waiting on them ([`crate::cue::opm::Prefetch`]).
    pub read_ahead_runs: AtomicU64,
    /// `cue mod get` runs learning a module version's dependencies (OPM or plain, SPEC
    /// §30): one per module version and process, never on a NoOp.
    pub probes: AtomicU64,
}

/// Runs `cue` and caches successful renders.
pub struct Renderer {
    config: RenderConfig,
    cue_version: OnceCell<String>,
    /// The exported JSON by inputs (kept as bytes: a third of the parsed value's size).
    cache: Mutex<RenderCache>,
    stats: RenderStats,
    /// Turns of `cue` (SPEC §24 `--max-concurrent-renders`); waiting renders queue here.
    turns: tokio::sync::Semaphore,
    running: AtomicU64,
    /// Open batches of module renders and the releases that render alone.
    batches: batch::Batches,
    /// Where batches with room find releases to render ahead ([`ahead`]); none: no
    /// rendering ahead.
    ahead: std::sync::OnceLock<Arc<dyn Ahead>>,
    /// The shared module cache of runs without credentials, when `cue_cache_dir` is set.
    cue_cache: Option<crate::cue::cue_cache::CueCache>,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Renderer {
    /// A renderer with an empty cache and no run in flight.
    pub fn new(config: RenderConfig) -> Self {
        let cue_cache = config
            .cue_cache_dir
            .as_deref()
            .map(|d| crate::cue::cue_cache::CueCache::new(d, config.max_cue_cache_bytes));
        Self {
            cue_cache,
            turns: tokio::sync::Semaphore::new(config.max_concurrent.max(1)),
            running: 0.into(),
            config,
            cue_version: OnceCell::new(),
            cache: Mutex::new(RenderCache::new(RENDER_CACHE_BYTES)),
            stats: RenderStats::default(),
            batches: batch::Batches::default(),
            ahead: std::sync::OnceLock::new(),
        }
    }

    /// Its counters (cache hits, runs, batches), for metrics and tests.
    pub fn stats(&self) -> &RenderStats {
        &self.stats
    }

    /// The configuration it runs `cue` with.
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
        let files = synthesise_release(module, values, identity)?;
        let out = self.export_files(&files, None, self.config.timeout).await?;
        Rendered::from_json(&out)
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

    /// [`Self::render_module`] through the render cache.
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
    /// `module.secretRef` (SPEC §27), alone (no batch, no gate: `kubectl opm diff`, tools).
    pub async fn render_module_cached_with(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<(String, Vec<u8>)>,
    ) -> Result<Arc<Rendered>, RenderError> {
        let digest = credentials.as_ref().map(|(d, _)| d.as_str());
        self.touch_cache(module, digest);
        let key = self.module_key(module, values, identity, digest).await?;
        let export = async {
            let files = synthesise_release(module, values, identity)?;
            self.export_files(&files, credentials.as_ref(), self.config.timeout)
                .await
        };
        self.cached(key, export).await
    }

    /// The shared module cache, if any.
    pub fn cue_cache(&self) -> Option<&crate::cue::cue_cache::CueCache> {
        self.cue_cache.as_ref()
    }

    /// A render of `module` without credentials uses the shared cache now (its least
    /// recently used order); one with credentials never touches it.
    pub(super) fn touch_cache(&self, module: &ModuleRef, credentials: Option<&str>) {
        if let (Some(c), None) = (&self.cue_cache, credentials) {
            c.touch(module);
        }
    }

    fn spawn_error(&self, e: std::io::Error) -> RenderError {
        RenderError::Io {
            message: format!("{}: {e}", self.config.cue_binary.display()),
        }
    }
}
