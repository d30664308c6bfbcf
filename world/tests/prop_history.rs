//! Properties of every attempt over generated histories in the simulated world (SPEC §3-§10).
//!
//! Each case builds the base world of `world_support`, schedules a generated history of
//! spec edits, new artifacts, faults, deletions, suspends, RBAC changes, tampering and
//! restarts over four virtual hours, drives it, and checks each attempt's log.
//! `PROPTEST_CASES` sets the case count (default 16 per test).

mod world_support;

use std::time::Duration;

use opm_core::backoff::{STALLED_RECHECK, compute_backoff};
use opm_core::input::InputKind;
use opm_core::prune::is_protected;
use opm_core::{Effect, Outcome};
use opm_world::{AttemptLog, World};
use proptest::prelude::*;
use proptest::test_runner::Config as PtConfig;
use world_support::*;

const HORIZON: u32 = 2 * 3600;

fn cfg() -> PtConfig {
    pt_config("proptest-regressions/prop_history.txt", 16)
}

fn check_all(
    w: &World,
    f: impl Fn(&AttemptLog) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    for log in w.logs() {
        f(log).map_err(|e| {
            TestCaseError::fail(format!(
                "attempt {} of {:?} at {}: {e}",
                log.id, log.key, log.started_at
            ))
        })?;
    }
    Ok(())
}

/// Exactly one `Done`, last; every batch is fire-and-forget effects then one awaited
/// effect or `Done`; at most one status write.
fn batch_shape(log: &AttemptLog) -> Result<(), TestCaseError> {
    let effects: Vec<&Effect> = log.effects().collect();
    let dones = effects
        .iter()
        .filter(|e| matches!(e, Effect::Done { .. }))
        .count();
    prop_assert_eq!(dones, 1);
    prop_assert!(
        matches!(effects.last(), Some(Effect::Done { .. })),
        "Done is not last"
    );
    for (i, batch) in log.batches.iter().enumerate() {
        let (last, rest) = batch
            .split_last()
            .ok_or_else(|| TestCaseError::fail("empty batch"))?;
        prop_assert!(
            rest.iter()
                .all(|e| !e.is_awaited() && !matches!(e, Effect::Done { .. })),
            "batch {i}: {batch:?}"
        );
        prop_assert!(
            last.is_awaited() || matches!(last, Effect::Done { .. }),
            "batch {} ends in {:?}",
            i,
            last.kind()
        );
        prop_assert_eq!(
            i + 1 == log.batches.len(),
            matches!(last, Effect::Done { .. })
        );
    }
    let writes = effects
        .iter()
        .filter(|e| matches!(e, Effect::PatchStatus { .. }))
        .count();
    prop_assert!(writes <= 1, "{writes} status writes");
    prop_assert_eq!(log.inputs.len(), log.batches.len());
    prop_assert_eq!(
        log.status_mismatches,
        0,
        "merge patch and claimed status differ"
    );
    Ok(())
}

/// Inventory and `lastApplied*` change only when the attempt fully succeeded.
fn ledger_only_on_success(log: &AttemptLog) -> Result<(), TestCaseError> {
    let success = matches!(
        log.outcome,
        Some(Outcome::Applied | Outcome::AppliedAndPruned)
    );
    let (Some(before), Some(after)) = (log.observed_status(), log.status.as_ref()) else {
        return Ok(());
    };
    if success {
        return Ok(());
    }
    let deleting = matches!(&log.inputs[0].kind, InputKind::Observed { object: Some(o), .. } if o.meta().deletion_timestamp.is_some());
    if !deleting {
        prop_assert_eq!(&before.inventory, &after.inventory);
    }
    prop_assert_eq!(
        &before.last_applied_source_digest,
        &after.last_applied_source_digest
    );
    prop_assert_eq!(
        &before.last_applied_config_digest,
        &after.last_applied_config_digest
    );
    prop_assert_eq!(
        &before.last_applied_render_digest,
        &after.last_applied_render_digest
    );
    prop_assert_eq!(&before.last_applied_at, &after.last_applied_at);
    Ok(())
}

