//! The `Platform` (SPEC §30): the cluster's choice of OPM catalogs, one per cluster, named
//! `cluster`. Its spec is upstream's current form (a catalog path with its major → an exact
//! version), so a platform team's manifest works with only its `apiVersion` changed; the
//! seed's older form (`filter` of version ranges) is refused by the CRD with a message that
//! says what to write instead.

// `printcolumn(type_ = …)` repeats per column; clippy mistakes that for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// The only name a Platform may have: the operator reads exactly one.
pub const PLATFORM_NAME: &str = "cluster";

/// Most catalogs one Platform may list (a real cluster uses one or two; the bound keeps the
/// platform package and its `cue` run small).
pub(crate) const MAX_CATALOGS: u32 = 32;

/// A catalog key: a CUE module path with its major version (`opmodel.dev/catalogs/opm@v2`).
pub const CATALOG_PATH: &str = r"^[a-z0-9][-a-z0-9.]*(/[A-Za-z0-9][-A-Za-z0-9._~]*)*@v[0-9]+$";

/// An exact semantic version, with or without the leading `v` (upstream writes
/// `2.0.0-alpha.3`, `cue` wants `v2.0.0-alpha.3`).
pub(crate) const EXACT_VERSION: &str = r"^v?[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$";

/// The CEL rule refusing every name but `cluster` (the seed's CRD did the same).
pub(crate) const NAME_RULE: &str = "self.metadata.name == 'cluster'";

/// The catalogs of transformers the cluster renders OPM modules with.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "releases.opmodel.dev",
    version = "v1alpha1",
    kind = "Platform",
    doc = "The OPM catalogs of transformers the cluster renders OPM modules with (one per cluster, named cluster).",
    shortname = "plat",
    status = "PlatformStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
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
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PlatformSpec {
    /// The platform type, e.g. `kubernetes` (upstream's `#Platform.type`).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 63), pattern(super::common::DNS1123_LABEL))]
    pub type_: String,
    /// Catalogs by module path with major (`opmodel.dev/catalogs/opm@v2`), each at an exact
    /// version: the Platform's pin wins over whatever version a module was built against.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = MAX_CATALOGS,
        "x-kubernetes-validations" = [{
            "rule": "self.all(k, size(k) <= 255 && k.matches('^[a-z0-9][-a-z0-9.]*(/[A-Za-z0-9][-A-Za-z0-9._~]*)*@v[0-9]+$'))",
            "message": "each registry key must be a catalog module path with its major version, e.g. opmodel.dev/catalogs/opm@v2"
        }]
    ))]
    pub registry: BTreeMap<String, CatalogPin>,
}

/// One catalog of `spec.registry`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.filter)",
        "message": "filter (version ranges) is no longer supported: pin the catalog's exact version in version, e.g. version: v2.0.0"
    },
    {
        "rule": "has(self.version)",
        "message": "version is required: pin the catalog's exact version, e.g. version: v2.0.0"
    }
]))]
pub struct CatalogPin {
    /// The exact catalog version, with or without the leading `v` (`v2.0.0`, `2.0.0-alpha.3`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 128), pattern(EXACT_VERSION))]
    pub version: String,
    /// Whether the catalog's transformers are used; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// The older form's version ranges: refused (pin `version`); present in the schema only
    /// so the API server says why instead of dropping it silently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub filter: Option<serde_json::Value>,
}

impl CatalogPin {
    /// `enable`, defaulting to true.
    pub fn enabled(&self) -> bool {
        self.enable.unwrap_or(true)
    }
}

/// What the operator found when it evaluated the Platform.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlatformStatus {
    /// The `metadata.generation` the last evaluation saw.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    /// `Ready` (`Succeeded` naming the transformers and catalogs, or `ResolutionFailed` with
    /// `cue`'s message) and `Stalled` while the failure is not transient; keyed by `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The enabled catalogs with their version and how many transformers each provides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub catalogs: Vec<CatalogStatus>,
    /// SHA-256 of the normalised spec: part of every OPM release's config digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
}

/// One entry of `status.catalogs`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogStatus {
    /// The catalog's CUE module path.
    pub path: String,
    /// The pinned version in use.
    pub version: String,
    /// How many transformers the catalog provides.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transformers: i64,
}

/// An object of any fields: typed, so the CEL rule refusing it can name it.
fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The Platform's CRD, with the name rule the derive cannot express (a root-level CEL rule).
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
    use kube::CustomResourceExt;
    let mut crd = Platform::crd();
    for v in &mut crd.spec.versions {
        if let Some(schema) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema
                .x_kubernetes_validations
                .get_or_insert_with(Vec::new)
                .push(ValidationRule {
                    rule: NAME_RULE.into(),
                    message: Some(
                        "a Platform must be named cluster: the operator reads that one only".into(),
                    ),
                    ..ValidationRule::default()
                });
            if schema
                .properties
                .as_ref()
                .is_some_and(|p| p.contains_key("spec"))
            {
                // Without a spec there is no `type`: refuse it rather than accept an empty Platform.
                let required = schema.required.get_or_insert_with(Vec::new);
                if !required.iter().any(|r| r == "spec") {
                    required.push("spec".into());
                }
            }
        }
    }
    crd
}
