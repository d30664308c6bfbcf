//! What the machine is told: the observed release, then one result per awaited effect.
//!
//! Errors are typed so that classification (SPEC §4) is a `match` in the core; the
//! interpreter maps HTTP statuses and tool failures to these variants at its boundary and
//! decides nothing else.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::object::{ReleaseKey, ReleaseObject, ResourceId};

/// One input: a fact and the time it was observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    pub now: Timestamp,
    pub kind: InputKind,
}

impl Input {
    pub fn new(now: Timestamp, kind: InputKind) -> Self {
        Self { now, kind }
    }

    /// The input that starts an attempt for a release that exists.
    pub fn observed(now: Timestamp, object: ReleaseObject) -> Self {
        Self::new(
            now,
            InputKind::Observed {
                key: object.key(),
                object: Some(Box::new(object)),
            },
        )
    }

    /// The input that starts an attempt for a release that no longer exists.
    pub fn gone(now: Timestamp, key: ReleaseKey) -> Self {
        Self::new(now, InputKind::Observed { key, object: None })
    }
}

/// The fact carried by an input. `Observed` starts an attempt; each other variant answers the
/// awaited effect of the same name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum InputKind {
    /// The release as read from the API server; `None` when it no longer exists.
    Observed {
        key: ReleaseKey,
        object: Option<Box<ReleaseObject>>,
    },
    /// Answer to `AddFinalizer`.
    FinalizerAdded { result: Result<(), ApiError> },
    /// Answer to `RemoveFinalizer`.
    FinalizerRemoved { result: Result<(), ApiError> },
    /// Answer to `CheckDependencies`.
    DependenciesChecked {
        result: Result<DependencyReport, ApiError>,
    },
    /// Answer to `ResolveSource`.
    SourceResolved {
        result: Result<SourceArtifact, SourceError>,
    },
    /// Answer to `FetchArtifact`.
    ArtifactFetched {
        result: Result<FetchedArtifact, FetchError>,
    },
    /// Answer to `Render`.
    Rendered {
        result: Result<RenderOutput, RenderError>,
    },
    /// Answer to `CheckServiceAccount`: whether it exists.
    ServiceAccountChecked { result: Result<bool, ApiError> },
    /// Answer to `CheckDrift`.
    DriftChecked { report: DriftReport },
    /// Answer to `Apply`.
    Applied { report: ApplyReport },
    /// Answer to `InspectOwners`: each target's labels, `Ok(None)` when absent.
    OwnersInspected { objects: Vec<LiveObject> },
    /// Answer to `InspectStale`.
    StaleInspected { objects: Vec<LiveObject> },
    /// Answer to `Prune`.
    Pruned { results: Vec<ObjectResult> },
    /// Answer to `PatchStatus`.
    StatusPatched { result: Result<(), ApiError> },
    /// Answer to `AwaitTermination`: the objects still there (same UID) when the wait
    /// ended; empty when every one is gone. `error` is set when the watch itself failed.
    TerminationAwaited {
        remaining: Vec<ResourceId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ApiError>,
    },
    /// Answer to `ReadValues`: one result per reference, in order, and the credentials.
    ValuesRead {
        values: Vec<Result<crate::values_from::ValuesContent, ApiError>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<Result<crate::values_from::CredentialsContent, ApiError>>,
    },
    /// Answer to `AssessHealth`: one entry per target, in order.
    HealthRead { objects: Vec<HealthObject> },
}

/// One object read for its health: `Ok(None)` when it does not exist.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HealthObject {
    pub id: ResourceId,
    pub result: Result<Option<Value>, ApiError>,
    /// Its newest pods, when they were asked for (newest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<Value>,
}

