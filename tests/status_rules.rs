//! SPEC §10 (status commit), §11 (events), §1.4 (on-demand reconcile) and §5 (backoff
//! across attempts).

mod support;

use opm_core::Outcome;
use opm_core::api::{ModuleRelease, ReleaseStatus};
use opm_core::effect::{Effect, EffectKind, EventType};
use opm_core::input::RenderError;
use serde_json::json;
use support::*;

fn with_status(mut mr: ModuleRelease, s: &ReleaseStatus) -> ModuleRelease {
    mr.status = Some(s.clone());
    mr
}

fn eval_error(msg: &str) -> Canned {
    Canned {
        render: Err(RenderError::Evaluation {
            message: msg.into(),
        }),
        ..Default::default()
    }
}

fn unreachable_registry() -> Canned {
    Canned {
        render: Err(RenderError::RegistryUnreachable {
            message: "cannot do HTTP request".into(),
        }),
        ..Default::default()
    }
}

#[test]
fn repeated_stall_keeps_ltt_and_does_not_repeat_the_warning() {
    let canned = eval_error("bad values");
    let first = run_mr(&operator_cfg(), module_release(), &canned);
    let later = t0().checked_add(secs(1800)).unwrap();
    let second = run(
        &operator_cfg(),
        opm_core::ReleaseObject::ModuleRelease(with_status(module_release(), &first.status)),
        &canned,
        later,
    );
    assert_eq!(second.outcome, Outcome::FailedStalled);
    assert!(
        second.events().is_empty(),
        "no Warning storm while stalled: {:?}",
        second.events()
    );
    for t in ["Stalled", "Ready"] {
        assert_eq!(
            second.cond(t).unwrap().last_transition_time,
            first.cond(t).unwrap().last_transition_time
        );
    }
    assert_eq!(second.status.failure_counters.reconcile, 2);
    let seqs: Vec<i64> = second.status.history.iter().map(|h| h.sequence).collect();
    assert_eq!(seqs, vec![2, 1]);
    // A different message is a real transition: new LTT and a new Warning.
    let third = run(
        &operator_cfg(),
        opm_core::ReleaseObject::ModuleRelease(with_status(module_release(), &second.status)),
        &eval_error("other problem"),
        later.checked_add(secs(60)).unwrap(),
    );
    assert_eq!(third.events().len(), 1);
    assert_ne!(
        third.cond("Ready").unwrap().last_transition_time,
        first.cond("Ready").unwrap().last_transition_time
    );
}

#[test]
fn transient_backoff_grows_per_consecutive_failure_then_resets() {
    let canned = unreachable_registry();
    let mut status = ReleaseStatus::default();
    let mut requeues = Vec::new();
    let mut at = t0();
    for _ in 0..8 {
        let r = run(
            &operator_cfg(),
            opm_core::ReleaseObject::ModuleRelease(with_status(module_release(), &status)),
            &canned,
            at,
        );
        requeues.push(r.requeue.unwrap().as_secs());
        status = r.status;
        at = at.checked_add(secs(600)).unwrap();
    }
    assert_eq!(requeues, vec![5, 10, 20, 40, 80, 160, 300, 300]);
    assert_eq!(status.failure_counters.reconcile, 8);
    assert_eq!(status.history.len(), 8);
    // Success resets the counter and clears nextRetryAt.
    let ok = run(
        &operator_cfg(),
        opm_core::ReleaseObject::ModuleRelease(with_status(module_release(), &status)),
        &Canned::default(),
        at,
    );
    assert_eq!(ok.outcome, Outcome::Applied);
    assert_eq!(ok.status.failure_counters, Default::default());
    assert_eq!(ok.status.next_retry_at, None);
    assert_eq!(ok.cond("Reconciling"), None);
}

