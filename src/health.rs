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

mod cel_eval;
mod cel_rules;
mod pods;
mod summary;

pub use cel_eval::{MAX_BYTES as CEL_MAX_BYTES, MAX_STEPS as CEL_MAX_STEPS};
pub use cel_rules::{CompileError, EvalDeadline, HealthRules, ReadyExpr, ReadyExprError, compile};
pub use pods::pod_detail;
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
pub fn needs_assessment(group: &str, kind: &str) -> bool {
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
pub fn has_pods(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        (
            "apps",
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
        ) | ("batch", "Job")
    )
}

/// `apiVersion` → group (`apps/v1` → `apps`, `v1` → ``).
pub fn group_of(api_version: &str) -> &str {
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
    match (group, kind) {
        ("apps", "Deployment") => deployment(obj),
        ("apps", "StatefulSet") => stateful_set(obj),
        ("apps", "DaemonSet") => daemon_set(obj),
        ("apps", "ReplicaSet") => replica_set(obj),
        ("batch", "Job") => job(obj),
        ("", "Pod") => pod(obj),
        ("", "PersistentVolumeClaim") => pvc(obj),
        ("", "Service") => service(obj),
        ("", "Namespace") => namespace(obj),
        ("policy", "PodDisruptionBudget") => pdb(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(obj),
        _ => generic_conditions(obj),
    }
}

// ---- field access that never panics and says what was wrong ----

fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut v = obj;
    for p in path {
        v = v.as_object()?.get(*p)?;
    }
    Some(v)
}

/// An integer field: absent (or null) → `Ok(None)`; present but not an integer → an
/// `Unknown` verdict naming it.
fn int(obj: &Value, path: &[&str]) -> Result<Option<i64>, Assessment> {
    match at(obj, path) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| Assessment::unknown(format!("{} is not an integer", path.join(".")))),
    }
}

fn int_or(obj: &Value, path: &[&str], default: i64) -> Result<i64, Assessment> {
    Ok(int(obj, path)?.unwrap_or(default))
}

fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(obj, path).and_then(Value::as_str)
}

/// One condition of `status.conditions`, if the list and the entry are well formed.
struct Cond<'a> {
    status: &'a str,
    reason: &'a str,
    message: &'a str,
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<Cond<'a>> {
    let list = at(obj, &["status", "conditions"])?.as_array()?;
    list.iter().find_map(|c| {
        let c = c.as_object()?;
        (c.get("type")?.as_str()? == type_).then(|| Cond {
            status: c.get("status").and_then(Value::as_str).unwrap_or(""),
            reason: c.get("reason").and_then(Value::as_str).unwrap_or(""),
            message: c.get("message").and_then(Value::as_str).unwrap_or(""),
        })
    })
}

fn with_detail(head: &str, reason: &str, message: &str) -> String {
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => head.to_string(),
        (false, true) => format!("{head}: {reason}"),
        (true, false) => format!("{head}: {message}"),
        (false, false) => format!("{head}: {reason}: {message}"),
    }
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
fn generic_conditions(obj: &Value) -> Assessment {
    match condition(obj, "Ready") {
        Some(c) if c.status == "True" => Assessment::current("Ready"),
        Some(c) if c.status == "False" => {
            Assessment::progress(with_detail("not Ready", c.reason, c.message))
        }
        Some(c) => Assessment::progress(with_detail("Ready is Unknown", c.reason, c.message)),
        None => Assessment::current("applied"),
    }
}

/// A workload controller writes `status.observedGeneration`; until it has, nothing in the
/// status describes the current spec.
fn observed(obj: &Value) -> Result<(), Assessment> {
    match int(obj, &["status", "observedGeneration"])? {
        Some(_) => Ok(()),
        None => Err(Assessment::progress(
            "waiting for the controller to report status",
        )),
    }
}

// ---- built-in kinds ----