/// After an apply report with a failed object, no stale GET and no prune.
fn no_prune_after_failed_apply(log: &AttemptLog) -> Result<(), TestCaseError> {
    let mut failed = false;
    for (input, batch) in log.inputs.iter().zip(&log.batches) {
        if let InputKind::Applied { report } = &input.kind {
            failed |= report.objects.iter().any(|o| o.result.is_err());
        }
        if failed {
            prop_assert!(
                !batch
                    .iter()
                    .any(|e| matches!(e, Effect::Prune { .. } | Effect::InspectStale { .. })),
                "prune after failed apply"
            );
        }
    }
    Ok(())
}

/// Every DELETE targets an entry of the inventory the attempt started with, never a
/// Namespace or CRD, and the world removed nothing else.
fn prune_within_previous_inventory(log: &AttemptLog) -> Result<(), TestCaseError> {
    let inv = inventory_ids(log.observed_status());
    for e in log.effects() {
        if let Effect::Prune { deletions, .. } = e {
            for d in deletions {
                prop_assert!(
                    inv.contains(&identity(&d.id)),
                    "{:?} not in the previous inventory",
                    d.id
                );
                prop_assert!(!is_protected(&d.id), "protected {:?}", d.id);
            }
        }
    }
    for id in &log.deleted {
        prop_assert!(inv.contains(&identity(id)));
        prop_assert!(id.kind != "Namespace" && id.kind != "CustomResourceDefinition");
    }
    Ok(())
}

/// A NoOp writes nothing to the cluster.
fn noop_is_read_only(log: &AttemptLog) -> Result<(), TestCaseError> {
    let deleting = matches!(&log.inputs[0].kind, InputKind::Observed { object: Some(o), .. } if o.meta().deletion_timestamp.is_some());
    if log.outcome == Some(Outcome::NoOp) && !deleting {
        prop_assert!(
            !log.effects().any(|e| matches!(
                e,
                Effect::Apply { .. } | Effect::Prune { .. } | Effect::InspectStale { .. }
            )),
            "NoOp wrote to the cluster"
        );
    }
    Ok(())
}

/// Requeue follows the failure class: backoff(n) from the persisted counter for transient
/// failures, the dependency requeue for soft blocks (counters untouched), 30m for stalls.
fn requeue_matches_class(log: &AttemptLog, dep: Duration) -> Result<(), TestCaseError> {
    // The counter the delay derives from lives in the status: without a written status
    // (e.g. a failed finalizer removal while deleting) there is nothing to compare with.
    let wrote = log
        .effects()
        .any(|e| matches!(e, Effect::PatchStatus { .. }));
    if !wrote || crate::status_write_failed(log) {
        return Ok(());
    }
    let (Some(before), Some(after), Some(rq)) = (
        log.observed_status(),
        log.status.as_ref(),
        log.requeue_after,
    ) else {
        return Ok(());
    };
    match log.outcome {
        Some(Outcome::FailedStalled) => prop_assert_eq!(rq, STALLED_RECHECK),
        Some(Outcome::FailedTransient) => {
            let n = after.failure_counters.reconcile;
            if n == before.failure_counters.reconcile + 1 {
                prop_assert_eq!(rq, compute_backoff(n), "n = {}", n);
            } else {
                prop_assert_eq!(rq, dep, "soft block");
                prop_assert_eq!(&before.failure_counters, &after.failure_counters);
            }
        }
        _ => {}
    }
    Ok(())
}

fn condition<'a>(
    st: &'a opm_core::api::ReleaseStatus,
    t: &str,
) -> Option<&'a opm_core::api::Condition> {
    st.conditions.iter().find(|c| c.type_ == t)
}

fn observed_object(log: &AttemptLog) -> Option<&opm_core::ReleaseObject> {
    match &log.inputs[0].kind {
        InputKind::Observed {
            object: Some(o), ..
        } => Some(o),
        _ => None,
    }
}