#[test]
fn history_is_capped_at_ten_newest_first() {
    let canned = eval_error("x");
    let mut status = ReleaseStatus::default();
    for i in 0..12 {
        let at = t0().checked_add(secs(3600 * i)).unwrap();
        status = run(
            &operator_cfg(),
            opm_core::ReleaseObject::ModuleRelease(with_status(module_release(), &status)),
            &canned,
            at,
        )
        .status;
    }
    let seqs: Vec<i64> = status.history.iter().map(|h| h.sequence).collect();
    assert_eq!(seqs, (3..=12).rev().collect::<Vec<_>>());
}

#[test]
fn conditions_are_ordered_and_carry_the_generation() {
    let mut mr = module_release();
    mr.metadata.generation = Some(7);
    let r = run_mr(
        &operator_cfg(),
        mr.clone(),
        &Canned {
            render: Err(RenderError::Resolution {
                message: "m".into(),
            }),
            ..Default::default()
        },
    );
    assert_eq!(r.cond_types(), vec!["Stalled", "Ready", "ModuleResolved"]);
    assert!(
        r.status
            .conditions
            .iter()
            .all(|c| c.observed_generation == 7)
    );
    assert_eq!(r.status.observed_generation, 7);
    let r = run_mr(&operator_cfg(), mr, &unreachable_registry());
    assert_eq!(r.cond_types(), vec!["Reconciling", "Ready"]);
}

#[test]
fn messages_are_truncated_in_conditions_and_history() {
    let long = "x".repeat(40 * 1024);
    let r = run_mr(&operator_cfg(), module_release(), &eval_error(&long));
    assert_eq!(r.cond("Ready").unwrap().message.len(), 32 * 1024);
    assert_eq!(r.status.history[0].message.len(), 1024);
    assert_eq!(r.events()[0].note.len(), 1024);
}

#[test]
fn digests_known_so_far_are_recorded_on_failure() {
    let canned = Canned {
        fetch: Some(Err(opm_core::FetchError::Timeout)),
        ..Default::default()
    };
    let r = run_rel(&operator_cfg(), release(), &canned);
    let s = &r.status;
    assert_eq!(
        s.last_attempted_config_digest,
        opm_core::digest::release_config("./app")
    );
    assert_eq!(s.last_attempted_source_digest, ARTIFACT_DIGEST);
    assert_eq!(s.last_attempted_render_digest, "");
    assert_eq!(s.last_attempted_duration, "2s", "resolve 1s + fetch 1s");
    let h = &s.history[0];
    assert_eq!(
        (h.source_digest.as_str(), h.render_digest.as_str()),
        (ARTIFACT_DIGEST, "")
    );
    assert_eq!(h.inventory_digest, "");
    assert!(s.last_applied_config_digest.is_empty());
}

#[test]
fn noop_commit_touches_only_its_fields() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    let s = mr.status.as_mut().unwrap();
    s.failure_counters.reconcile = 3;
    s.failure_counters.drift = 2;
    s.failure_counters.apply = 4;
    s.next_retry_at = Some(time(t0()));
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(r.outcome, Outcome::NoOp);
    match r.find(EffectKind::PatchStatus) {
        Some(Effect::PatchStatus { patch, .. }) => {
            assert_eq!(
                patch,
                &json!({"failureCounters": {"reconcile": null, "drift": null}, "nextRetryAt": null})
            );
        }
        other => panic!("{other:?}"),
    }
    // `apply` is only reset by an apply.
    assert_eq!(r.status.failure_counters.apply, 4);
}

