//! Health assessment (SPEC §26): a pure function from an object's JSON to
//! `Current | InProgress | Failed | Unknown` and a message in a user's words.
//!
//! The rules for built-in kinds follow kstatus (the library Flux, kapp and the kubectl
//! status commands share), so a user sees the same verdict here as there. `healthCheckExprs`
//! (Flux's shape) are CEL, parsed by the `cel` crate and evaluated here by a counting
//! evaluator (`cel_eval`), so the judgement of a custom resource is as replayable as
//! everything else the core decides, and bounded in steps and bytes.
//!
//! Two guarantees are checked by property tests over arbitrary JSON: the function never
//! panics, and an object whose `status.observedGeneration` is behind `metadata.generation`
//! is never `Current` (the controller has not looked at the latest spec yet, whatever the
//! rest of the status says).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod access;
mod cel_eval;
mod cel_rules;
mod kinds;
mod pods;
mod summary;

pub use cel_eval::{MAX_BYTES as CEL_MAX_BYTES, MAX_STEPS as CEL_MAX_STEPS};
pub use cel_rules::{CompileError, EvalDeadline, HealthRules, ReadyExpr, ReadyExprError, compile};
pub use pods::pod_detail;

use access::{at, condition, int, with_detail};
pub use summary::{Judged, MAX_NAMED, Summary, summarize, unhealthy_since};

/// The four verdicts of kstatus, in the order a summary lists them (worst first).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum HealthStatus {
    /// Will not get better by waiting: the attempt fails fast.
    Failed,
    /// Could not be judged (read failed, or no rule knows the kind's state).
    Unknown,
    /// Still rolling out.
    InProgress,
    /// Healthy.
    Current,
}

impl HealthStatus {
    /// The name shown in `status.health` and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Current => "Current",
            HealthStatus::InProgress => "InProgress",
            HealthStatus::Failed => "Failed",
            HealthStatus::Unknown => "Unknown",
        }
    }
}

/// A verdict and why, worded for the user (no object name: the caller prefixes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assessment {
    /// The verdict.
    pub status: HealthStatus,
    /// Why, in the user's words.
    pub message: String,
}

impl Assessment {
    fn new(status: HealthStatus, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
    fn current(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Current, message)
    }
    fn progress(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::InProgress, message)
    }
    fn failed(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Failed, message)
    }
    fn unknown(message: impl Into<String>) -> Self {
        Self::new(HealthStatus::Unknown, message)
    }
}

/// Kinds that are `Current` as soon as the API server accepted them: nothing reconciles
/// them into a state worth waiting for, so they are not even read (SPEC §26 "everything
/// else").
pub(crate) fn needs_assessment(group: &str, kind: &str) -> bool {
    !matches!(
        (group, kind),
        ("", "ConfigMap")
            | ("", "Secret")
            | ("", "ServiceAccount")
            | ("", "LimitRange")
            | ("", "ResourceQuota")
            | ("", "Endpoints")
            | ("rbac.authorization.k8s.io", _)
            | ("scheduling.k8s.io", "PriorityClass")
            | ("storage.k8s.io", "StorageClass")
            | ("networking.k8s.io", "NetworkPolicy")
            | ("networking.k8s.io", "IngressClass")
            | ("admissionregistration.k8s.io", _)
    )
}

/// Whether a workload's pods explain its state: these are the kinds whose message gains the
/// newest pods' reason once they have been waiting a while (SPEC §26).
pub(crate) fn has_pods(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "apps",
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
        ) | ("batch", "Job")
    )
}

/// `apiVersion` → group (`apps/v1` → `apps`, `v1` → ``).
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Assesses one object. `rules` are the compiled `healthCheckExprs` of the release.
pub fn assess(obj: &Value, rules: &HealthRules) -> Assessment {
    let Some(map) = obj.as_object() else {
        return Assessment::unknown("the object is not a JSON object");
    };
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    let group = group_of(map.get("apiVersion").and_then(Value::as_str).unwrap_or(""));
    // The guard every verdict passes through, the CEL one included.
    match generation_guard(obj) {
        Ok(None) => {}
        Ok(Some(a)) | Err(a) => return a,
    }
    if let Some(a) = rules.evaluate(group, kind, obj) {
        return a;
    }
    if let Some(a) = stalled_or_reconciling(obj) {
        return a;
    }
    kinds::builtin(group, kind, obj)
}

// ---- generic rules ----

/// Deletion in progress, or a controller that has not observed the latest generation: never
/// `Current`. `Err` carries an `Unknown` for ill-typed fields.
fn generation_guard(obj: &Value) -> Result<Option<Assessment>, Assessment> {
    if at(obj, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        return Ok(Some(Assessment::progress("being deleted")));
    }
    let generation = int(obj, &["metadata", "generation"])?;
    let observed = int(obj, &["status", "observedGeneration"])?;
    match (generation, observed) {
        (Some(g), Some(o)) if o < g => Ok(Some(Assessment::progress(format!(
            "waiting for the controller to observe generation {g} (observed {o})"
        )))),
        _ => Ok(None),
    }
}

/// kstatus's standard conditions: `Stalled=True` is `Failed`, `Reconciling=True` is
/// `InProgress`.
fn stalled_or_reconciling(obj: &Value) -> Option<Assessment> {
    if let Some(c) = condition(obj, "Stalled").filter(|c| c.status == "True") {
        return Some(Assessment::failed(with_detail(
            "stalled", c.reason, c.message,
        )));
    }
    if let Some(c) = condition(obj, "Reconciling").filter(|c| c.status == "True") {
        return Some(Assessment::progress(with_detail(
            "reconciling",
            c.reason,
            c.message,
        )));
    }
    None
}

/// Any other object: `Ready` decides when present; no status conditions at all is `Current`.
pub(super) fn generic_conditions(obj: &Value) -> Assessment {
    match condition(obj, "Ready") {
        Some(c) if c.status == "True" => Assessment::current("Ready"),
        Some(c) if c.status == "False" => {
            Assessment::progress(with_detail("not Ready", c.reason, c.message))
        }
        Some(c) => Assessment::progress(with_detail("Ready is Unknown", c.reason, c.message)),
        None => Assessment::current("applied"),
    }
}

#[cfg(test)]
mod tests;
