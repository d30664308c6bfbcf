//! SPEC §4 rows from impersonation on: one scenario per row, asserting outcome, conditions,
//! events, requeue and ledger.

mod support;

use std::collections::BTreeMap;

use opm_core::api::{DriftDetection, DriftMode};
use opm_core::effect::{Effect, EffectKind, EventType, Metric};
use opm_core::input::{ApiError, DriftReport, RenderOutput};
use opm_core::{Kind, Outcome, ResourceId};
use serde_json::json;
use support::*;

#[test]
fn missing_service_account_stalls() {
    let mut mr = module_release();
    mr.spec.common.service_account_name = Some("deployer".into());
    let canned = Canned {
        sa_exists: Ok(false),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_stall(
        &r,
        "ImpersonationFailed",
        "Apply",
        "ServiceAccount \"deployer\" not found in namespace \"demo\"",
    );
    assert!(r.find(EffectKind::Apply).is_none());
}

#[test]
fn forbidden_while_impersonating_stalls() {
    let mut mr = module_release();
    mr.spec.common.service_account_name = Some("deployer".into());
    let canned = Canned {
        apply_errors: BTreeMap::from([(
            "web-config".to_string(),
            ApiError::Forbidden {
                message: "cannot create configmaps".into(),
            },
        )]),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_stall(
        &r,
        "ImpersonationFailed",
        "Apply",
        "apply forbidden while impersonating system:serviceaccount:demo:deployer: ConfigMap/demo/web-config: forbidden: cannot create configmaps",
    );
    assert_eq!(r.status.failure_counters.apply, 1);
}

#[test]
fn apply_invalid_or_conflict_stalls() {
    let conflict = "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas";
    let canned = Canned {
        apply_errors: BTreeMap::from([(
            "web".to_string(),
            ApiError::Conflict {
                message: conflict.into(),
            },
        )]),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    // Both web objects (Service, Deployment) conflict; each is named with the server message.
    let msg = format!(
        "apply failed: Service/demo/web: conflict: {conflict}; Deployment/demo/web: conflict: {conflict}"
    );
    assert_stall(&r, "ApplyFailed", "Apply", &msg);
    assert_eq!(r.status.failure_counters.apply, 1);
    assert!(
        r.find(EffectKind::InspectStale).is_none(),
        "no prune after a failed apply"
    );

    let canned = Canned {
        apply_errors: BTreeMap::from([(
            "web-config".to_string(),
            ApiError::Invalid {
                message: "field is immutable".into(),
            },
        )]),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_stall(
        &r,
        "ApplyFailed",
        "Apply",
        "apply failed: ConfigMap/demo/web-config: invalid: field is immutable",
    );
}

#[test]
fn apply_server_errors_are_transient() {
    let canned = Canned {
        apply_errors: BTreeMap::from([(
            "web-config".to_string(),
            ApiError::NotFound {
                message: "namespaces \"demo\" not found".into(),
            },
        )]),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_transient(
        &r,
        "ApplyFailed",
        "Apply",
        "apply failed: ConfigMap/demo/web-config: not found: namespaces \"demo\" not found",
        1,
    );
    assert_eq!(r.status.failure_counters.apply, 1);
    assert!(r.status.inventory.is_none() && r.status.last_applied_render_digest.is_empty());
    for e in [
        ApiError::Unavailable {
            message: "503".into(),
        },
        ApiError::TooManyRequests {
            message: "slow down".into(),
            retry_after_secs: None,
        },
        ApiError::Timeout {
            message: "deadline".into(),
        },
    ] {
        let canned = Canned {
            apply_errors: BTreeMap::from([("web-config".to_string(), e)]),
            ..Default::default()
        };
        let r = run_mr(&operator_cfg(), module_release(), &canned);
        assert_eq!(
            (r.outcome, r.requeue),
            (Outcome::FailedTransient, Some(secs(5)))
        );
    }
}

fn with_stale_object() -> (opm_core::api::ModuleRelease, Canned) {
    // First apply renders an extra ConfigMap "old"; the next render drops it.
    let first = Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: exported(
                json!({"legacy": {"old": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}}}}),
            ),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &first);
    let mut mr = module_release();
    mr.spec.common.prune = true;
    mr.status = Some(r.status);
    (mr, Canned::default())
}

#[test]
fn prune_failure_is_transient_and_keeps_inventory() {
    let (mr, mut canned) = with_stale_object();
    canned.prune_errors = BTreeMap::from([(
        "old".to_string(),
        ApiError::Unavailable {
            message: "etcd".into(),
        },
    )]);
    let before = mr.status.clone().unwrap();
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_transient(
        &r,
        "PruneFailed",
        "Prune",
        "prune failed for 1 object(s): ConfigMap/demo/old: unavailable: etcd",
        1,
    );
    assert_eq!(r.status.failure_counters.prune, 1);
    assert_eq!(r.status.failure_counters.apply, 0);
    assert_eq!(r.status.inventory, before.inventory);
    assert_eq!(
        r.status.last_applied_render_digest,
        before.last_applied_render_digest
    );
}

#[test]
fn timeout_is_transient() {
    let mut mr = module_release();
    mr.spec.common.timeout = Some("30s".into());
    let canned = Canned {
        slow: Some((EffectKind::Render, secs(40))),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_transient(
        &r,
        "ReconcileTimeout",
        "Reconcile",
        "reconcile attempt exceeded timeout of 30s",
        1,
    );
    assert!(r.find(EffectKind::Apply).is_none());
}

#[test]
fn applied_nothing_pruned() {
    let r = run_mr(&operator_cfg(), module_release(), &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::Applied, "ReconciliationSucceeded", Some(secs(300)))
    );
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "True",
            "ReconciliationSucceeded",
            "Reconciliation succeeded"
        )
    );
    // `wait` is on by default: Healthy joins Ready once every object is healthy (SPEC §26).
    assert_eq!(r.cond_types(), vec!["Ready", "Healthy", "ModuleResolved"]);
    assert_eq!(
        r.cond3("ModuleResolved"),
        c3(
            "True",
            "Resolved",
            "module resolved: example.com/modules/web@v0@v0.2.1"
        )
    );
    assert_eq!(
        r.event_tuples(),
        vec![
            ev(
                EventType::Normal,
                "Applied",
                "Apply",
                "Applied 3 resources (3 created, 0 updated, 0 unchanged)"
            ),
            ev(
                EventType::Normal,
                "ReconciliationSucceeded",
                "Reconcile",
                "Reconciliation succeeded"
            ),
        ]
    );
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::Render,
            EffectKind::InspectOwners,
            EffectKind::Apply,
            EffectKind::AssessHealth,
            EffectKind::PatchStatus
        ]
    );
    let s = &r.status;
    let inv = s.inventory.as_ref().unwrap();
    assert_eq!((inv.revision, inv.count), (1, 3));
    assert_eq!(inv.digest, opm_core::digest::inventory(&inv.entries));
    assert_eq!(s.failure_counters, Default::default());
    assert_eq!(s.next_retry_at, None);
    assert_eq!(s.last_applied_at, Some(time(r.finished_at)));
    assert_eq!(
        s.last_applied_source_digest,
        opm_core::digest::module_source("example.com/modules/web@v0", "v0.2.1")
    );
    assert_eq!(
        s.last_applied_config_digest,
        opm_core::digest::sha256(br#"{"replicas":2}"#)
    );
    assert_eq!(s.last_applied_render_digest, s.last_attempted_render_digest);
    assert_eq!(
        s.release_uuid,
        opm_core::render_value::release_uuid(Kind::ModuleRelease, "demo", "web")
    );
    let h = &s.history[0];
    assert_eq!(
        (h.sequence, h.phase.as_str(), h.inventory_count),
        (1, "complete", 3)
    );
    assert_eq!(h.inventory_digest, inv.digest);
    assert_eq!(
        r.metrics(),
        vec![
            // render, owner check, apply, health read: 1s each.
            Metric::Reconcile {
                outcome: Outcome::Applied,
                duration: secs(4)
            },
            Metric::ApplyResources {
                created: 3,
                updated: 0,
                unchanged: 0
            },
            Metric::InventorySize { count: 3 },
            Metric::ReleaseHealthy { healthy: true },
            // From the apply's answer to the health read's.
            Metric::HealthWait { duration: secs(1) },
        ]
    );
}

