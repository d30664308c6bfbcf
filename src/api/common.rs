//! Spec pieces shared by both kinds, and the inventory entry.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Schema for an arbitrary JSON value (`spec.values`).
pub(crate) fn any_json(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// What the API server accepts for `interval` and `timeout` (Go's duration syntax).
pub const GO_DURATION: &str = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$";

/// `spec.module` of a ModuleRelease.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleRef {
    /// CUE module import path, e.g. `example.com/modules/web@v0`.
    #[schemars(length(min = 1))]
    pub path: String,
    /// Exact version, e.g. `v0.2.1`.
    #[schemars(length(min = 1))]
    pub version: String,
}

/// `spec.sourceRef` of a Release: a Flux source object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// One `spec.dependsOn` entry.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct DependencyRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// `ModuleRelease` or `Release`; defaults to the depending release's own kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

/// `spec.rollout`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_conflicts: bool,
}

/// `spec.driftDetection`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftDetection {
    #[serde(default)]
    pub mode: DriftMode,
}

/// What to do about drift (SPEC §20).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum DriftMode {
    #[default]
    Warn,
    Correct,
    Disabled,
}

/// Spec fields both kinds share (flattened into each spec).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseCommon {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyRef>,
    /// Go duration string (`5m`, `1h30m`); default 5m, minimum 10s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(GO_DURATION))]
    pub interval: Option<String>,
    /// Go duration string; deadline of one attempt, default 5m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(GO_DURATION))]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_detection: Option<DriftDetection>,
}

/// One applied object in `status.inventory.entries` (`v` = API version).
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub v: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub component: String,
}
