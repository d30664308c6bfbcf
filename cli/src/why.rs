//! `kubectl opm why KIND/NAME`: the release's state in words — what its conditions say, its
//! last failures from `status.history` with their times, when the next attempt is, and what
//! would start one earlier (SPEC §5's watch events, §1.4's annotation). Pure: it reads the
//! release object only, so the same object always gets the same explanation.

use jiff::Timestamp;
use opm_core::api::ReleaseStatus;
use opm_core::constants::conditions as ct;
use opm_core::reason::Reason;
use opm_core::{Kind, ReleaseObject};
use serde::Serialize;

use crate::output;
use crate::releases;
use crate::target;

/// The explanation, also what `-o json|yaml` prints.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Why {
    pub release: String,
    /// `Ready`, `Suspended`, `Stalled`, `BackingOff`, `Progressing`, `Blocked`, `Pending`,
    /// `Failing`, `Deleting`.
    pub state: String,
    pub summary: String,
    pub conditions: Vec<ConditionLine>,
    pub failures: Vec<FailureLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_retry_at: Option<String>,
    /// Without a retry: the periodic re-check (`spec.interval` after the last attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_check_at: Option<String>,
    pub triggers: Vec<String>,
    /// The remote cluster its objects are in (the kubeconfig's server URL), and the
    /// Secret naming it; absent when it applies to the cluster it lives in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Objects left in a cluster the release no longer points at (`status.leftBehind`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_behind: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailureLine {
    pub sequence: i64,
    pub phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    pub message: String,
}

/// Failures shown from the history.
const FAILURES_SHOWN: usize = 3;

fn is_true(s: &ReleaseStatus, t: &str) -> bool {
    releases::condition(s, t).is_some_and(|c| c.status == "True")
}