#[test]
fn applied_and_pruned() {
    let (mr, canned) = with_stale_object();
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(
        (r.outcome, r.requeue),
        (Outcome::AppliedAndPruned, Some(secs(300)))
    );
    assert_eq!(
        r.event_tuples(),
        vec![
            ev(
                EventType::Normal,
                "Applied",
                "Apply",
                "Applied 3 resources (3 created, 0 updated, 0 unchanged)"
            ),
            ev(
                EventType::Normal,
                "Pruned",
                "Prune",
                "Pruned 1 stale resources"
            ),
            ev(
                EventType::Normal,
                "ReconciliationSucceeded",
                "Reconcile",
                "Reconciliation succeeded"
            ),
        ]
    );
    match r.find(EffectKind::Prune) {
        Some(Effect::Prune {
            deletions,
            identity,
            ..
        }) => {
            assert_eq!(deletions.len(), 1);
            assert_eq!(deletions[0].id.name, "old");
            assert_eq!(deletions[0].uid, "live-old");
            assert_eq!(identity, &None);
        }
        other => panic!("{other:?}"),
    }
    let inv = r.status.inventory.as_ref().unwrap();
    assert_eq!((inv.revision, inv.count), (2, 3));
    assert_eq!(r.status.history.len(), 2);
    assert_eq!(r.status.history[0].sequence, 2);
    assert!(r.metrics().contains(&Metric::PruneResources { count: 1 }));
}