impl InputKind {
    /// The variant name as it appears in traces (`observed`, `rendered`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            InputKind::Observed { .. } => "observed",
            InputKind::FinalizerAdded { .. } => "finalizerAdded",
            InputKind::FinalizerRemoved { .. } => "finalizerRemoved",
            InputKind::DependenciesChecked { .. } => "dependenciesChecked",
            InputKind::SourceResolved { .. } => "sourceResolved",
            InputKind::ArtifactFetched { .. } => "artifactFetched",
            InputKind::Rendered { .. } => "rendered",
            InputKind::ServiceAccountChecked { .. } => "serviceAccountChecked",
            InputKind::DriftChecked { .. } => "driftChecked",
            InputKind::Applied { .. } => "applied",
            InputKind::OwnersInspected { .. } => "ownersInspected",
            InputKind::StaleInspected { .. } => "staleInspected",
            InputKind::Pruned { .. } => "pruned",
            InputKind::StatusPatched { .. } => "statusPatched",
            InputKind::HealthRead { .. } => "healthRead",
            InputKind::ValuesRead { .. } => "valuesRead",
            InputKind::TerminationAwaited { .. } => "terminationAwaited",
        }
    }
}

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
    Forbidden { message: String },
    /// 404 (for apply: e.g. the namespace does not exist yet).
    #[error("not found: {message}")]
    NotFound { message: String },
    /// 409: an SSA field-manager conflict, or a failed precondition.
    #[error("conflict: {message}")]
    Conflict { message: String },
    /// 422, including immutable-field errors.
    #[error("invalid: {message}")]
    Invalid { message: String },
    /// 5xx or connection failure.
    #[error("unavailable: {message}")]
    Unavailable { message: String },
    /// 429.
    #[error("too many requests: {message}")]
    TooManyRequests {
        message: String,
        /// The server's `Retry-After` (`details.retryAfterSeconds`), when it sent one: a
        /// retry waits at least this long (SPEC §24).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_secs: Option<u64>,
    },
    /// The request (or a wait such as CRD establishment) ran out of time.
    #[error("timeout: {message}")]
    Timeout { message: String },
    /// Anything else, with its HTTP status (0 when none).
    #[error("error {code}: {message}")]
    Other { code: u16, message: String },
}

/// One release as seen by the dependency check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseSnapshot {
    pub key: ReleaseKey,
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// Status of the `Ready` condition (`True`, `False`, `Unknown`; empty when absent).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready: String,
    /// Its own `dependsOn`, with namespace and kind defaults filled in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<ReleaseKey>,
}

/// Every release of both kinds in the release's namespace, plus each cross-namespace
/// dependency that exists. A requested ref missing here does not exist.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReport {
    pub releases: Vec<ReleaseSnapshot>,
}

/// The artifact a ready Flux source advertises.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceArtifact {
    pub url: String,
    pub revision: String,
    pub digest: String,
}

/// Why a Flux source could not be used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SourceError {
    #[error("source not found")]
    NotFound,
    /// `Ready` is not `True`; `message` is the source's own Ready message.
    #[error("source not ready: {message}")]
    NotReady { message: String },
    #[error("source has no artifact")]
    NoArtifact,
    #[error("reading the source failed: {error}")]
    Api { error: ApiError },
}

/// A verified, cached artifact.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FetchedArtifact {
    pub digest: String,
    pub size: u64,
}

/// Why an artifact could not be downloaded or unpacked.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum FetchError {
    #[error("HTTP status {status}")]
    Http { status: u16 },
    #[error("download timed out")]
    Timeout,
    #[error("connection failed: {message}")]
    Connection { message: String },
    #[error("digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch { expected: String, actual: String },
    /// The body broke off, or writing it locally failed: retried.
    #[error("{message}")]
    Io { message: String },
    /// Not tar.gz/zip, traversal, escaping or absolute link, hard link, device, FIFO,
    /// unsupported URL scheme or digest algorithm.
    #[error("{message}")]
    InvalidArtifact { message: String },
    /// Over the download, extracted-size or entry cap.
    #[error("{message}")]
    TooLarge { message: String },
}

/// A Kubernetes kind, by group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct GroupKind {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub kind: String,
}