pub fn explain(obj: &ReleaseObject, now: Timestamp) -> Why {
    let key = obj.key();
    let status = releases::status(obj);
    let (ready, reason, message) = releases::ready(&status);
    let generation = obj.meta().generation.unwrap_or(0);
    let retry = status.next_retry_at.as_ref().map(|t| t.0);
    let retry_words = retry.map(|t| output::when(t, now));
    let counter = status.failure_counters.reconcile;
    let stalled = is_true(&status, ct::STALLED);

    let (state, summary) = if obj.meta().deletion_timestamp.is_some()
        && reason == Reason::DependentsExist
    {
        (
            "Deleting",
            format!(
                "is being deleted and keeps its objects until the releases that depend on it are gone ({reason}): {message}"
            ),
        )
    } else if obj.meta().deletion_timestamp.is_some() {
        (
            "Deleting",
            format!(
                "is being deleted (deletionPolicy decides what happens to its objects); Ready says: {reason}"
            ),
        )
    } else if obj.common().suspend {
        (
            "Suspended",
            "is suspended: the operator does not reconcile it until `spec.suspend` is false"
                .to_string(),
        )
    } else if status.conditions.is_empty() {
        ("Pending", "has no status yet: the operator has not reconciled it (is it running, and does its label selector match?)".to_string())
    } else if ready == "True" && status.observed_generation >= generation {
        ("Ready", format!("is ready ({reason}): {message}"))
    } else if stalled {
        (
            "Stalled",
            format!(
                "is stalled ({reason}): it will not be retried on a timer until {}; it waits for a change",
                retry_words
                    .clone()
                    .unwrap_or_else(|| "the 30m safety re-check".into())
            ),
        )
    } else if reason == Reason::DependenciesNotReady
        || (reason == Reason::SourceNotReady && counter == 0)
    {
        ("Blocked", format!("is waiting ({reason}): {message}"))
    } else if ready == "False" && counter > 0 {
        (
            "BackingOff",
            format!(
                "is failing ({reason}) and backing off after {counter} failed attempt{} in a row; next attempt {}",
                if counter == 1 { "" } else { "s" },
                retry_words
                    .clone()
                    .unwrap_or_else(|| "not scheduled".into())
            ),
        )
    } else if ready == "False" {
        ("Failing", format!("is not ready ({reason}): {message}"))
    } else {
        (
            "Progressing",
            format!("is progressing ({reason}): {message}"),
        )
    };

    let mut triggers = Vec::new();
    if state != "Ready" || stalled {
        triggers.push("a change of its spec (a new generation)".to_string());
    }
    match obj {
        ReleaseObject::Release(r) => {
            let s = &r.spec.source_ref;
            let ns = if s.namespace.is_empty() {
                key.namespace.clone()
            } else {
                s.namespace.clone()
            };
            triggers.push(format!(
                "a new artifact (revision or digest) of its source {} {ns}/{}",
                s.kind, s.name
            ));
        }
        ReleaseObject::ModuleRelease(m) => {
            for v in &m.spec.values_from {
                triggers.push(format!(
                    "a change of {} {}/{} (valuesFrom)",
                    v.kind.as_str(),
                    key.namespace,
                    v.name
                ));
            }
        }
    }
    if reason == Reason::ImpersonationFailed || reason == Reason::DeletionSAMissing {
        match &obj.common().service_account_name {
            Some(sa) => triggers.push(format!(
                "the ServiceAccount {}/{sa} appearing (or its RBAC changing)",
                key.namespace
            )),
            None => triggers.push(
                "setting spec.serviceAccountName to a ServiceAccount of the namespace".into(),
            ),
        }
    }
    if let Some(kc) = &obj.common().kube_config {
        triggers.push(format!(
            "the kubeconfig Secret {}/{} being created or changed",
            key.namespace, kc.secret_ref.name
        ));
    }
    if reason == Reason::DependenciesNotReady {
        for d in &obj.common().depends_on {
            if !opm_core::deps::is_release_ref(d) {
                triggers.push(format!(
                    "the dependency {} {} {} becoming ready (checked every 30s)",
                    d.api_version, d.kind, d.name
                ));
                continue;
            }
            let dep = opm_core::deps::key_of(&key, d);
            // As written when not one we know (the release is stalled naming it).
            let kind = if d.kind.is_empty() {
                dep.kind.as_str()
            } else {
                d.kind.as_str()
            };
            triggers.push(format!(
                "the dependency {kind} {} becoming Ready",
                dep.display()
            ));
        }
    }
    if reason == Reason::DependentsExist {
        triggers.push(
            "each release that depends on it going away (deleted, its finalizer gone)".into(),
        );
        triggers.push(format!(
            "the annotation {}: \"true\" (lets it go at once, its objects orphaned)",
            opm_core::constants::ORPHAN_ANNOTATION
        ));
    }
    if reason == Reason::HookFailed {
        triggers.push(
            "the retry after the backoff, which runs a failed hook Job again (deleted and created); a new render runs it at once".into(),
        );
    }
    if reason == Reason::HealthCheckFailed
        || reason == Reason::Progressing
        || is_true(&status, ct::HEALTHY)
    {
        triggers.push("a health change of one of its objects".into());
    }
    if !obj.common().suspend {
        triggers.push(format!(
            "`kubectl opm reconcile {}/{}` (the {} annotation)",
            target::short(key.kind),
            key.name,
            opm_core::constants::REQUESTED_AT_ANNOTATION
        ));
    }
    if key.kind == Kind::ModuleRelease && reason == Reason::ResolutionFailed {
        triggers.push("nothing in the registry: publishing the module version does not re-trigger; change the spec or request a reconcile".into());
    }

    let conditions = status
        .conditions
        .iter()
        .map(|c| ConditionLine {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            since: c
                .last_transition_time
                .as_ref()
                .map(|t| output::when(t.0, now)),
        })
        .collect();
    let failures = status
        .history
        .iter()
        .filter(|h| h.phase != "complete" && h.phase != "progressing" && !h.message.is_empty())
        .take(FAILURES_SHOWN)
        .map(|h| FailureLine {
            sequence: h.sequence,
            phase: h.phase.clone(),
            at: h.finished_at.as_ref().map(|t| output::when(t.0, now)),
            message: h.message.clone(),
        })
        .collect();
    let mut summary = summary;
    if status.observed_generation < generation && !status.conditions.is_empty() {
        summary.push_str(&format!(
            " (the status describes generation {}; generation {generation} is not handled yet)",
            status.observed_generation
        ));
    }
    let interval = obj.common().interval.clone().unwrap_or_else(|| "5m".into());
    let next_check_at = match (
        &retry,
        &status.last_attempted_at,
        opm_core::duration::parse(&interval),
    ) {
        (None, Some(last), Ok(d)) if !obj.common().suspend => {
            let d = jiff::SignedDuration::try_from(d).unwrap_or_default();
            // No-op checks do not move lastAttemptedAt: a time already past says only the period.
            match last.0.checked_add(d) {
                Ok(t) if t > now => Some(format!(
                    "{} (in {}; spec.interval {interval}, ±5%)",
                    jiff::Timestamp::from_second(t.as_second()).unwrap_or(t),
                    output::human(t.duration_since(now))
                )),
                _ => Some(format!("every {interval} (spec.interval)")),
            }
        }
        _ => None,
    };
    let applied_to = status
        .inventory
        .as_ref()
        .map(|i| i.cluster.clone())
        .filter(|c| !c.is_empty());
    let cluster = obj.common().kube_config.as_ref().map(|kc| {
        let secret = format!("kubeconfig Secret {}/{}", key.namespace, kc.secret_ref.name);
        match &applied_to {
            Some(server) => format!("{server} (through the {secret})"),
            None => format!("the cluster of the {secret} (nothing applied there yet)"),
        }
    });
    let left_behind = status.left_behind.as_ref().map(|l| {
        let from = if l.cluster.is_empty() {
            "the cluster the release lives in"
        } else {
            l.cluster.as_str()
        };
        format!(
            "{} objects in {from}, applied before the kubeconfig pointed elsewhere; the operator no longer manages them",
            l.count
        )
    });
    Why {
        cluster,
        left_behind,
        release: releases::describe(&key),
        next_check_at,
        state: state.to_string(),
        summary,
        conditions,
        failures,
        next_retry_at: retry_words,
        triggers,
    }
}

