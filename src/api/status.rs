//! The status both kinds share (SPEC §10): conditions, digests, inventory, history,
//! failure counters and the health report. Field names are the public contract.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::InventoryEntry;

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The status ledger shared by both kinds: empty strings and zero numbers are omitted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseStatus {
    /// The `metadata.generation` the last attempt saw.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    /// `Ready`, `Reconciling`, `Stalled`, `Healthy`, `Drifted` and, on a ModuleRelease,
    /// `ModuleResolved`; keyed by `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Where a `Release` got its artifact (absent on a ModuleRelease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
    /// A stable UUID of the release (UUIDv5 of kind, namespace and name), also the
    /// `module-release.opmodel.dev/uuid` label on every object it applies.
    #[serde(
        default,
        rename = "releaseUUID",
        skip_serializing_if = "String::is_empty"
    )]
    pub release_uuid: String,
    /// The last `reconcile.opmodel.dev/requestedAt` annotation value an attempt handled, so a
    /// script can wait for its request.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_handled_reconcile_at: String,
    /// What the last attempt did: `reconcile`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_action: String,
    /// When the last attempt that changed something (not a no-op) started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_at: Option<Time>,
    /// How long that attempt took, as a duration string (`1.2s`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_duration: String,
    /// `sha256:` digest of the source the last attempt used (the artifact's digest, or of
    /// `path@version`); omitted when the attempt failed before knowing it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_source_digest: String,
    /// `sha256:` digest of the render inputs from the spec (values, or the path) the last
    /// attempt used.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_config_digest: String,
    /// `sha256:` digest of the objects the last attempt rendered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_render_digest: String,
    /// When the last fully successful apply finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_at: Option<Time>,
    /// Source digest of the last full success; equal digests mean the next attempt is a no-op.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_applied_source_digest: String,
    /// Config digest of the last full success.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_applied_config_digest: String,
    /// Render digest of the last full success.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_applied_render_digest: String,
    /// Consecutive failures per activity; reset by a success.
    #[serde(default, skip_serializing_if = "FailureCounters::is_zero")]
    pub failure_counters: FailureCounters,
    /// What the last fully successful attempt applied: the objects a later prune or the
    /// deletion works from. A failed attempt keeps the previous inventory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    /// The last 10 attempts that changed something, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub history: Vec<HistoryEntry>,
    /// When the operator retries after a failure; absent after a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<Time>,
    /// The last health assessment, when `wait` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthReport>,
    /// Objects applied to a cluster the release no longer points at: left there, not
    /// deleted, and named here so they are not forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_behind: Option<LeftBehind>,
}

/// `status.leftBehind`: the inventory of the cluster the kubeconfig pointed at before.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeftBehind {
    /// That cluster's server URL (empty: the cluster the operator runs in).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// How many objects were left there.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub count: i64,
    /// When the release moved away from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The first of them (at most 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub entries: Vec<InventoryEntry>,
}

/// `status.health`: counts by verdict and the objects that are not `Current` (at most 10,
/// failing first).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthReport {
    /// When the objects were last assessed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Time>,
    /// How many objects were assessed (applied ones and `healthChecks` entries).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub total: i64,
    /// How many are healthy.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub current: i64,
    /// How many are still rolling out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_progress: i64,
    /// How many have failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i64,
    /// How many could not be assessed (for example missing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: i64,
    /// The objects that are not healthy, at most 10, failing first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub objects: Vec<HealthObjectStatus>,
}

/// One object of `status.health.objects`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthObjectStatus {
    /// API group of the object; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Kind of the object.
    pub kind: String,
    /// Namespace of the object; empty when cluster-scoped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the object.
    pub name: String,
    /// `Current`, `InProgress`, `Failed` or `Unknown`.
    pub status: String,
    /// Why the object has this status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the object entered this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// A condition as Kubernetes shows it; `type` is the list-map key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason; the documentation's troubleshooting page explains each one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What happened, for a person; at most 32 KiB.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When status, reason or message last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The `metadata.generation` the condition was written for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
}

/// Where a `Release` got its artifact.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// `<Kind>/<namespace>/<name>` of the Flux source.
    #[serde(rename = "ref", default, skip_serializing_if = "String::is_empty")]
    pub ref_: String,
    /// The artifact's revision as the source reports it (e.g. `main@sha1:…`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub artifact_revision: String,
    /// The artifact's `sha256:` digest, checked after download.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub artifact_digest: String,
    /// Where the artifact was downloaded from.
    #[serde(
        rename = "artifactURL",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub artifact_url: String,
}

/// Consecutive failures per activity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureCounters {
    /// Failed attempts in a row; sets the retry backoff (5s doubling to 5m).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reconcile: i64,
    /// Failed applies in a row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub apply: i64,
    /// Failed prunes in a row.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prune: i64,
    /// Drift checks in a row that failed to run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drift: i64,
}

impl FailureCounters {
    /// True when every counter is zero (then the field is omitted).
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// What the last fully successful attempt applied.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// Goes up by one with every successful apply.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision: i64,
    /// The server URL (no credentials) of the remote cluster the entries live in; empty:
    /// the cluster the operator runs in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// `sha256:` digest of the sorted entries.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// How many objects were applied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub count: i64,
    /// One entry per applied object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub entries: Vec<InventoryEntry>,
}

/// One attempt in the bounded ledger (at most 10 entries), newest first.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// Increases by one per entry.
    pub sequence: i64,
    /// What the attempt did: `reconcile`.
    pub action: String,
    /// `complete` on success, else the step that failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// When the attempt started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the attempt ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Source digest the attempt used, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_digest: String,
    /// Config digest the attempt used, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config_digest: String,
    /// Render digest the attempt produced, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub render_digest: String,
    /// Digest of the inventory the attempt left.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub inventory_digest: String,
    /// How many objects the attempt applied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inventory_count: i64,
    /// Why the attempt failed; at most 1 KiB.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