fn deployment(obj: &Value) -> Assessment {
    inner(|| {
        if let Some(c) = condition(obj, "Progressing")
            && c.reason == "ProgressDeadlineExceeded"
        {
            return Err(Assessment::failed(with_detail(
                "progress deadline exceeded",
                "",
                c.message,
            )));
        }
        observed(obj)?;
        let spec = int_or(obj, &["spec", "replicas"], 1)?;
        let replicas = int_or(obj, &["status", "replicas"], 0)?;
        let updated = int_or(obj, &["status", "updatedReplicas"], 0)?;
        let ready = int_or(obj, &["status", "readyReplicas"], 0)?;
        let available = int_or(obj, &["status", "availableReplicas"], 0)?;
        if spec > updated {
            return Err(Assessment::progress(format!(
                "{updated} of {spec} replicas updated"
            )));
        }
        if replicas > updated {
            return Err(Assessment::progress(format!(
                "{} old replicas pending termination",
                replicas - updated
            )));
        }
        if spec > available || updated > available {
            return Err(Assessment::progress(format!(
                "{available} of {spec} replicas available"
            )));
        }
        if spec > ready {
            return Err(Assessment::progress(format!(
                "{ready} of {spec} replicas ready"
            )));
        }
        if let Some(c) = condition(obj, "Available")
            && c.status != "True"
        {
            return Err(Assessment::progress(with_detail(
                "not Available",
                c.reason,
                c.message,
            )));
        }
        Ok(Assessment::current(format!(
            "{available} of {spec} replicas available"
        )))
    })
}

fn stateful_set(obj: &Value) -> Assessment {
    inner(|| {
        observed(obj)?;
        let spec = int_or(obj, &["spec", "replicas"], 1)?;
        let ready = int_or(obj, &["status", "readyReplicas"], 0)?;
        let replicas = int_or(obj, &["status", "replicas"], 0)?;
        if str_at(obj, &["spec", "updateStrategy", "type"]) == Some("OnDelete") {
            return Ok(Assessment::current("updated on delete"));
        }
        if spec > replicas {
            return Err(Assessment::progress(format!(
                "{replicas} of {spec} replicas created"
            )));
        }
        if spec > ready {
            return Err(Assessment::progress(format!(
                "{ready} of {spec} replicas ready"
            )));
        }
        let partition = int_or(
            obj,
            &["spec", "updateStrategy", "rollingUpdate", "partition"],
            0,
        )?;
        let updated = int_or(obj, &["status", "updatedReplicas"], 0)?;
        if partition > 0 {
            let want = (spec - partition).max(0);
            if updated < want {
                return Err(Assessment::progress(format!(
                    "{updated} of {want} replicas updated (partition {partition})"
                )));
            }
            return Ok(Assessment::current(format!(
                "partitioned roll out complete: {updated} replicas updated"
            )));
        }
        let current = str_at(obj, &["status", "currentRevision"]).unwrap_or("");
        let update = str_at(obj, &["status", "updateRevision"]).unwrap_or("");
        if current != update {
            return Err(Assessment::progress(format!(
                "{updated} of {spec} replicas updated to the new revision"
            )));
        }
        Ok(Assessment::current(format!(
            "{ready} of {spec} replicas ready"
        )))
    })
}

fn daemon_set(obj: &Value) -> Assessment {
    inner(|| {
        observed(obj)?;
        let Some(desired) = int(obj, &["status", "desiredNumberScheduled"])? else {
            return Err(Assessment::progress("waiting for the pods to be scheduled"));
        };
        let scheduled = int_or(obj, &["status", "currentNumberScheduled"], 0)?;
        let updated = int_or(obj, &["status", "updatedNumberScheduled"], 0)?;
        let available = int_or(obj, &["status", "numberAvailable"], 0)?;
        let ready = int_or(obj, &["status", "numberReady"], 0)?;
        for (have, what) in [
            (scheduled, "scheduled"),
            (updated, "updated"),
            (available, "available"),
            (ready, "ready"),
        ] {
            if desired > have {
                return Err(Assessment::progress(format!(
                    "{have} of {desired} pods {what}"
                )));
            }
        }
        Ok(Assessment::current(format!(
            "{available} of {desired} pods available"
        )))
    })
}

fn replica_set(obj: &Value) -> Assessment {
    inner(|| {
        if let Some(c) = condition(obj, "ReplicaFailure").filter(|c| c.status == "True") {
            return Err(Assessment::progress(with_detail(
                "replica failure",
                c.reason,
                c.message,
            )));
        }
        observed(obj)?;
        let spec = int_or(obj, &["spec", "replicas"], 1)?;
        let replicas = int_or(obj, &["status", "replicas"], 0)?;
        let labeled = int_or(obj, &["status", "fullyLabeledReplicas"], 0)?;
        let available = int_or(obj, &["status", "availableReplicas"], 0)?;
        let ready = int_or(obj, &["status", "readyReplicas"], 0)?;
        if spec > labeled {
            return Err(Assessment::progress(format!(
                "{labeled} of {spec} replicas labelled"
            )));
        }
        if spec > available {
            return Err(Assessment::progress(format!(
                "{available} of {spec} replicas available"
            )));
        }
        if spec > ready {
            return Err(Assessment::progress(format!(
                "{ready} of {spec} replicas ready"
            )));
        }
        if replicas > spec {
            return Err(Assessment::progress(format!(
                "{} replicas pending termination",
                replicas - spec
            )));
        }
        Ok(Assessment::current(format!(
            "{available} of {spec} replicas available"
        )))
    })
}