/// Outcome ↔ conditions ↔ nextRetryAt (SPEC §4, §5, §10) on the persisted status of a
/// reconcile (not deleting, not suspended) whose status write went through.
fn conditions_match_outcome(log: &AttemptLog) -> Result<(), TestCaseError> {
    let Some(obj) = observed_object(log) else {
        return Ok(());
    };
    if obj.meta().deletion_timestamp.is_some() || obj.common().suspend || status_write_failed(log) {
        return Ok(());
    }
    if !log
        .effects()
        .any(|e| matches!(e, Effect::PatchStatus { .. }))
    {
        return Ok(());
    }
    let Some(st) = log.status.as_ref() else {
        return Ok(());
    };
    let ready = condition(st, "Ready").ok_or_else(|| TestCaseError::fail("no Ready condition"))?;
    let stalled = condition(st, "Stalled").map(|c| c.status.as_str());
    match log.outcome {
        // Waiting for health (SPEC §4): the attempt's own outcome, or `progressing`.
        Some(Outcome::Progressing | Outcome::Applied | Outcome::AppliedAndPruned)
            if log.reason == "Progressing" =>
        {
            prop_assert_eq!(ready.status.as_str(), "Unknown");
            prop_assert_eq!(ready.reason.as_str(), "Progressing");
            let h = condition(st, "Healthy")
                .ok_or_else(|| TestCaseError::fail("no Healthy condition while waiting"))?;
            prop_assert_eq!(h.status.as_str(), "Unknown");
            prop_assert!(stalled != Some("True"), "stalled while waiting");
            prop_assert!(st.next_retry_at.is_some());
        }
        Some(Outcome::Progressing) => prop_assert!(false, "progressing without waiting"),
        Some(Outcome::Applied | Outcome::AppliedAndPruned | Outcome::NoOp) => {
            prop_assert_eq!(ready.status.as_str(), "True");
            prop_assert!(stalled != Some("True"), "stalled after success");
            prop_assert!(st.next_retry_at.is_none(), "nextRetryAt after success");
            prop_assert_eq!(st.failure_counters.reconcile, 0);
        }
        Some(Outcome::FailedStalled) => {
            prop_assert_eq!(ready.status.as_str(), "False");
            let s = condition(st, "Stalled")
                .ok_or_else(|| TestCaseError::fail("no Stalled condition"))?;
            prop_assert_eq!(s.status.as_str(), "True");
            prop_assert_eq!(&s.reason, &ready.reason);
            prop_assert_eq!(&ready.reason, &log.reason);
            prop_assert!(
                condition(st, "Reconciling").is_none_or(|c| c.status != "True"),
                "Reconciling kept on a stall"
            );
            prop_assert!(st.next_retry_at.is_some());
        }
        Some(Outcome::FailedTransient) => {
            prop_assert_eq!(ready.status.as_str(), "False");
            prop_assert!(stalled != Some("True"), "stalled on a transient failure");
            prop_assert_eq!(&ready.reason, &log.reason);
            prop_assert!(st.next_retry_at.is_some());
        }
        None => prop_assert!(false, "no outcome"),
    }
    Ok(())
}

/// No event storm: a Warning identical (reason and note) to what the persisted `Ready`
/// condition already shows is not emitted again.
fn no_repeated_warning(log: &AttemptLog) -> Result<(), TestCaseError> {
    let Some(ready) = log.observed_status().and_then(|s| condition(s, "Ready")) else {
        return Ok(());
    };
    if ready.status != "False" {
        return Ok(());
    }
    for e in log.effects() {
        if let Effect::EmitEvent { event } = e {
            prop_assert!(
                !(event.event_type == opm_core::EventType::Warning
                    && ready.reason == event.reason
                    && event.note == ready.message),
                "Warning {} repeated: {}",
                event.reason,
                event.note
            );
        }
    }
    Ok(())
}

