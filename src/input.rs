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

mod name;

pub use name::InputName;

/// One input: a fact and the time it was observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// When the fact was observed: the core's only clock, so a replay decides the same.
    pub now: Timestamp,
    /// The fact itself: the observed release, or the answer to one awaited effect.
    pub kind: InputKind,
}

impl Input {
    /// Pairs a fact with the time it was observed.
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
        /// The release the attempt is for, known even when the object is gone.
        key: ReleaseKey,
        /// The release as read; `None` ends the attempt at once (SPEC §3 step 1).
        object: Option<Box<ReleaseObject>>,
    },
    /// Answer to `AddFinalizer`.
    FinalizerAdded {
        /// Whether the patch landed; an error ends the attempt with a Warning and a backoff.
        result: Result<(), ApiError>,
    },
    /// Answer to `RemoveFinalizer`.
    FinalizerRemoved {
        /// Whether the patch landed; on success the release is left to the API server.
        result: Result<(), ApiError>,
    },
    /// Answer to `CheckDependencies`.
    DependenciesChecked {
        /// The releases found, or why listing them failed (a transient failure).
        result: Result<DependencyReport, ApiError>,
    },
    /// Answer to `ListDependents`.
    DependentsListed {
        /// Every release that has a `dependsOn`, or why listing them failed (transient).
        result: Result<DependencyReport, ApiError>,
    },
    /// Answer to `ResolveSource`.
    SourceResolved {
        /// The artifact the source advertises, or why it cannot be used yet.
        result: Result<SourceArtifact, SourceError>,
    },
    /// Answer to `FetchArtifact`.
    ArtifactFetched {
        /// The verified, unpacked artifact, or why the download or unpacking failed.
        result: Result<FetchedArtifact, FetchError>,
    },
    /// Answer to `Render`.
    Rendered {
        /// The exported value with its scope facts, or `cue`'s classified failure.
        result: Result<RenderOutput, RenderError>,
    },
    /// Answer to `CheckServiceAccount`: whether it exists.
    ServiceAccountChecked {
        /// Whether the ServiceAccount exists; `Ok(false)` is an `ImpersonationFailed` stall.
        result: Result<bool, ApiError>,
    },
    /// Answer to `CheckDrift`.
    DriftChecked {
        /// The drifted objects and the per-object errors of the dry-runs.
        report: DriftReport,
    },
    /// Answer to `Apply`.
    Applied {
        /// What the apply did to each object it reached.
        report: ApplyReport,
    },
    /// Answer to `InspectOwners`: each target's labels, `Ok(None)` when absent.
    OwnersInspected {
        /// One read per target, whose `uuid` label decides whether it may be written.
        objects: Vec<LiveObject>,
    },
    /// Answer to `InspectStale`.
    StaleInspected {
        /// One read per stale target, for the prune guards (SPEC §9).
        objects: Vec<LiveObject>,
    },
    /// Answer to `Prune`.
    Pruned {
        /// One result per deletion; 404 and a failed UID precondition count as done.
        results: Vec<ObjectResult>,
    },
    /// Answer to `PatchStatus`.
    StatusPatched {
        /// Whether the status write landed; an error backs off with the count kept in memory.
        result: Result<(), ApiError>,
    },
    /// Answer to `AwaitTermination`: the objects still there (same UID) when the wait
    /// ended; empty when every one is gone. `error` is set when the watch itself failed.
    TerminationAwaited {
        /// The objects not gone yet, named in the `PruneFailed` message.
        remaining: Vec<ResourceId>,
        /// Why the watch broke off, when it did; the deletion is then retried.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ApiError>,
    },
    /// Answer to `ReadValues`: one result per reference, in order, and the credentials.
    ValuesRead {
        /// Each `valuesFrom` object's content, or why it could not be read, in spec order.
        values: Vec<Result<ValuesContent, ApiError>>,
        /// The `module.secretRef` Secret's credentials, when one was asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<Result<CredentialsContent, ApiError>>,
    },
    /// Answer to `ReadKubeConfig`.
    KubeConfigRead {
        /// What the kubeconfig holds, or why it could not be read.
        result: Result<KubeConfigFacts, KubeConfigError>,
    },
    /// Answer to `AssessHealth`: one entry per target, in order.
    HealthRead {
        /// Each target's live JSON (and pods, when asked for), in request order.
        objects: Vec<HealthObject>,
    },
}

/// One object read for its health: `Ok(None)` when it does not exist.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HealthObject {
    /// The object read, as the request named it.
    pub id: ResourceId,
    /// Its JSON without `managedFields`, the input of the health rules (SPEC §26).
    pub result: Result<Option<Value>, ApiError>,
    /// Its newest pods, when they were asked for (newest first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<Value>,
}

