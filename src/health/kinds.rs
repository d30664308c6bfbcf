//! kstatus's rules for the built-in kinds (SPEC §26): Deployments, StatefulSets,
//! DaemonSets, ReplicaSets, Jobs, Pods, PVCs, Services, Namespaces, PDBs and CRDs, each a
//! function from the object's JSON to a verdict in the user's words.

use serde_json::Value;

use super::access::{at, condition, int, int_or, str_at, with_detail};
use super::{Assessment, generic_conditions, pods};

/// The kstatus rule of a built-in kind; any other kind gets the generic `Ready` rule.
pub(super) fn builtin(group: &str, kind: &str, obj: &Value) -> Assessment {
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
