//! The renderer's side of OPM renders (SPEC §30): a tree of synthesised files exported with
//! the arguments `LAYOUT.md` names, the probe that learns a module version's dependencies,
//! and the render cache for what the core accepted.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use super::child::CueFailure;
use super::{RenderError, RenderKey, Rendered, Renderer};
use crate::cue::module_ref::{ModuleRef, RELEASE_LANGUAGE_VERSION};

/// Module path of the probe that asks `cue` for a module version's dependencies.
const PROBE_MODULE: &str = "opm.internal/probe@v0";

impl Renderer {
    /// Writes `files` (relative path → content) into a private temporary directory and runs
    /// `cue <args>` there; with `module.secretRef` credentials (`digest`, bytes) the pull
    /// uses them (SPEC §27).
    pub(crate) async fn export_tree(
        &self,
        files: &[(String, String)],
        args: &[String],
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<Vec<u8>, CueFailure> {
        let dir = write_tree(files)?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run_with_credentials(dir.path(), &args, credentials)
            .await
    }

    /// The `cue.mod/module.cue` of a probe module after `cue mod get <module>@<version>`:
    /// the module's dependencies as `cue` resolved them (one short run, no evaluation).
    pub(crate) async fn module_deps_probe(
        &self,
        module: &ModuleRef,
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<String, RenderError> {
        let module_cue =
            format!("module: {PROBE_MODULE:?}\nlanguage: version: {RELEASE_LANGUAGE_VERSION:?}\n");
        let dir =
            write_tree(&[("cue.mod/module.cue".to_owned(), module_cue)]).map_err(|f| f.error)?;
        let base = module
            .path
            .rsplit_once('@')
            .map_or(module.path.as_str(), |(b, _)| b);
        let target = format!("{base}@{}", module.version);
        self.run_counted(
            dir.path(),
            // `--`: a module path is never read as a flag, whatever a tenant wrote.
            &["mod", "get", "--", &target],
            credentials,
            &self.stats.probes,
        )
        .await
        .map_err(|f| f.error)?;
        std::fs::read_to_string(dir.path().join("cue.mod/module.cue")).map_err(|e| {
            RenderError::Io {
                message: format!("reading the probe's module file: {e}"),
            }
        })
    }

    /// Counts a batched OPM run of `members` releases (as module batches are counted).
    pub(crate) fn note_batch(&self, members: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.stats.batch_runs.fetch_add(1, Relaxed);
        self.stats.batched.fetch_add(members, Relaxed);
    }

    /// Where batches find releases to render ahead of their attempts, if anywhere.
    pub(crate) fn ahead_source(&self) -> Option<Arc<dyn super::Ahead>> {
        self.ahead.get().cloned()
    }

    /// Whether `key` is cached (not counted as a hit).
    pub(crate) fn is_cached(&self, key: &RenderKey) -> bool {
        self.cache_contains(key)
    }

    /// Counts releases rendered ahead and kept.
    pub(crate) fn note_ahead(&self, n: u64) {
        self.stats
            .ahead
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts a run of the OPM read-ahead.
    pub(crate) fn note_read_ahead(&self) {
        self.stats
            .read_ahead_runs
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A cached render, counted as a hit.
    pub(crate) fn cached_render(
        &self,
        key: &RenderKey,
    ) -> Option<Result<Arc<Rendered>, RenderError>> {
        self.cache_get(key)
    }

    /// Caches a render in the plain shape (what the core accepted of an OPM export).
    pub(crate) fn put_render(
        &self,
        key: RenderKey,
        bytes: Vec<u8>,
    ) -> Result<Arc<Rendered>, RenderError> {
        self.cache_put(key, bytes)
    }

    async fn run_with_credentials(
        &self,
        dir: &Path,
        args: &[&str],
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<Vec<u8>, CueFailure> {
        self.run_counted(dir, args, credentials, &self.stats.runs)
            .await
    }

    async fn run_counted(
        &self,
        dir: &Path,
        args: &[&str],
        credentials: Option<&(String, Vec<u8>)>,
        counter: &std::sync::atomic::AtomicU64,
    ) -> Result<Vec<u8>, CueFailure> {
        let Some((digest, bytes)) = credentials else {
            return self
                .run_cue_counted(dir, args, &[], self.config.timeout, counter)
                .await;
        };
        let auth = crate::cue::registry_auth::PrivateDockerConfig::new(bytes).map_err(|e| {
            RenderError::Io {
                message: format!("private Docker config: {e}"),
            }
        })?;
        // A private module cache, removed with the Docker config, as for a plain render:
        // nothing pulled with these credentials stays where another render could read it.
        tracing::debug!(credentials = %digest, "OPM cue run with module.secretRef: private module cache");
        let env: Vec<(String, OsString)> = auth.env(None);
        let out = self
            .run_cue_counted(dir, args, &env, self.config.timeout, counter)
            .await;
        drop(auth);
        out.map_err(|f| CueFailure {
            error: crate::cue::registry_auth::refused_credentials(f.error),
            stderr: f.stderr,
        })
    }
}

fn write_tree(files: &[(String, String)]) -> Result<tempfile::TempDir, CueFailure> {
    let io = |e: std::io::Error| {
        CueFailure::from(RenderError::Io {
            message: format!("writing the render package: {e}"),
        })
    };
    let dir = tempfile::Builder::new()
        .prefix("opm-render-")
        .tempdir()
        .map_err(io)?;
    for (rel, text) in files {
        let p = dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(p, text).map_err(io)?;
    }
    Ok(dir)
}
