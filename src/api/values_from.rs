//! `spec.valuesFrom[]` and `spec.module.secretRef` of a ModuleRelease (SPEC §1.1, §27).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::common::LocalSecretRef;
use super::common::{DNS1123_SUBDOMAIN, bounds};

/// A ConfigMap or Secret data key (what the API server accepts as one).
pub(crate) const DATA_KEY: &str = r"^[-._a-zA-Z0-9]+$";

/// The key read when `valuesKey` is unset (helm-controller's default).
pub(crate) const DEFAULT_VALUES_KEY: &str = "values.yaml";

/// What kind of object a `valuesFrom` entry reads.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    JsonSchema,
)]
pub enum ValuesKind {
    #[default]
    ConfigMap,
    Secret,
}

impl ValuesKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ValuesKind::ConfigMap => "ConfigMap",
            ValuesKind::Secret => "Secret",
        }
    }
}

/// One `valuesFrom` entry (helm-controller's shape): a ConfigMap or Secret of the release's
/// namespace, read under the release's effective identity.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValuesReference {
    /// `ConfigMap` or `Secret`.
    pub kind: ValuesKind,
    /// Name of the object in the release's namespace (a DNS-1123 subdomain).
    #[schemars(length(min = 1, max = bounds::NAME), pattern(DNS1123_SUBDOMAIN))]
    pub name: String,
    /// Data key holding the values; `values.yaml` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = bounds::NAME), pattern(DATA_KEY))]
    pub values_key: Option<String>,
    /// Dot path (`a.b.c`, `\.` for a dot inside a key) at which the key's content is set as
    /// one string value; without it the content is a YAML or JSON mapping merged at the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 250))]
    pub target_path: Option<String>,
    /// A missing object or key is skipped instead of stalling the release.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

impl ValuesReference {
    /// `valuesKey`, or the default when unset or empty.
    pub fn key(&self) -> &str {
        self.values_key
            .as_deref()
            .filter(|k| !k.is_empty())
            .unwrap_or(DEFAULT_VALUES_KEY)
    }
}
