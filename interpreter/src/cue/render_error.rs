//! Why a render failed, apart from the renderer so the modules it uses (the synthesised
//! package, the exported value, registry credentials) can name it without depending on it.

use std::time::Duration;

/// Why a render failed; [`crate::effects::local::render_error`] maps it to the core's typed error,
/// and the core picks the SPEC §4 row.
// Each variant's doc says what its fields hold.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The module or a dependency cannot be resolved (unknown version, bad module reference).
    #[error("module resolution failed: {message}")]
    Resolution { message: String },
    /// The registry could not be reached; may recover on its own.
    #[error("CUE registry unreachable: {message}")]
    RegistryUnreachable { message: String },
    /// `cue` ran past its deadline and was killed.
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