/// What `cue export` produced, with the scope facts the core needs to place objects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RenderOutput {
    /// The exported value (`kind`, `metadata`, `components`). Secret `data`/`stringData`
    /// values are already replaced by `sha256:<hex>` digests (SPEC §23).
    pub value: Value,
    /// Kinds known to be cluster-scoped (from discovery and CRDs in the render); every
    /// other kind is treated as namespaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_scoped: Vec<GroupKind>,
    /// Size of the exported JSON `cue` wrote, in bytes (0: not measured, as in traces
    /// older than the cap). The core compares it with `--max-render-bytes` (SPEC §24).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
    Resolution { message: String },
    /// CUE evaluation failed: values invalid, conflicting values, malformed objects.
    #[error("{message}")]
    Evaluation { message: String },
    /// Exported `kind` is not `ModuleRelease` (`None`: missing).
    #[error("unsupported kind {kind:?}")]
    UnsupportedKind { kind: Option<String> },
    /// `spec.path` missing, not a directory, or escaping the artifact.
    #[error("{message}")]
    PathNotFound { message: String },
    /// No `release.cue` at the path.
    #[error("{message}")]
    ReleaseFileNotFound { message: String },
    /// The cached artifact turned out to be unusable.
    #[error("{message}")]
    InvalidArtifact { message: String },
    /// `cue` exceeded its deadline.
    #[error("{message}")]
    Timeout { message: String },
    /// The module registry could not be reached.
    #[error("{message}")]
    RegistryUnreachable { message: String },
    /// Local failure (temp dir, spawn): retried.
    #[error("{message}")]
    Io { message: String },
    /// `cue` wrote more than the byte cap; the interpreter stopped reading (and killed it)
    /// once `bytes_at_least` bytes had arrived (SPEC §24 `--max-render-bytes`).
    #[error("exported JSON is more than {bytes_at_least} bytes; the cap is {cap}")]
    TooLarge { bytes_at_least: u64, cap: u64 },
    /// `cue` was stopped by its memory limit (SPEC §24 `--render-memory-limit`).
    #[error("cue ran out of memory under its limit of {limit_bytes} bytes")]
    OutOfMemory { limit_bytes: u64 },
    /// The artifact had left the local cache by the time the render needed it, and
    /// downloading it again failed: classified exactly like the fetch step's own failure
    /// (a 503 backs off; only invalid content stalls), SPEC §4.
    #[error("{error}")]
    Refetch { error: FetchError },
}

/// The result of an operation on one object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectResult {
    pub id: ResourceId,
    pub result: Result<(), ApiError>,
}

/// Per-object errors of a drift check (continuing past errors) and the drifted objects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    /// Objects whose managed fields differ from the desired state, or that are missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<ResourceId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ObjectResult>,
    /// Per drifted object, what drifted: the fields (and who changed them), or that the
    /// object is missing. An object in `drifted` without details is named alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<ObjectDrift>,
}

/// What drifted in one object (SPEC §20).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectDrift {
    pub id: ResourceId,
    /// The live object is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    /// Drifted fields outside the ignored ones (at most `fields::MAX_FIELDS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<crate::fields::FieldDrift>,
}

/// What apply did to one object.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ApplyAction {
    Created,
    Updated,
    /// A dry-run showed no change; nothing written.
    Unchanged,
    /// Deleted and created anew after an immutable-field refusal
    /// (`releases.opmodel.dev/force: enabled`, SPEC §28).
    Recreated,
}

/// One object's apply result.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AppliedObject {
    pub id: ResourceId,
    pub result: Result<ApplyAction, ApiError>,
}

/// Results in apply order. The interpreter stops after the first stage with a failure;
/// objects never attempted are absent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    pub objects: Vec<AppliedObject>,
}

/// The live state of a stale object, as far as the prune guards need it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LiveMeta {
    pub uid: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// GET result for one stale object: `Ok(None)` when it is already gone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LiveObject {
    pub id: ResourceId,
    pub result: Result<Option<LiveMeta>, ApiError>,
}

/// Why an input was refused. A refused input changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("input {got} does not answer the awaited effect ({expected})")]
    Unexpected {
        expected: &'static str,
        got: &'static str,
    },
    #[error("the attempt is finished; start a new one with an observed input")]
    Finished,
    #[error("an attempt must start with an observed input, got {got}")]
    NotObserved { got: &'static str },
}
