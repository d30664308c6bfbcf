//! Spec pieces shared by both kinds, and the inventory entry.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub(crate) use super::validation::any_json;
pub use super::validation::{
    API_VERSION, DNS1123_LABEL, DNS1123_SUBDOMAIN, DURATION_AT_MOST_24H, DURATION_MAX_LENGTH,
    GO_DURATION, KIND, SOURCE_API_VERSION_RULE, bounds,
};

/// `spec.kubeConfig` (Flux's shape): where the remote cluster's kubeconfig is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigReference {
    /// The Secret, in the release's namespace, read with the operator's identity.
    pub secret_ref: KubeConfigSecretRef,
}

/// The Secret and key holding a kubeconfig.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigSecretRef {
    /// Name of the Secret in the release's namespace (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Key in the Secret's data; default `value`, else `value.yaml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = bounds::NAME), pattern(SECRET_KEY))]
    pub key: Option<String>,
}

/// A key of a Secret's `data`: letters, digits, `-`, `_` and `.`.
pub(crate) const SECRET_KEY: &str = r"^[-._a-zA-Z0-9]+$";

/// `spec.module` of a ModuleRelease.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleRef {
    /// CUE module import path, e.g. `example.com/modules/web@v0`.
    #[schemars(length(min = 1, max = bounds::MODULE_PATH))]
    pub path: String,
    /// Exact version, e.g. `v0.2.1`.
    #[schemars(length(min = 1, max = bounds::MODULE_VERSION))]
    pub version: String,
    /// A `kubernetes.io/dockerconfigjson` Secret in the release's namespace holding the
    /// registry credentials for this module's pull.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalSecretRef>,
}

/// `spec.module.secretRef`: a `kubernetes.io/dockerconfigjson` Secret of the release's
/// namespace with the registry's credentials.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalSecretRef {
    /// Name of the Secret in the release's namespace (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
}

/// `spec.sourceRef` of a Release: a Flux source object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// API version of the source: `source.toolkit.fluxcd.io/v1` (the default when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::API_VERSION))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": SOURCE_API_VERSION_RULE,
        "message": "sourceRef.apiVersion must be source.toolkit.fluxcd.io/v1 (or empty)"
    }]))]
    pub api_version: String,
    /// `OCIRepository`, `GitRepository` or `Bucket`.
    #[schemars(extend("enum" = ["OCIRepository", "GitRepository", "Bucket"]))]
    pub kind: String,
    /// Name of the source object (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Its namespace; defaults to the release's (another namespace needs
    /// `--allow-cross-namespace-refs`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAMESPACE), pattern(DNS1123_LABEL))]
    pub namespace: String,
}

/// One `spec.dependsOn` entry: a release, or with `apiVersion` and `kind` any object.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": DEPENDENCY_API_VERSION_RULE,
    "message": "a dependsOn entry of a kind other than ModuleRelease or Release needs apiVersion"
}]))]
pub struct DependencyRef {
    /// Name of the release (or object) depended on.
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Its namespace; defaults to this release's (another namespace needs
    /// `--allow-cross-namespace-refs`). Ignored for a cluster-scoped kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAMESPACE), pattern(DNS1123_LABEL))]
    pub namespace: String,
    /// API version of an object that is not a release (`v1`,
    /// `apiextensions.k8s.io/v1`, `example.com/v1`); empty for a release.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::API_VERSION), pattern(API_VERSION))]
    pub api_version: String,
    /// `ModuleRelease` or `Release` (the default: the depending release's own kind), or with
    /// `apiVersion` the kind of any object (`Secret`, `CustomResourceDefinition`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::KIND), pattern(r"^([A-Za-z][A-Za-z0-9]*)?$"))]
    pub kind: String,
    /// A CEL expression over the object (as `self`, also named `dep`) that must be true
    /// for the dependency to count as ready, e.g.
    /// `self.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')`.
    /// Without one, a release is ready at `Ready=True` for its generation and any other
    /// object once its health is `Current` (existence, for kinds without a status).
    /// Evaluated within the same step and memory bounds as `healthCheckExprs`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::EXPRESSION))]
    pub ready_expr: String,
}

/// A `dependsOn` entry of another kind than the release kinds names its `apiVersion`.
pub(crate) const DEPENDENCY_API_VERSION_RULE: &str = "!has(self.kind) || self.kind == '' || self.kind == 'ModuleRelease' || self.kind == 'Release' || (has(self.apiVersion) && self.apiVersion != '')";

/// `spec.rollout`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Take field ownership from other managers (server-side apply `force`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_conflicts: bool,
    /// Take over objects that exist but were created by no release (they carry no
    /// `module-release.opmodel.dev/uuid` label); without it such an object stalls the
    /// release with `OwnershipConflict`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt_existing: bool,
}

/// `spec.driftDetection`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftDetection {
    /// `Warn` (default) reports drift, `Correct` re-applies and takes fields other managers
    /// took (every apply forces), `Disabled` skips the check.
    #[serde(default)]
    pub mode: DriftMode,
    /// Fields never counted as drift nor taken back (Flux's shape): where another manager
    /// owns such a field it is left out of what is applied; where only the release manages
    /// it, its live value is kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::IGNORE_RULES))]
    pub ignore: Vec<IgnoreRule>,
}

/// One `driftDetection.ignore` rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreRule {
    /// JSON pointers (RFC 6901) of the ignored fields, e.g. `/spec/replicas`.
    #[schemars(length(min = 1, max = bounds::IGNORE_RULES), inner(length(max = bounds::POINTER)))]
    pub paths: Vec<String>,
    /// Which objects the rule applies to; all of the release's objects when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<IgnoreTarget>,
}

