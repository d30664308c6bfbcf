//! The two custom resources, `ModuleRelease` and `Release` (SPEC §1), and their shared status.
//!
//! Field names are the public contract: camelCase, empty strings and zero numbers omitted so a
//! status stays small and a merge patch never carries noise.

// `printcolumn(type_ = …)` repeats per column; clippy mistakes that for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod common;
pub mod platform;
pub mod values_from;
pub use common::{
    DeletionPolicy, DependencyRef, DriftDetection, DriftMode, HealthCheckExpr, HealthCheckRef,
    IgnoreRule, IgnoreTarget, InventoryEntry, KubeConfigReference, KubeConfigSecretRef, ModuleRef,
    ReleaseCommon, Rollout, SourceRef,
};

/// A release of a CUE module pulled from an OCI registry by path and version.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "releases.opmodel.dev",
    version = "v1alpha1",
    kind = "ModuleRelease",
    doc = "A release of a CUE module pulled from an OCI registry by path and version, rendered with spec.values and kept applied.",
    namespaced,
    shortname = "mr",
    status = "ReleaseStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Module", type_ = "string", json_path = ".spec.module.path"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.module.version"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Retry",
        // A future time: kubectl renders `date` columns as an age and shows `<invalid>`.
        type_ = "string",
        json_path = ".status.nextRetryAt",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ModuleReleaseSpec {
    /// The module to render.
    pub module: ModuleRef,
    /// Release values, unified with the module's `#config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "common::any_json")]
    pub values: Option<serde_json::Value>,
    /// ConfigMaps and Secrets merged in order under `values` (SPEC §27).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = common::bounds::VALUES_FROM))]
    pub values_from: Vec<values_from::ValuesReference>,
    /// Options shared by both kinds.
    #[serde(flatten)]
    pub common: ReleaseCommon,
}

/// A release package inside a Flux source artifact.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "releases.opmodel.dev",
    version = "v1alpha1",
    kind = "Release",
    doc = "A CUE release package inside a Flux source artifact, rendered and kept applied.",
    namespaced,
    shortname = "rel",
    status = "ReleaseStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Source", type_ = "string", json_path = ".spec.sourceRef.name"),
    printcolumn(name = "Path", type_ = "string", json_path = ".spec.path"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Revision",
        type_ = "string",
        json_path = ".status.source.artifactRevision",
        priority = "1"
    ),
    printcolumn(
        name = "Retry",
        // A future time: kubectl renders `date` columns as an age and shows `<invalid>`.
        type_ = "string",
        json_path = ".status.nextRetryAt",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseSpec {
    /// The Flux source holding the artifact.
    pub source_ref: SourceRef,
    /// Directory in the artifact holding `instance.cue` (an OPM instance) or `release.cue`; `.` is the artifact root.
    #[schemars(length(min = 1, max = common::bounds::ARTIFACT_PATH))]
    pub path: String,
    /// Options shared by both kinds.
    #[serde(flatten)]
    pub common: ReleaseCommon,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The status ledger shared by both kinds (SPEC §1.2).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseStatus {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceStatus>,
    #[serde(
        default,
        rename = "releaseUUID",
        skip_serializing_if = "String::is_empty"
    )]
    pub release_uuid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_handled_reconcile_at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_at: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_duration: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_source_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_config_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_attempted_render_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_at: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_applied_source_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_applied_config_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_applied_render_digest: String,
    #[serde(default, skip_serializing_if = "FailureCounters::is_zero")]
    pub failure_counters: FailureCounters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub history: Vec<HistoryEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<Time>,
    /// The last health assessment (SPEC §26), when `wait` is on.
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Time>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub total: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub current: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub in_progress: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unknown: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub objects: Vec<HealthObjectStatus>,
}

/// One object of `status.health.objects`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthObjectStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    /// `Current`, `InProgress`, `Failed` or `Unknown`.
    pub status: String,
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
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
}

/// Where a `Release` got its artifact (SPEC §16).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    /// `<Kind>/<namespace>/<name>` of the Flux source.
    #[serde(rename = "ref", default, skip_serializing_if = "String::is_empty")]
    pub ref_: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub artifact_revision: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub artifact_digest: String,
    #[serde(
        rename = "artifactURL",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub artifact_url: String,
}

/// Consecutive failures per activity (SPEC §10).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureCounters {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reconcile: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub apply: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prune: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drift: i64,
}

impl FailureCounters {
    /// True when every counter is zero (then the field is omitted).
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// What the last fully successful attempt applied (SPEC §8).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub revision: i64,
    /// The server URL (no credentials) of the remote cluster the entries live in; empty:
    /// the cluster the operator runs in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub count: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub entries: Vec<InventoryEntry>,
}

/// One attempt in the bounded ledger, newest first (SPEC §10).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    pub sequence: i64,
    pub action: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub config_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub render_digest: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub inventory_digest: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inventory_count: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The three CustomResourceDefinitions (ModuleRelease, Release, Platform), as the API server should serve them.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::CustomResourceExt;
    vec![ModuleRelease::crd(), Release::crd(), platform::crd()]
}
