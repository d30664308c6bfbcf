//! The two custom resources, `ModuleRelease` and `Release` (SPEC §1), and their shared status.
//!
//! Field names are the public contract: camelCase, empty strings and zero numbers omitted so a
//! status stays small and a merge patch never carries noise.

// `printcolumn(type_ = …)` repeats per column; clippy mistakes that for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod common;
pub mod platform;
mod status;
mod validation;
pub mod values_from;
pub use common::{
    DeletionPolicy, DependencyRef, DriftDetection, DriftMode, HealthCheckExpr, HealthCheckRef,
    IgnoreRule, IgnoreTarget, InventoryEntry, KubeConfigReference, KubeConfigSecretRef, ModuleRef,
    ReleaseCommon, Rollout, SourceRef,
};
pub use status::{
    Condition, FailureCounters, HealthObjectStatus, HealthReport, HistoryEntry, Inventory,
    LeftBehind, ReleaseStatus, SourceStatus,
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
    /// ConfigMaps and Secrets whose values are merged in order, then `values` on top; a
    /// missing object or key stalls the release with `ValuesNotFound` unless `optional`.
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

/// The three CustomResourceDefinitions (ModuleRelease, Release, Platform), as the API server should serve them.
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    use kube::CustomResourceExt;
    vec![ModuleRelease::crd(), Release::crd(), platform::crd()]
}