/// The objects an ignore rule selects: every given field must match exactly.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreTarget {
    /// API group of the objects (`apps`; empty matches any, core included).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAME))]
    pub group: String,
    /// API version without the group (`v1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAMESPACE))]
    pub version: String,
    /// Kind of the objects (`Deployment`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::KIND))]
    pub kind: String,
    /// Exact name of the object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAME))]
    pub name: String,
    /// Exact namespace of the object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAMESPACE), pattern(DNS1123_LABEL))]
    pub namespace: String,
    /// A Kubernetes label selector (`app=web,tier in (a,b)`) over the rendered labels.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::POINTER))]
    pub label_selector: String,
}

/// What deleting the release does to its objects: `MirrorPrune` (default) deletes them when
/// `prune` is true and orphans them otherwise, `Delete` always deletes them, `Orphan` never
/// does, `WaitForTermination` deletes them and keeps the finalizer until every one is gone,
/// bounded by `timeout`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete them when `prune` is true, orphan them otherwise.
    #[default]
    MirrorPrune,
    /// Always delete them.
    Delete,
    /// Never delete them.
    Orphan,
    /// Delete them and keep the finalizer until every one is gone, bounded by `timeout`.
    WaitForTermination,
}

/// What to do about drift.
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
    /// Releases that must be Ready (with `observedGeneration == generation`) before this one
    /// is reconciled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::DEPENDS_ON))]
    pub depends_on: Vec<DependencyRef>,
    /// Go duration string (`5m`, `1h30m`); default 5m, minimum 10s (shorter runs every
    /// 10s), at most 24h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(GO_DURATION), length(max = DURATION_MAX_LENGTH))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": DURATION_AT_MOST_24H,
        "message": "interval must be a duration of at most 24h"
    }]))]
    pub interval: Option<String>,
    /// Go duration string; deadline of one attempt, default 5m, at most 24h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(GO_DURATION), length(max = DURATION_MAX_LENGTH))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": DURATION_AT_MOST_24H,
        "message": "timeout must be a duration of at most 24h"
    }]))]
    pub timeout: Option<String>,
    /// Delete objects applied before and no longer rendered, and everything the release
    /// owns when it is deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
    /// Stop reconciling; deletion still runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// ServiceAccount of the release's namespace impersonated for apply, drift check and
    /// prune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub service_account_name: Option<String>,
    /// Apply to another cluster: a Secret of the release's namespace holding its
    /// kubeconfig. The release, its status, events and sources stay in this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigReference>,
    /// How conflicts with other field managers are handled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Whether and how drift from the desired state is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_detection: Option<DriftDetection>,
    /// What deleting the release does to its objects: `MirrorPrune` (default: delete them when
    /// `prune` is true, else orphan them), `Delete`, `Orphan` or `WaitForTermination` (delete
    /// them and keep the finalizer until every one is gone, bounded by `timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// Ready only once every applied object is healthy, within `timeout`; default true. `false`:
    /// Ready as soon as everything is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    /// Objects not applied by the release that must be healthy too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::HEALTH_CHECKS))]
    pub health_checks: Vec<HealthCheckRef>,
    /// CEL expressions deciding health for a kind (Flux's shape).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = bounds::HEALTH_CHECK_EXPRS))]
    pub health_check_exprs: Vec<HealthCheckExpr>,
}

impl ReleaseCommon {
    /// `spec.wait`, defaulting to true.
    pub fn waits(&self) -> bool {
        self.wait.unwrap_or(true)
    }
}

/// One applied object in `status.inventory.entries` (`v` = API version).
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
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
    /// API version the object was applied with.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub v: String,
    /// The module component the object came from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub component: String,
    /// `disabled` when the object was rendered with `releases.opmodel.dev/prune: disabled`:
    /// it is orphaned (release labels removed), never deleted.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prune: String,
}

/// One `spec.healthChecks` entry: an object not applied by the release that must be
/// healthy too.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckRef {
    /// `apps/v1`, `v1`, `example.com/v1alpha1`.
    #[schemars(length(min = 1, max = bounds::API_VERSION), pattern(API_VERSION))]
    pub api_version: String,
    /// Kind of the object, e.g. `Deployment`.
    #[schemars(length(min = 1, max = bounds::KIND), pattern(KIND))]
    pub kind: String,
    /// Name of the object (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Defaults to the release's namespace for namespaced kinds; another namespace needs
    /// `--allow-cross-namespace-refs`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = bounds::NAMESPACE), pattern(DNS1123_LABEL))]
    pub namespace: String,
}

/// One `spec.healthCheckExprs` entry (Flux's shape): CEL over the object deciding health
/// for every object of that kind. The object's top-level fields (`metadata`, `spec`,
/// `status`, …) are variables, and so is the whole object as `self`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckExpr {
    /// Matched by group (the version is ignored, so a served version change keeps working).
    #[schemars(length(min = 1, max = bounds::API_VERSION), pattern(API_VERSION))]
    pub api_version: String,
    /// The kind the expressions judge, e.g. `Certificate`.
    #[schemars(length(min = 1, max = bounds::KIND), pattern(KIND))]
    pub kind: String,
    /// True when the object is healthy.
    #[schemars(length(min = 1, max = bounds::EXPRESSION))]
    pub current: String,
    /// True while the object is still progressing (the default when nothing matches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = bounds::EXPRESSION))]
    pub in_progress: Option<String>,
    /// True when the object has failed: the wait ends at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = bounds::EXPRESSION))]
    pub failed: Option<String>,
}
