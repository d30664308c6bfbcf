//! `kubectl opm why KIND/NAME`: the release's state in words — what its conditions say, its
//! last failures from `status.history` with their times, when the next attempt is, and what
//! would start one earlier (SPEC §5's watch events, §1.4's annotation). Pure: it reads the
//! release object only, so the same object always gets the same explanation.

mod text;
mod triggers;

use jiff::Timestamp;
use opm_core::ReleaseObject;
use opm_core::api::ReleaseStatus;
use opm_core::constants::conditions as ct;
use opm_core::reason::Reason;
use serde::Serialize;

use crate::output;
use crate::releases;

pub use text::text;

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
    let seen = Seen {
        obj,
        status: &status,
        ready: &ready,
        reason: &reason,
        message: &message,
        stalled: is_true(&status, ct::STALLED),
    };
    let (state, mut summary) = state_and_summary(&seen, generation, retry_words.clone());
    let triggers = triggers::triggers(&seen, state);
    let (conditions, failures) = conditions_and_failures(&status, now);
    if status.observed_generation < generation && !status.conditions.is_empty() {
        summary.push_str(&format!(
            " (the status describes generation {}; generation {generation} is not handled yet)",
            status.observed_generation
        ));
    }
    let (cluster, left_behind) = clusters(obj, &status);
    Why {
        cluster,
        left_behind,
        release: releases::describe(&key),
        next_check_at: next_check(obj, &status, retry, now),
        state: state.to_string(),
        summary,
        conditions,
        failures,
        next_retry_at: retry_words,
        triggers,
    }
}

/// What [`explain`] reads of the release, once.
pub(super) struct Seen<'a> {
    pub(super) obj: &'a ReleaseObject,
    pub(super) status: &'a ReleaseStatus,
    pub(super) ready: &'a str,
    pub(super) reason: &'a str,
    pub(super) message: &'a str,
    pub(super) stalled: bool,
}

/// The state's name and the sentence about it.
fn state_and_summary(
    seen: &Seen<'_>,
    generation: i64,
    retry_words: Option<String>,
) -> (&'static str, String) {
    let Seen {
        obj,
        status,
        ready,
        reason,
        message,
        stalled,
    } = *seen;
    let counter = status.failure_counters.reconcile;
    let deleting = obj.meta().deletion_timestamp.is_some();
    if deleting && reason == Reason::DependentsExist {
        (
            "Deleting",
            format!(
                "is being deleted and keeps its objects until the releases that depend on it are gone ({reason}): {message}"
            ),
        )
    } else if deleting {
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
                retry_words.unwrap_or_else(|| "the 30m safety re-check".into())
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
                retry_words.unwrap_or_else(|| "not scheduled".into())
            ),
        )
    } else if ready == "False" {
        ("Failing", format!("is not ready ({reason}): {message}"))
    } else {
        (
            "Progressing",
            format!("is progressing ({reason}): {message}"),
        )
    }
}

/// The conditions, and the last failures of the history.
fn conditions_and_failures(
    status: &ReleaseStatus,
    now: Timestamp,
) -> (Vec<ConditionLine>, Vec<FailureLine>) {
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
    (conditions, failures)
}

/// Without a retry: when the periodic re-check comes.
fn next_check(
    obj: &ReleaseObject,
    status: &ReleaseStatus,
    retry: Option<Timestamp>,
    now: Timestamp,
) -> Option<String> {
    let interval = obj.common().interval.clone().unwrap_or_else(|| "5m".into());
    match (
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
    }
}

/// The remote cluster it applies to, and what it left behind in another.
fn clusters(obj: &ReleaseObject, status: &ReleaseStatus) -> (Option<String>, Option<String>) {
    let key = obj.key();
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
    (cluster, left_behind)
}

#[cfg(test)]
mod tests;
