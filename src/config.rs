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
    /// `--max-render-objects` (SPEC §24): more rendered objects stall `RenderFailed`.
    #[serde(default = "default_max_render_objects")]
    pub max_render_objects: u64,
    /// `--max-render-bytes` (SPEC §24): a larger exported JSON stalls `RenderFailed`.
    #[serde(default = "default_max_render_bytes")]
    pub max_render_bytes: u64,
}

/// SPEC §24 default of `--max-render-objects`.
pub const DEFAULT_MAX_RENDER_OBJECTS: u64 = 5_000;
/// SPEC §24 default of `--max-render-bytes` (32 MiB).
pub const DEFAULT_MAX_RENDER_BYTES: u64 = 32 * 1024 * 1024;

fn default_max_render_objects() -> u64 {
    DEFAULT_MAX_RENDER_OBJECTS
}

fn default_max_render_bytes() -> u64 {
    DEFAULT_MAX_RENDER_BYTES
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_service_account: None,
            allow_cross_namespace_refs: false,
            requeue_dependency: Duration::from_secs(30),
            max_render_objects: DEFAULT_MAX_RENDER_OBJECTS,
            max_render_bytes: DEFAULT_MAX_RENDER_BYTES,
        }
    }
}
