//! Operator policy flags the core needs (SPEC §22). Everything else is the interpreter's.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Policy flags. Serialised into every trace header so a replay decides the same way.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// `--default-service-account`: used when `spec.serviceAccountName` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_service_account: Option<String>,
    /// `--allow-cross-namespace-refs` (default off).
    #[serde(default)]
    pub allow_cross_namespace_refs: bool,
    /// `--requeue-dependency`: requeue of soft-blocked exits (default 30s).
    pub requeue_dependency: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_service_account: None,
            allow_cross_namespace_refs: false,
            requeue_dependency: Duration::from_secs(30),
        }
    }
}
