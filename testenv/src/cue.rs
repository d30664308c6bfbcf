//! Running the real `cue` binary from tests.

use std::path::Path;

use crate::error::{Error, Result};
use crate::tools;

/// `cue export . --out json` in `dir` with extra environment (e.g.
/// [`crate::CueRegistry::cue_env`]). On failure the error carries cue's stderr, which
/// tests match against the messages the renderer classifies.
pub async fn export(dir: &Path, env: &[(&str, String)]) -> Result<serde_json::Value> {
    let output = tokio::process::Command::new(tools::cue_bin()?)
        .args(["export", ".", "--out", "json"])
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| Error::io("run cue export", e))?;
    if !output.status.success() {
        return Err(Error::Command {
            command: format!("cue export . --out json (in {})", dir.display()),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}
