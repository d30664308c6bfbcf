//! One `cue export` child process: its environment and limits, a turn of
//! `--max-concurrent-renders`, the deadline, the stdout cap and the drained stderr.

use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::{RenderError, Renderer, classify_stderr};
use crate::cue::module_ref::ReleaseFiles;

impl Renderer {
    /// `cue export . --out json` in `dir`, bounded by the deadline and the output caps.
    pub(super) async fn export(&self, dir: &Path) -> Result<Vec<u8>, RenderError> {
        self.export_env(dir, &[], self.config.timeout).await
    }

    /// Writes `files` into a temporary package and exports it, pulling with the Docker
    /// config (`digest`, bytes) of `module.secretRef` when given (SPEC §27).
    pub(super) async fn export_files(
        &self,
        files: &ReleaseFiles,
        credentials: Option<&(String, Vec<u8>)>,
        timeout: Duration,
    ) -> Result<Vec<u8>, RenderError> {
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
        let Some((digest, bytes)) = credentials else {
            return self.export_env(dir.path(), &[], timeout).await;
        };
        let auth = crate::cue::registry_auth::PrivateDockerConfig::new(bytes).map_err(|e| {
            RenderError::Io {
                message: format!("private Docker config: {e}"),
            }
        })?;
        // A private module cache, removed with the Docker config: nothing pulled with
        // these credentials stays where another render could read it
        // ([`crate::cue::cue_cache`]).
        tracing::debug!(credentials = %digest, "cue run with module.secretRef: private module cache");
        let env = auth.env(None);
        let out = self.export_env(dir.path(), &env, timeout).await;
        drop(auth);
        out.map_err(crate::cue::registry_auth::refused_credentials)
    }

    /// [`Self::export`] with extra environment for the child (set last, so they win) and
    /// its own deadline.
    pub(super) async fn export_env(
        &self,
        dir: &Path,
        env: &[(String, OsString)],
        timeout: Duration,
    ) -> Result<Vec<u8>, RenderError> {
        self.run_cue(dir, EXPORT_ARGS, env, timeout)
            .await
            .map_err(|f| f.error)
    }

    /// Runs `cue <args>` in `dir` in a turn of `--max-concurrent-renders`, with the
    /// registry, cache and memory limit: its stdout, or the classified error together with
    /// `cue`'s raw stderr head (the OPM render reads the error path from it before
    /// redaction, SPEC §30).
    pub(crate) async fn run_cue(
        &self,
        dir: &Path,
        args: &[&str],
        env: &[(String, OsString)],
        timeout: Duration,
    ) -> Result<Vec<u8>, CueFailure> {
        self.run_cue_counted(dir, args, env, timeout, &self.stats.runs)
            .await
    }

    /// [`Self::run_cue`], counted in `counter` (renders in `runs`, dependency probes in
    /// `probes`).
    pub(crate) async fn run_cue_counted(
        &self,
        dir: &Path,
        args: &[&str],
        env: &[(String, OsString)],
        timeout: Duration,
        counter: &AtomicU64,
    ) -> Result<Vec<u8>, CueFailure> {
        if !dir.is_dir() {
            return Err(RenderError::Io {
                message: format!("{} is not a directory", dir.display()),
            }
            .into());
        }
        let cmd = self.command(dir, args, env);
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
        // A run on the shared module cache holds it, so no module version is removed under it.
        let shared = self
            .cue_cache
            .as_ref()
            .filter(|_| !env.iter().any(|(k, _)| k == "CUE_CACHE_DIR"));
        let holding = match shared {
            Some(c) => Some(c.enter().await),
            None => None,
        };
        let _running = Running::enter(&self.running, &self.stats.peak_running);
        let started = std::time::Instant::now();
        counter.fetch_add(1, Ordering::Relaxed);
        let ran = self.run_child(cmd, timeout).await;
        drop(holding);
        if let Some(c) = shared {
            c.after_run().await;
        }
        let (out, status, stderr) = ran?;
        tracing::debug!(dir = %dir.display(), ?args, elapsed_ms = started.elapsed().as_millis() as u64, "cue finished");
        if status.success() {
            return Ok(out);
        }
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        let error = match self.config.memory_limit {
            Some(limit) if crate::cue::cue_limits::died_of_memory(&status, &stderr) => {
                tracing::warn!(dir = %dir.display(), limit, "cue ran out of memory");
                RenderError::OutOfMemory { limit }
            }
            _ => classify_stderr(&stderr),
        };
        Err(CueFailure { error, stderr })
    }

    /// The `cue export` command of `dir`, with the registry, cache and memory limit.
    fn command(
        &self,
        dir: &Path,
        args: &[&str],
        env: &[(String, OsString)],
    ) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.config.cue_binary);
        cmd.args(args)
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
        cmd
    }

    /// Runs the child to its end: (stdout, exit status, stderr head), or the deadline or
    /// the stdout cap, at which it is killed.
    async fn run_child(
        &self,
        mut cmd: tokio::process::Command,
        timeout: Duration,
    ) -> Result<(Vec<u8>, ExitStatus, Vec<u8>), RenderError> {
        let mut child = cmd.spawn().map_err(|e| self.spawn_error(e))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(RenderError::Io {
                message: "cue stdio was not captured".into(),
            });
        };
        let stderr_task = tokio::spawn(read_head(stderr, self.config.max_stderr_bytes));
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
        // The deadline is checked before the run's result: `tokio::time::timeout` polls the
        // run first, so on a starved worker a run that ended long past its deadline would
        // still count as finished in time.
        let deadline = tokio::time::sleep(timeout);
        let finished = tokio::select! {
            biased;
            () = deadline => Err(()),
            r = run => Ok(r),
        };
        let failed = match finished {
            Ok((Ok(out), Some(status))) => {
                let stderr = stderr_task.await.unwrap_or_default();
                return Ok((out, status, stderr));
            }
            Ok((Ok(_), None)) => RenderError::Io {
                message: "waiting for cue failed".into(),
            },
            Err(_) => RenderError::Timeout { after: timeout },
            Ok((Err(seen), _)) => RenderError::OutputTooLarge {
                bytes_at_least: seen as u64,
                limit: out_cap,
            },
        };
        let _ = child.kill().await;
        stderr_task.abort();
        Err(failed)
    }
}

/// `cue export . --out json`: the plain render.
const EXPORT_ARGS: &[&str] = &["export", ".", "--out", "json"];

/// A failed `cue` run: the classified error and `cue`'s raw stderr head (never shown as is:
/// it may quote a secret; messages use the error's redacted text).
#[derive(Debug)]
pub(crate) struct CueFailure {
    /// The classified error.
    pub(crate) error: RenderError,
    /// The first bytes of `cue`'s stderr, unredacted.
    pub(crate) stderr: String,
}

impl From<RenderError> for CueFailure {
    fn from(error: RenderError) -> Self {
        Self {
            error,
            stderr: String::new(),
        }
    }
}

/// Counts a running `cue` for [`super::RenderStats::peak_running`] until dropped.
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