#[test]
fn status_patch_failure_is_transient() {
    let canned = Canned {
        patch: Err(opm_core::ApiError::Conflict {
            message: "object changed".into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::FailedTransient, "StatusPatchFailed", Some(secs(5)))
    );
    assert_eq!(r.events().last().unwrap().event_type, EventType::Warning);
}

/// A status write refused with 429 and `Retry-After` waits at least that long; the backoff
/// grows with the failure counter the interpreter feeds (kept in memory while no write lands).
#[test]
fn status_patch_failure_backs_off_and_honours_retry_after() {
    let canned = Canned {
        patch: Err(opm_core::ApiError::TooManyRequests {
            message: "slow down".into(),
            retry_after_secs: Some(42),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_eq!(r.requeue, Some(secs(42)));
    let canned = Canned {
        patch: Err(opm_core::ApiError::Invalid {
            message: "denied by policy".into(),
        }),
        ..Default::default()
    };
    let mut mr = module_release();
    mr.status
        .get_or_insert_with(Default::default)
        .failure_counters
        .reconcile = 3;
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.requeue, Some(secs(40)), "n = 4: 5s · 2^3");
}

#[test]
fn on_demand_request_is_recorded_even_on_noop() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    mr.metadata.annotations = Some(
        [(
            "reconcile.opmodel.dev/requestedAt".to_string(),
            "2026-03-01T10:05:00Z".to_string(),
        )]
        .into(),
    );
    let r = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert_eq!(r.outcome, Outcome::NoOp);
    match r.find(EffectKind::PatchStatus) {
        Some(Effect::PatchStatus { patch, .. }) => {
            assert_eq!(
                patch,
                &json!({"lastHandledReconcileAt": "2026-03-01T10:05:00Z"})
            );
        }
        other => panic!("{other:?}"),
    }
    // Handled once: the next attempt with the same token writes nothing.
    mr.status = Some(r.status);
    let again = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert!(again.written.is_none());
    // It does not bypass suspend.
    let mut suspended = mr;
    suspended.spec.common.suspend = true;
    suspended.metadata.annotations = Some(
        [(
            "reconcile.opmodel.dev/requestedAt".to_string(),
            "later".to_string(),
        )]
        .into(),
    );
    let r = run_mr(&operator_cfg(), suspended, &Canned::default());
    assert_eq!(r.reason, "Suspended");
    assert_eq!(r.status.last_handled_reconcile_at, "2026-03-01T10:05:00Z");
}

#[test]
fn release_records_its_source() {
    let r = run_rel(&operator_cfg(), release(), &Canned::default());
    assert_eq!(r.outcome, Outcome::Applied);
    let src = r.status.source.as_ref().unwrap();
    assert_eq!(src.ref_, "OCIRepository/demo/repo");
    assert_eq!(src.artifact_digest, ARTIFACT_DIGEST);
    assert_eq!(src.artifact_revision, "v1@sha256:1111");
    assert_eq!(src.artifact_url, "http://127.0.0.1:9/app.tar.gz");
    assert_eq!(r.status.last_applied_source_digest, ARTIFACT_DIGEST);
    assert_eq!(
        r.status.last_applied_config_digest,
        opm_core::digest::release_config("./app")
    );
    assert_eq!(r.cond("ModuleResolved"), None);
    match r.find(EffectKind::Render) {
        Some(Effect::Render {
            request:
                opm_core::effect::RenderRequest::Artifact {
                    artifact_digest,
                    path,
                    ..
                },
        }) => {
            assert_eq!(
                (artifact_digest.as_str(), path.as_str()),
                (ARTIFACT_DIGEST, "./app")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::ResolveSource,
            EffectKind::FetchArtifact,
            EffectKind::Render,
            EffectKind::InspectOwners,
            EffectKind::Apply,
            EffectKind::AssessHealth,
            EffectKind::PatchStatus
        ]
    );
}

#[test]
fn interval_sets_the_success_requeue() {
    let mut mr = module_release();
    mr.spec.common.interval = Some("1m30s".into());
    assert_eq!(
        run_mr(&operator_cfg(), mr.clone(), &Canned::default()).requeue,
        Some(secs(90))
    );
    mr.spec.common.interval = Some("2s".into());
    assert_eq!(
        run_mr(&operator_cfg(), mr, &Canned::default()).requeue,
        Some(secs(10)),
        "minimum 10s"
    );
}