/// A stalled release is not attempted again within 30 minutes unless a watch event
/// (spec, artifact, annotation, ServiceAccount, dependency, restart) triggered it.
fn stall_waits(w: &World) -> Result<(), TestCaseError> {
    let tl = w.timeline();
    for (i, prev) in tl.iter().enumerate() {
        if prev.outcome != Some(Outcome::FailedStalled) {
            continue;
        }
        let Some(next) = tl[i + 1..].iter().find(|e| e.key == prev.key) else {
            continue;
        };
        let waited = next.started_at.duration_since(prev.finished_at);
        let triggered = w.triggers().iter().any(|t| {
            t.key == prev.key && t.before_attempt > prev.id && t.before_attempt <= next.id
        });
        prop_assert!(
            triggered || waited >= jiff::SignedDuration::from_secs(30 * 60),
            "{:?} retried after {waited} without a trigger",
            prev.key
        );
    }
    Ok(())
}

/// Runs every per-attempt property on one generated history, naming the one that failed.
fn check_history(w: &World) -> Result<(), TestCaseError> {
    let dep = w.config().requeue_dependency;
    let named = |name: &'static str, f: &dyn Fn(&AttemptLog) -> Result<(), TestCaseError>| {
        check_all(w, f).map_err(|e| TestCaseError::fail(format!("[{name}] {e}")))
    };
    named(
        "one Done, batch shape, at most one status write",
        &batch_shape,
    )?;
    named(
        "inventory and lastApplied* change only on success",
        &ledger_only_on_success,
    )?;
    named(
        "no prune after a failed apply",
        &no_prune_after_failed_apply,
    )?;
    named(
        "prune stays inside the previous inventory",
        &prune_within_previous_inventory,
    )?;
    named("NoOp emits no apply or prune", &noop_is_read_only)?;
    named("requeue follows the failure class", &|l| {
        requeue_matches_class(l, dep)
    })?;
    named(
        "outcome matches conditions and nextRetryAt",
        &conditions_match_outcome,
    )?;
    named(
        "no repeated Warning while the condition shows it",
        &no_repeated_warning,
    )?;
    stall_waits(w)
        .map_err(|e| TestCaseError::fail(format!("[stall waits 30m unless triggered] {e}")))?;
    // Namespaces rendered by `c` are never deleted, whatever the artifact does later.
    for ns in ["c-extra-0", "c-extra-1"] {
        let applied_ok = w.logs().iter().any(|l| {
            l.inputs.iter().any(|i| {
                matches!(&i.kind, InputKind::Applied { report }
                    if report.objects.iter().any(|o| o.id.kind == "Namespace" && o.id.name == ns && o.result.is_ok()))
            })
        });
        if applied_ok {
            prop_assert!(
                w.store().namespace_exists(ns),
                "[namespaces are never pruned] {ns} deleted"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cfg())]

    /// The rules above, over histories with every kind of world event.
    #[test]
    fn every_attempt_obeys_the_reconcile_rules(s in setup(), h in busy_history(6, 30, HORIZON, false)) {
        let w = run(&s, &h, HORIZON);
        prop_assert!(!w.logs().is_empty());
        if std::env::var_os("WORLD_STATS").is_some() {
            let mut by = std::collections::BTreeMap::new();
            for e in w.timeline() {
                *by.entry(format!("{:?}/{}", e.outcome, e.reason)).or_insert(0) += 1;
            }
            let pruned: usize = w.logs().iter().map(|l| l.deleted.len()).sum();
            eprintln!("{} attempts, {pruned} objects pruned: {by:?}", w.timeline().len());
        }
        check_history(&w)?;
    }

    /// The same rules when only faults, new artifacts, restarts and requests happen: more
    /// attempts reach apply and prune.
    #[test]
    fn fault_histories_obey_the_reconcile_rules(s in setup(), h in busy_history(4, 20, HORIZON, true)) {
        let w = run(&s, &h, HORIZON);
        check_history(&w)?;
    }
}