#[test]
fn no_op_when_nothing_changed() {
    let (mr, first) = applied_module_release(&Canned::default());
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::NoOp, "NoOp", Some(secs(300)))
    );
    assert_eq!(
        r.event_tuples(),
        vec![ev(
            EventType::Normal,
            "NoOp",
            "Reconcile",
            "No changes detected"
        )]
    );
    assert_eq!(
        r.awaited(),
        vec![
            EffectKind::Render,
            EffectKind::CheckDrift,
            EffectKind::AssessHealth
        ]
    );
    assert!(
        r.written.is_none(),
        "a NoOp that changes nothing writes nothing"
    );
    assert_eq!(r.status, first.status);
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "True",
            "ReconciliationSucceeded",
            "Reconciliation succeeded"
        )
    );
}

#[test]
fn drift_correct_reapplies_and_warn_reports() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    let drifted = ResourceId {
        group: "apps".into(),
        kind: "Deployment".into(),
        namespace: "demo".into(),
        name: "web".into(),
        version: "v1".into(),
    };
    let canned = Canned {
        drift: DriftReport {
            drifted: vec![drifted],
            errors: vec![],
            details: Vec::new(),
        },
        ..Default::default()
    };
    let msg = "1 resource(s) drifted from desired state: Deployment/demo/web";

    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::NoOp);
    assert_eq!(r.cond3("Drifted"), c3("True", "DriftDetected", msg));
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "True",
            "ReconciliationSucceeded",
            "Reconciliation succeeded"
        )
    );
    assert_eq!(
        r.event_tuples(),
        vec![
            ev(EventType::Warning, "DriftDetected", "DriftCheck", msg),
            ev(
                EventType::Normal,
                "NoOp",
                "Reconcile",
                "No changes detected"
            ),
        ]
    );

    mr.spec.common.drift_detection = Some(DriftDetection {
        mode: DriftMode::Correct,
        ignore: Vec::new(),
    });
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(r.cond("Drifted"), None, "a successful apply clears Drifted");

    mr.spec.common.drift_detection = Some(DriftDetection {
        mode: DriftMode::Disabled,
        ignore: Vec::new(),
    });
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(r.outcome, Outcome::NoOp);
    assert!(r.find(EffectKind::CheckDrift).is_none());
}

