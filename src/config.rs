//! Operator policy flags the core needs (SPEC §22). Everything else is the interpreter's.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `--allow-operator-identity` (SPEC §15): what a release without any ServiceAccount may
/// do under the operator's own identity.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
#[serde(rename_all = "lowercase")]
pub enum AllowOperatorIdentity {
    /// No ServiceAccount is a stall (`ImpersonationFailed`): the multi-tenant default, so a
    /// release author never gains more than a ServiceAccount of the namespace has.
    #[default]
    Off,
    /// Apply as the operator, confined to namespaced objects in the release's namespace
    /// (anything else is a stall `ApplyFailed` naming the object).
    On,
    /// Apply as the operator wherever its RBAC reaches: every release author is trusted
    /// with the operator's rights.
    Cluster,
}

impl AllowOperatorIdentity {
    /// The flag value (`off`, `on`, `cluster`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Cluster => "cluster",
        }
    }
}

impl std::fmt::Display for AllowOperatorIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    #[serde(default = "default_requeue_dependency")]
    pub requeue_dependency: Duration,
    /// `--allow-operator-identity` (default off). Always written into trace headers; a
    /// header without it is from before the flag and replays as `cluster` (see
    /// `trace::TraceHeader`).
    #[serde(default)]
    pub allow_operator_identity: AllowOperatorIdentity,
    /// `--max-render-objects` (SPEC §24): more rendered objects stall `RenderFailed`.
    #[serde(default = "default_max_render_objects")]
    pub max_render_objects: u64,
    /// `--max-render-bytes` (SPEC §24): a larger exported JSON stalls `RenderFailed`.
    #[serde(default = "default_max_render_bytes")]
    pub max_render_bytes: u64,
    /// `--health-eval-timeout` (SPEC §24): the time one attempt's `healthCheckExprs`
    /// evaluations may take, together; over it the object being judged is `Failed`.
    #[serde(default = "default_health_eval_timeout")]
    pub health_eval_timeout: Duration,
    /// `--max-values-bytes` (SPEC §24): the parsed `valuesFrom` content of one release
    /// above this stalls `ValuesNotFound`; the interpreter stops parsing there.
    #[serde(default = "default_max_values_bytes")]
    pub max_values_bytes: u64,
    /// `--allow-insecure-kubeconfig` (default off): a remote kubeconfig may run a command
    /// or name a file of the operator's filesystem (SPEC §31).
    #[serde(default)]
    pub allow_insecure_kubeconfig: bool,
    /// `--max-kubeconfig-bytes` (SPEC §24): a larger kubeconfig stalls `InvalidKubeConfig`;
    /// the interpreter does not parse it.
    #[serde(default = "default_max_kubeconfig_bytes")]
    pub max_kubeconfig_bytes: u64,
    /// `--max-hooks` (SPEC §24, §32): more hooks in one render stall `RenderFailed`.
    #[serde(default = "default_max_hooks")]
    pub max_hooks: u64,
}

fn default_max_hooks() -> u64 {
    crate::hooks::DEFAULT_MAX_HOOKS
}

/// SPEC §24 default of `--max-kubeconfig-bytes` (64 KiB).
pub const DEFAULT_MAX_KUBECONFIG_BYTES: u64 = 64 * 1024;

fn default_max_kubeconfig_bytes() -> u64 {
    DEFAULT_MAX_KUBECONFIG_BYTES
}

/// SPEC §24 default of `--health-eval-timeout`.
pub const DEFAULT_HEALTH_EVAL_TIMEOUT: Duration = Duration::from_secs(1);

fn default_health_eval_timeout() -> Duration {
    DEFAULT_HEALTH_EVAL_TIMEOUT
}

fn default_requeue_dependency() -> Duration {
    Duration::from_secs(30)
}

/// SPEC §24 default of `--max-render-objects`.
pub const DEFAULT_MAX_RENDER_OBJECTS: u64 = 5_000;
/// SPEC §24 default of `--max-render-bytes` (32 MiB).
pub const DEFAULT_MAX_RENDER_BYTES: u64 = 32 * 1024 * 1024;

/// SPEC §24 default of `--max-values-bytes` (4 MiB).
pub const DEFAULT_MAX_VALUES_BYTES: u64 = 4 * 1024 * 1024;

fn default_max_values_bytes() -> u64 {
    DEFAULT_MAX_VALUES_BYTES
}

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
            requeue_dependency: default_requeue_dependency(),
            allow_operator_identity: AllowOperatorIdentity::Off,
            max_render_objects: DEFAULT_MAX_RENDER_OBJECTS,
            max_render_bytes: DEFAULT_MAX_RENDER_BYTES,
            health_eval_timeout: DEFAULT_HEALTH_EVAL_TIMEOUT,
            max_values_bytes: DEFAULT_MAX_VALUES_BYTES,
            allow_insecure_kubeconfig: false,
            max_kubeconfig_bytes: DEFAULT_MAX_KUBECONFIG_BYTES,
            max_hooks: crate::hooks::DEFAULT_MAX_HOOKS,
        }
    }
}

impl Config {
    /// This config with `--allow-operator-identity` set to `allow`.
    pub fn with_operator_identity(mut self, allow: AllowOperatorIdentity) -> Self {
        self.allow_operator_identity = allow;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_refuses_operator_identity() {
        assert_eq!(
            Config::default().allow_operator_identity,
            AllowOperatorIdentity::Off
        );
        let partial: Config = serde_json::from_str(r#"{"allowCrossNamespaceRefs":true}"#).unwrap();
        assert_eq!(partial.allow_operator_identity, AllowOperatorIdentity::Off);
        assert_eq!(partial.requeue_dependency, Duration::from_secs(30));
        let now = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(now["allowOperatorIdentity"], "off");
        for a in [
            AllowOperatorIdentity::Off,
            AllowOperatorIdentity::On,
            AllowOperatorIdentity::Cluster,
        ] {
            let back: Config = serde_json::from_value(
                serde_json::to_value(Config::default().with_operator_identity(a)).unwrap(),
            )
            .unwrap();
            assert_eq!(back.allow_operator_identity, a);
            assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
        }
    }
}