fn job(obj: &Value) -> Assessment {
    if let Some(c) = condition(obj, "Failed").filter(|c| c.status == "True") {
        return Assessment::failed(with_detail("job failed", c.reason, c.message));
    }
    if condition(obj, "Complete").is_some_and(|c| c.status == "True") {
        return Assessment::current("job complete");
    }
    inner(|| {
        let active = int_or(obj, &["status", "active"], 0)?;
        let succeeded = int_or(obj, &["status", "succeeded"], 0)?;
        let failed = int_or(obj, &["status", "failed"], 0)?;
        Err(Assessment::progress(format!(
            "job running: {active} active, {succeeded} succeeded, {failed} failed"
        )))
    })
}

fn pod(obj: &Value) -> Assessment {
    let phase = str_at(obj, &["status", "phase"]).unwrap_or("");
    match phase {
        "Succeeded" => return Assessment::current("pod completed"),
        "Failed" => {
            let reason = str_at(obj, &["status", "reason"]).unwrap_or("");
            let message = str_at(obj, &["status", "message"]).unwrap_or("");
            return Assessment::failed(with_detail("pod failed", reason, message));
        }
        _ => {}
    }
    if let Some(why) = pods::container_problem(obj) {
        return if why.fatal {
            Assessment::failed(why.text)
        } else {
            Assessment::progress(why.text)
        };
    }
    if phase == "Running" && condition(obj, "Ready").is_some_and(|c| c.status == "True") {
        return Assessment::current("pod running and ready");
    }
    if let Some(c) = condition(obj, "PodScheduled").filter(|c| c.status == "False") {
        return Assessment::progress(with_detail("pod not scheduled", c.reason, c.message));
    }
    if phase.is_empty() {
        Assessment::progress("pod waiting for a phase")
    } else {
        Assessment::progress(format!("pod {phase}, not ready"))
    }
}

fn pvc(obj: &Value) -> Assessment {
    match str_at(obj, &["status", "phase"]) {
        Some("Bound") => Assessment::current("bound"),
        Some("Lost") => Assessment::failed("the claim lost its volume"),
        Some(p) => Assessment::progress(format!("not bound ({p})")),
        None => Assessment::progress("not bound yet"),
    }
}

fn service(obj: &Value) -> Assessment {
    if str_at(obj, &["spec", "type"]) != Some("LoadBalancer") {
        return Assessment::current("applied");
    }
    let has_ingress = at(obj, &["status", "loadBalancer", "ingress"])
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if has_ingress {
        Assessment::current("load balancer has an ingress")
    } else {
        Assessment::progress("waiting for the load balancer's ingress address")
    }
}

fn namespace(obj: &Value) -> Assessment {
    match str_at(obj, &["status", "phase"]) {
        Some("Active") | None => Assessment::current("active"),
        Some(p) => Assessment::progress(format!("namespace {p}")),
    }
}

fn pdb(obj: &Value) -> Assessment {
    inner(|| {
        observed(obj)?;
        let current = int_or(obj, &["status", "currentHealthy"], 0)?;
        let desired = int_or(obj, &["status", "desiredHealthy"], 0)?;
        if current < desired {
            return Err(Assessment::progress(format!(
                "{current} of {desired} healthy pods the budget needs"
            )));
        }
        Ok(Assessment::current("budget satisfied"))
    })
}

fn crd(obj: &Value) -> Assessment {
    if let Some(c) = condition(obj, "NamesAccepted").filter(|c| c.status == "False") {
        return Assessment::failed(with_detail("names not accepted", c.reason, c.message));
    }
    match condition(obj, "Established") {
        Some(c) if c.status == "True" => Assessment::current("established"),
        _ => Assessment::progress("not established yet"),
    }
}

/// Runs a rule written with `?` on [`Assessment`] errors: `Ok` and `Err` are both verdicts.
fn inner(f: impl FnOnce() -> Result<Assessment, Assessment>) -> Assessment {
    match f() {
        Ok(a) | Err(a) => a,
    }
}

#[cfg(test)]
mod tests;