#[test]
fn dry_run_forbidden_while_impersonating_stalls() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    mr.spec.common.service_account_name = Some("deployer".into());
    let id = ResourceId {
        kind: "ConfigMap".into(),
        namespace: "demo".into(),
        name: "web-config".into(),
        version: "v1".into(),
        ..Default::default()
    };
    let canned = Canned {
        drift: DriftReport {
            drifted: vec![],
            errors: vec![opm_core::input::ObjectResult {
                id,
                result: Err(ApiError::Forbidden {
                    message: "cannot patch".into(),
                }),
            }],
            details: Vec::new(),
        },
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_stall(
        &r,
        "ImpersonationFailed",
        "Apply",
        "drift check of ConfigMap/demo/web-config forbidden while impersonating system:serviceaccount:demo:deployer: forbidden: cannot patch",
    );
    assert_eq!(r.status.failure_counters.drift, 1);
}

#[test]
fn drift_check_errors_count_but_do_not_fail_the_attempt() {
    let (mr, _) = applied_module_release(&Canned::default());
    let id = ResourceId {
        kind: "Service".into(),
        namespace: "demo".into(),
        name: "web".into(),
        version: "v1".into(),
        ..Default::default()
    };
    let canned = Canned {
        drift: DriftReport {
            drifted: vec![],
            errors: vec![opm_core::input::ObjectResult {
                id,
                result: Err(ApiError::Unavailable {
                    message: "503".into(),
                }),
            }],
            details: Vec::new(),
        },
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::NoOp);
    assert_eq!(r.status.failure_counters.drift, 1);
    // A clean check resets it.
    let mut again = mr;
    again.status = Some(r.status);
    let r = run_mr(&operator_cfg(), again, &Canned::default());
    assert_eq!(r.status.failure_counters.drift, 0);
}

#[test]
fn prune_forbidden_while_impersonating_stalls() {
    let (mut mr, mut canned) = with_stale_object();
    mr.spec.common.service_account_name = Some("deployer".into());
    canned.prune_errors = BTreeMap::from([(
        "old".to_string(),
        ApiError::Forbidden {
            message: "cannot delete".into(),
        },
    )]);
    let r = run_mr(&operator_cfg(), mr, &canned);
    let warnings: Vec<_> = r
        .event_tuples()
        .into_iter()
        .filter(|e| e.0 == EventType::Warning)
        .collect();
    assert_eq!(r.outcome, Outcome::FailedStalled);
    assert_eq!(r.reason, "ImpersonationFailed");
    assert_eq!(
        r.cond3("Stalled").unwrap().2,
        "prune forbidden while impersonating system:serviceaccount:demo:deployer: prune failed for 1 object(s): ConfigMap/demo/old: forbidden: cannot delete"
    );
    assert_eq!(warnings.len(), 1);
    assert_eq!(r.status.failure_counters.prune, 1);
}

#[test]
fn stale_namespaces_and_crds_are_never_pruned() {
    let first = Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: exported(json!({"infra": {
                "ns": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "extra"}},
                "crd": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}}
            }})),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &first);
    let mut mr = module_release();
    mr.spec.common.prune = true;
    mr.status = Some(r.status);
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_eq!(r.outcome, Outcome::AppliedAndPruned);
    assert!(r.find(EffectKind::InspectStale).is_none());
    assert!(r.find(EffectKind::Prune).is_none());
    assert_eq!(
        r.events()[0].note,
        "Skipped pruning 2 resource(s) that are never deleted: CustomResourceDefinition/widgets.example.com, Namespace/extra"
    );
    assert_eq!(r.events()[0].reason, "PruneSkipped");
    assert_eq!(r.status.inventory.as_ref().unwrap().count, 3);
    assert!(r.metrics().contains(&Metric::PruneResources { count: 0 }));
}

#[test]
fn component_rename_or_version_change_is_not_stale() {
    let (mut mr, _) = applied_module_release(&Canned::default());
    mr.spec.common.prune = true;
    let renamed = exported(json!({}))
        .to_string()
        .replace("\"config\":", "\"settings\":");
    let canned = Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: serde_json::from_str(&renamed).unwrap(),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_eq!(
        r.outcome,
        Outcome::Applied,
        "nothing stale, so no prune step"
    );
    let entries = &r.status.inventory.as_ref().unwrap().entries;
    assert!(
        entries
            .iter()
            .any(|e| e.component == "settings" && e.name == "web-config")
    );
}
