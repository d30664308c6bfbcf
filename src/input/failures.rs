//! Why an effect failed, by class: the error halves of the answers. The interpreter maps
//! HTTP statuses and tool failures to these variants at its boundary, so that classifying
//! a failure (SPEC §4) is a `match` in the core.

use serde::{Deserialize, Serialize};

/// A Kubernetes API failure, by class. `message` is the server's text, shown to users.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ApiError {
    /// 403.
    #[error("forbidden: {message}")]
    Forbidden {
        /// The server's refusal, naming the identity and the verb it lacked.
        message: String,
    },
    /// 404 (for apply: e.g. the namespace does not exist yet).
    #[error("not found: {message}")]
    NotFound {
        /// The server's text, naming what does not exist.
        message: String,
    },
    /// 409: an SSA field-manager conflict, or a failed precondition.
    #[error("conflict: {message}")]
    Conflict {
        /// The server's text, naming the field and its other manager, or the precondition.
        message: String,
    },
    /// 422, including immutable-field errors.
    #[error("invalid: {message}")]
    Invalid {
        /// The server's text, naming the refused field and why it was refused.
        message: String,
    },
    /// 5xx or connection failure.
    #[error("unavailable: {message}")]
    Unavailable {
        /// The server's or the connection's error, shown in the transient condition.
        message: String,
    },
    /// 429.
    #[error("too many requests: {message}")]
    TooManyRequests {
        /// The server's throttling message.
        message: String,
        /// The server's `Retry-After` (`details.retryAfterSeconds`), when it sent one: a
        /// retry waits at least this long (SPEC §24).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_secs: Option<u64>,
    },
    /// A remote cluster (SPEC §31) did not answer at all: connection refused, reset, or
    /// no route. Only ever reported for a remote cluster; the core's `ClusterUnreachable`.
    #[error("unreachable: {message}")]
    Unreachable {
        /// The connection's error.
        message: String,
    },
    /// The request (or a wait such as CRD establishment) ran out of time.
    #[error("timeout: {message}")]
    Timeout {
        /// What ran out of time: the request, or the CRD that was not Established.
        message: String,
    },
    /// Anything else, with its HTTP status (0 when none).
    #[error("error {code}: {message}")]
    Other {
        /// The HTTP status, kept in the message users see; 0 when there was no response.
        code: u16,
        /// The server's text, or the client's error when there was no response.
        message: String,
    },
}

/// Why a Flux source could not be used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SourceError {
    /// The source object does not exist: a stall until a watch event on it (SPEC §4).
    #[error("source not found")]
    NotFound,
    /// `Ready` is not `True`; `message` is the source's own Ready message.
    #[error("source not ready: {message}")]
    NotReady {
        /// The source's explanation, repeated in the release's condition.
        message: String,
    },
    /// The source advertises no artifact yet: soft-blocked, retried after 30s.
    #[error("source has no artifact")]
    NoArtifact,
    /// The read itself failed: a transient failure with backoff.
    #[error("reading the source failed: {error}")]
    Api {
        /// Why the API server refused or failed the read.
        error: ApiError,
    },
}

/// Why an artifact could not be downloaded or unpacked.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FetchError {
    /// The server answered with something other than 200: retried with backoff.
    #[error("HTTP status {status}")]
    Http {
        /// The status it answered, shown in the `FetchFailed` message.
        status: u16,
    },
    /// The download did not finish within the fetch timeout: retried with backoff.
    #[error("download timed out")]
    Timeout,
    /// The server could not be reached: retried with backoff.
    #[error("connection failed: {message}")]
    Connection {
        /// The client's error (DNS, refused, TLS), shown in the `FetchFailed` message.
        message: String,
    },
    /// The bytes hash to another digest than the source advertised: retried, as the
    /// source may have moved on meanwhile.
    #[error("digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The digest the source advertised.
        expected: String,
        /// The digest the downloaded bytes hashed to.
        actual: String,
    },
    /// The body broke off, or writing it locally failed: retried.
    #[error("{message}")]
    Io {
        /// What broke off or failed locally, shown in the `FetchFailed` message.
        message: String,
    },
    /// Not tar.gz/zip, traversal, escaping or absolute link, hard link, device, FIFO,
    /// unsupported URL scheme or digest algorithm.
    #[error("{message}")]
    InvalidArtifact {
        /// Which entry or property was refused, shown in the `InvalidArtifact` stall.
        message: String,
    },
    /// Over the download, extracted-size or entry cap.
    #[error("{message}")]
    TooLarge {
        /// Which cap was passed and by how much, shown in the `InvalidArtifact` stall.
        message: String,
    },
}