impl InputKind {
    /// Which kind of input this is, the tag without its payload.
    pub fn kind(&self) -> InputName {
        match self {
            InputKind::Observed { .. } => InputName::Observed,
            InputKind::FinalizerAdded { .. } => InputName::FinalizerAdded,
            InputKind::FinalizerRemoved { .. } => InputName::FinalizerRemoved,
            InputKind::DependenciesChecked { .. } => InputName::DependenciesChecked,
            InputKind::DependentsListed { .. } => InputName::DependentsListed,
            InputKind::SourceResolved { .. } => InputName::SourceResolved,
            InputKind::ArtifactFetched { .. } => InputName::ArtifactFetched,
            InputKind::Rendered { .. } => InputName::Rendered,
            InputKind::ServiceAccountChecked { .. } => InputName::ServiceAccountChecked,
            InputKind::DriftChecked { .. } => InputName::DriftChecked,
            InputKind::Applied { .. } => InputName::Applied,
            InputKind::OwnersInspected { .. } => InputName::OwnersInspected,
            InputKind::StaleInspected { .. } => InputName::StaleInspected,
            InputKind::Pruned { .. } => InputName::Pruned,
            InputKind::StatusPatched { .. } => InputName::StatusPatched,
            InputKind::HealthRead { .. } => InputName::HealthRead,
            InputKind::ValuesRead { .. } => InputName::ValuesRead,
            InputKind::TerminationAwaited { .. } => InputName::TerminationAwaited,
            InputKind::KubeConfigRead { .. } => InputName::KubeConfigRead,
        }
    }

    /// The variant name as it appears in traces (`observed`, `rendered`, ...).
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// The first `Unreachable` error this answer carries: a remote cluster that did not
    /// answer fails the attempt as `ClusterUnreachable`, whatever the effect (SPEC §31).
    pub fn unreachable(&self) -> Option<&ApiError> {
        fn first<'a>(mut errs: impl Iterator<Item = Option<&'a ApiError>>) -> Option<&'a ApiError> {
            errs.find_map(|e| e.filter(|e| matches!(e, ApiError::Unreachable { .. })))
        }
        match self {
            InputKind::ServiceAccountChecked { result } => {
                first(std::iter::once(result.as_ref().err()))
            }
            InputKind::DriftChecked { report } => {
                first(report.errors.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::Applied { report } => {
                first(report.objects.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::OwnersInspected { objects } | InputKind::StaleInspected { objects } => {
                first(objects.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::Pruned { results } => first(results.iter().map(|o| o.result.as_ref().err())),
            InputKind::HealthRead { objects } => {
                first(objects.iter().map(|o| o.result.as_ref().err()))
            }
            InputKind::TerminationAwaited { error, .. } => first(std::iter::once(error.as_ref())),
            _ => None,
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

/// One release as seen by the dependency check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseSnapshot {
    /// Which release this is, matched against the requested refs and cycles.
    pub key: ReleaseKey,
    /// Its `metadata.generation`: Ready counts only once the status has observed it.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// Status of the `Ready` condition (`True`, `False`, `Unknown`; empty when absent).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready: String,
    /// Its own `dependsOn`, with namespace and kind defaults filled in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<ReleaseKey>,
    /// It has a `deletionTimestamp`: it is going, shown in the message of the releases
    /// whose deletion waits for it (SPEC §32).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleting: bool,
}

/// Every release of both kinds in the release's namespace, plus each cross-namespace
/// dependency that exists. A requested ref missing here does not exist.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReport {
    /// The releases found; their `dependsOn` lets the core see cycles in the namespace.
    pub releases: Vec<ReleaseSnapshot>,
    /// One read per object entry (SPEC §32), in request order: its JSON, `Ok(None)` when
    /// absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<HealthObject>,
}

/// The artifact a ready Flux source advertises.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceArtifact {
    /// Where to download the artifact (`status.artifact.url`).
    pub url: String,
    /// The source's revision (e.g. `main@sha1:...`), shown in `status.source`.
    pub revision: String,
    /// The `sha256:` digest the download must match; the release's source digest.
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

/// A verified, cached artifact.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FetchedArtifact {
    /// The digest the artifact was verified against; the core checks it is the source's.
    pub digest: String,
    /// Bytes the extraction wrote, for traces and logs; the core does not use it.
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

/// A Kubernetes kind, by group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct GroupKind {
    /// The API group without version; empty for the core group (`ConfigMap`, `Namespace`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The kind within the group, e.g. `ClusterRole`.
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
    /// The digest of the Platform an OPM render used (SPEC §30); empty for a plain render.
    /// The core folds it into the config digest, so a Platform change re-renders and applies.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub platform: String,
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

/// The result of an operation on one object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectResult {
    /// The object the request was about.
    pub id: ResourceId,
    /// Whether the request succeeded, or the API's classified error.
    pub result: Result<(), ApiError>,
}

/// Per-object errors of a drift check (continuing past errors) and the drifted objects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    /// Objects whose managed fields differ from the desired state, or that are missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<ResourceId>,
    /// Objects whose dry-run failed; any one makes the drift counter count (SPEC §10).
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
    /// The drifted object, one of the report's `drifted`.
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
    /// The object did not exist; the apply created it.
    Created,
    /// The object existed and the apply changed it.
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
    /// The object the apply wrote or tried to write.
    pub id: ResourceId,
    /// What the apply did, or the error the exit is classified from (SPEC §4).
    pub result: Result<ApplyAction, ApiError>,
}

/// Results in apply order. The interpreter stops after the first stage with a failure;
/// objects never attempted are absent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    /// One result per object reached, in the order it was applied.
    pub objects: Vec<AppliedObject>,
}

/// The live state of a stale object, as far as the prune guards need it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LiveMeta {
    /// The uid read, the precondition of a later DELETE so that a successor is spared.
    pub uid: String,
    /// Its labels: `managed-by` and the release `uuid` decide whether it is ours.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// GET result for one stale object: `Ok(None)` when it is already gone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LiveObject {
    /// The object read, as the request named it.
    pub id: ResourceId,
    /// Its uid and labels, or why the read failed.
    pub result: Result<Option<LiveMeta>, ApiError>,
}

/// Why an input was refused. A refused input changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The input answers another effect than the one the attempt waits for.
    #[error("input {got} does not answer the awaited effect ({expected})")]
    Unexpected {
        /// The input the attempt waits for.
        expected: InputName,
        /// The input it was given.
        got: InputName,
    },
    /// The attempt has emitted `Done`; it takes no more inputs.
    #[error("the attempt is finished; start a new one with an observed input")]
    Finished,
    /// An attempt was started with something other than the observed release.
    #[error("an attempt must start with an observed input, got {got}")]
    NotObserved {
        /// The input it was started with.
        got: InputName,
    },
}