/// The explanation in words.
pub fn text(w: &Why) -> String {
    let mut out = format!("{} {}\n", w.release, w.summary);
    if let Some(c) = &w.cluster {
        out.push_str(&format!("Applies to cluster {c}\n"));
    }
    if let Some(l) = &w.left_behind {
        out.push_str(&format!("Left behind: {l}\n"));
    }
    if !w.conditions.is_empty() {
        out.push_str("\nConditions:\n");
        for c in &w.conditions {
            out.push_str(&format!("  {} is {}", c.type_, c.status));
            if !c.reason.is_empty() {
                out.push_str(&format!(" ({})", c.reason));
            }
            if let Some(since) = &c.since {
                out.push_str(&format!(" since {since}"));
            }
            if !c.message.is_empty() {
                out.push_str(&format!(": {}", c.message));
            }
            out.push('\n');
        }
    }
    if !w.failures.is_empty() {
        out.push_str("\nLast failures (newest first):\n");
        for f in &w.failures {
            out.push_str(&format!(
                "  #{} at {} during {}: {}\n",
                f.sequence,
                f.at.as_deref().unwrap_or("an unknown time"),
                f.phase,
                f.message
            ));
        }
    }
    out.push_str("\nNext attempt: ");
    match &w.next_retry_at {
        Some(t) => out.push_str(&format!("{t}\n")),
        None if w.state == "Suspended" => out.push_str("none while suspended\n"),
        None => match &w.next_check_at {
            Some(t) => out.push_str(&format!("the periodic check at {t}\n")),
            None => out.push_str("at the next interval (no retry scheduled)\n"),
        },
    }
    if !w.triggers.is_empty() {
        out.push_str("Would start earlier on:\n");
        for t in &w.triggers {
            out.push_str(&format!("  - {t}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::api::{
        Inventory, KubeConfigReference, KubeConfigSecretRef, LeftBehind, ModuleRelease,
    };

    #[test]
    fn a_remote_release_names_its_cluster_what_it_left_and_its_secret_as_a_trigger() {
        let mut mr: ModuleRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
            "metadata": {"name": "web", "namespace": "team", "generation": 1},
            "spec": {"module": {"path": "example.com/modules/web@v0", "version": "v0.2.1"}},
        }))
        .unwrap();
        mr.spec.common.kube_config = Some(KubeConfigReference {
            secret_ref: KubeConfigSecretRef {
                name: "prod".into(),
                key: None,
            },
        });
        let obj = ReleaseObject::ModuleRelease(mr.clone());
        let now = Timestamp::UNIX_EPOCH;
        let w = explain(&obj, now);
        assert_eq!(
            w.cluster.as_deref(),
            Some("the cluster of the kubeconfig Secret team/prod (nothing applied there yet)")
        );
        assert!(
            w.triggers
                .iter()
                .any(|t| t == "the kubeconfig Secret team/prod being created or changed")
        );
        mr.status = Some(opm_core::api::ReleaseStatus {
            inventory: Some(Inventory {
                cluster: "https://new:6443".into(),
                ..Default::default()
            }),
            left_behind: Some(LeftBehind {
                cluster: "https://old:6443".into(),
                count: 4,
                ..Default::default()
            }),
            ..Default::default()
        });
        let w = explain(&ReleaseObject::ModuleRelease(mr), now);
        let t = text(&w);
        assert!(
            t.contains(
                "Applies to cluster https://new:6443 (through the kubeconfig Secret team/prod)"
            ),
            "{t}"
        );
        assert!(
            t.contains("Left behind: 4 objects in https://old:6443"),
            "{t}"
        );
    }
}
