//! What the answers carry when the effect ran: the reports and facts the interpreter
//! gathered, one type per awaited effect's success (and the per-object results inside
//! them). Facts only: every verdict about them is the machine's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ApiError;
use crate::object::{ReleaseKey, ResourceId};

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

/// A verified, cached artifact.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FetchedArtifact {
    /// The digest the artifact was verified against; the core checks it is the source's.
    pub digest: String,
    /// Bytes the extraction wrote, for traces and logs; the core does not use it.
    pub size: u64,
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