/// What the interpreter found in a remote cluster's kubeconfig Secret (SPEC §31). Facts, no
/// verdicts: `crate::remote` decides about them. Declared here, with the other inputs, so
/// the rule module depends on the inputs and not the other way round.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigFacts {
    /// The key the kubeconfig was read from.
    pub key: String,
    /// `sha256:` of the kubeconfig bytes.
    pub digest: String,
    /// The server URL of the current context, as written.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server: String,
    /// Fields that run a command or name a file of the operator's filesystem, as paths
    /// (`users[admin].user.exec`), in document order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insecure: Vec<String>,
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

/// What the interpreter found for one `valuesFrom` entry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ValuesContent {
    /// The key's content: with `targetPath` a string (the raw text), else the parsed
    /// document. Strings from a Secret are `sha256:<hex>` digests.
    Found {
        /// The content, ready to merge under `values`.
        value: Value,
    },
    /// The object does not exist.
    ObjectMissing,
    /// The object exists without the key.
    KeyMissing,
    /// The content is not valid YAML/JSON (or not UTF-8). `message` never quotes content:
    /// it is a position at most.
    Unparsable {
        /// Where parsing stopped.
        message: String,
    },
    /// Parsing stopped once this entry's content passed what was left of
    /// `--max-values-bytes` (a YAML anchor bomb stops here, never expanded in full), or the
    /// entry was not read because an earlier one passed it (`bytes` 0).
    TooLarge {
        /// The size of this entry counted before parsing stopped (the measure of
        /// [`crate::values_from::size_of`]).
        bytes: u64,
    },
}

/// What the interpreter found for `module.secretRef` (SPEC §27).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum CredentialsContent {
    /// A usable `kubernetes.io/dockerconfigjson` Secret; `digest` is `sha256:` of its
    /// `.dockerconfigjson` bytes, the key under which the interpreter keeps them.
    Found {
        /// Where the interpreter keeps the bytes; only this reaches the core.
        digest: String,
    },
    /// The Secret does not exist.
    ObjectMissing,
    /// Not of type `kubernetes.io/dockerconfigjson`, no `.dockerconfigjson` key, or not JSON.
    Invalid {
        /// What is wrong with it, never its content.
        message: String,
    },
}