/// Why rendering failed. The interpreter classifies `cue`'s stderr into these variants.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum RenderError {
    /// A module or dependency cannot be fetched (unknown version, bad major version).
    #[error("{message}")]
    Resolution {
        /// `cue`'s account of what could not be fetched, for the `ResolutionFailed` stall.
        message: String,
    },
    /// CUE evaluation failed: values invalid, conflicting values, malformed objects.
    #[error("{message}")]
    Evaluation {
        /// `cue`'s errors (secrets redacted), for the `RenderFailed` stall.
        message: String,
    },
    /// Exported `kind` is not `ModuleRelease` (`None`: missing).
    #[error("unsupported kind {kind:?}")]
    UnsupportedKind {
        /// The `kind` the package exported instead, shown in the stall's message.
        kind: Option<String>,
    },
    /// `spec.path` missing, not a directory, or escaping the artifact.
    #[error("{message}")]
    PathNotFound {
        /// Why the path was refused, for the `PathNotFound` stall.
        message: String,
    },
    /// No `release.cue` at the path.
    #[error("{message}")]
    ReleaseFileNotFound {
        /// Where `release.cue` was looked for, for the `ReleaseFileNotFound` stall.
        message: String,
    },
    /// The cached artifact turned out to be unusable.
    #[error("{message}")]
    InvalidArtifact {
        /// What was wrong with it, for the `InvalidArtifact` stall.
        message: String,
    },
    /// `cue` exceeded its deadline.
    #[error("{message}")]
    Timeout {
        /// What ran out of time, for the transient `RenderFailed` condition.
        message: String,
    },
    /// The module registry could not be reached.
    #[error("{message}")]
    RegistryUnreachable {
        /// `cue`'s connection error, for the transient `RenderFailed` condition.
        message: String,
    },
    /// Local failure (temp dir, spawn): retried.
    #[error("{message}")]
    Io {
        /// What failed on the operator's side, for the transient condition.
        message: String,
    },
    /// `cue` wrote more than the byte cap; the interpreter stopped reading (and killed it)
    /// once `bytes_at_least` bytes had arrived (SPEC §24 `--max-render-bytes`).
    #[error("exported JSON is more than {bytes_at_least} bytes; the cap is {cap}")]
    TooLarge {
        /// How much had arrived when reading stopped: a lower bound, not the full size.
        bytes_at_least: u64,
        /// The `--max-render-bytes` in force, named in the stall's message.
        cap: u64,
    },
    /// `cue` was stopped by its memory limit (SPEC §24 `--render-memory-limit`).
    #[error("cue ran out of memory under its limit of {limit_bytes} bytes")]
    OutOfMemory {
        /// The `--render-memory-limit` in force, named in the stall's message.
        limit_bytes: u64,
    },
    /// The artifact had left the local cache by the time the render needed it, and
    /// downloading it again failed: classified exactly like the fetch step's own failure
    /// (a 503 backs off; only invalid content stalls), SPEC §4.
    #[error("{error}")]
    Refetch {
        /// Why downloading it again failed, classified as the fetch step would.
        error: FetchError,
    },
    /// An OPM module or instance and no Ready Platform `cluster` (SPEC §30): soft-blocked,
    /// re-triggered when the Platform turns Ready.
    #[error("waiting for Platform cluster: {message}")]
    PlatformNotReady {
        /// Why the Platform cannot be used yet.
        message: String,
    },
    /// A module or package of the retired OPM core v0 (SPEC §30).
    #[error("{what} is a core v0 module")]
    CoreV0 {
        /// The module (`path@version`) or package path, named in the stall.
        what: String,
    },
    /// The OPM render's verdicts (SPEC §30), read by [`crate::opm::read_export`] or
    /// [`crate::opm::incomplete_output`]: the render fails closed.
    #[error("{}", crate::opm::verdict_message(verdicts))]
    Verdicts {
        /// Every reason the render was refused.
        verdicts: Vec<crate::opm::Verdict>,
    },
}

/// Why the kubeconfig could not be read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum KubeConfigError {
    /// The Secret does not exist.
    #[error("Secret not found")]
    SecretNotFound,
    /// The Secret has none of the keys tried; `keys` are the ones it has.
    #[error("key not found")]
    KeyNotFound {
        /// The Secret's keys (names only), for the message.
        keys: Vec<String>,
    },
    /// The value is larger than the effect's `max_bytes`; it was not parsed.
    #[error("too large: {bytes} bytes")]
    TooLarge {
        /// Its size.
        bytes: u64,
    },
    /// The value is not a kubeconfig (or has no current context).
    #[error("not a usable kubeconfig: {message}")]
    Unparsable {
        /// The parser's complaint (never the value itself).
        message: String,
    },
    /// Reading the Secret failed.
    #[error("{error}")]
    Api {
        /// The API error.
        error: ApiError,
    },
}
