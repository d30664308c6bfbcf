//! One scenario per row of SPEC §4, asserting outcome, conditions, events, requeue and ledger.

mod support;

use std::collections::BTreeMap;

use opm_core::api::{DependencyRef, DriftDetection, DriftMode, ReleaseStatus};
use opm_core::effect::{Effect, EffectKind, EventType, Metric};
use opm_core::input::{
    ApiError, DependencyReport, DriftReport, FetchError, ReleaseSnapshot, RenderError,
    RenderOutput, SourceError,
};
use opm_core::{Config, Kind, Outcome, ReleaseKey, ResourceId};
use serde_json::json;
use support::*;

fn dep(name: &str) -> DependencyRef {
    DependencyRef {
        name: name.into(),
        namespace: String::new(),
        kind: String::new(),
    }
}

fn snapshot(name: &str, ready: &str, gen_: i64, observed: i64) -> ReleaseSnapshot {
    ReleaseSnapshot {
        key: ReleaseKey {
            kind: Kind::ModuleRelease,
            namespace: "demo".into(),
            name: name.into(),
        },
        generation: gen_,
        observed_generation: observed,
        ready: ready.into(),
        depends_on: vec![],
    }
}

#[test]
fn dependency_not_ready_is_soft_blocked() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![dep("db")];
    let canned = Canned {
        deps: Ok(DependencyReport {
            releases: vec![snapshot("db", "False", 1, 1)],
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), mr, &canned);
    assert_soft(
        &r,
        "DependenciesNotReady",
        "DependsOn",
        "waiting for dependency demo/db",
        &ReleaseStatus::default(),
    );
    assert_eq!(
        r.awaited(),
        vec![EffectKind::CheckDependencies, EffectKind::PatchStatus]
    );
    assert_eq!(r.cond("Reconciling"), None);
}

#[test]
fn dependency_not_found_or_stale_generation_is_soft_blocked() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![dep("ready"), dep("old"), dep("missing")];
    let canned = Canned {
        deps: Ok(DependencyReport {
            releases: vec![
                snapshot("ready", "True", 2, 2),
                snapshot("old", "True", 3, 2),
            ],
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), mr.clone(), &canned);
    assert_soft(
        &r,
        "DependenciesNotReady",
        "DependsOn",
        "waiting for dependency demo/old",
        &ReleaseStatus::default(),
    );
    mr.spec.common.depends_on = vec![dep("ready"), dep("missing")];
    let r = run_mr(&Config::default(), mr, &canned);
    assert_soft(
        &r,
        "DependenciesNotReady",
        "DependsOn",
        "waiting for dependency demo/missing",
        &ReleaseStatus::default(),
    );
}

#[test]
fn dependency_self_reference_stalls() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![dep("web")];
    let r = run_mr(&Config::default(), mr, &Canned::default());
    assert_stall(
        &r,
        "DependenciesNotReady",
        "DependsOn",
        "release demo/web depends on itself",
    );
    assert!(r.find(EffectKind::CheckDependencies).is_none());
}

#[test]
fn dependency_cycle_stalls() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![dep("db")];
    let mut db = snapshot("db", "True", 1, 1);
    db.depends_on = vec![ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "web".into(),
    }];
    let canned = Canned {
        deps: Ok(DependencyReport { releases: vec![db] }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), mr, &canned);
    assert_stall(
        &r,
        "DependenciesNotReady",
        "DependsOn",
        "dependency cycle detected: demo/web -> demo/db -> demo/web",
    );
}

#[test]
fn cross_namespace_dependency_denied() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![DependencyRef {
        name: "db".into(),
        namespace: "infra".into(),
        kind: String::new(),
    }];
    let r = run_mr(&Config::default(), mr.clone(), &Canned::default());
    assert_stall(
        &r,
        "CrossNamespaceRefDenied",
        "Resolve",
        "cross-namespace dependency on ModuleRelease infra/db is not allowed (--allow-cross-namespace-refs is off)",
    );
    // With the flag the dependency is checked instead.
    let cfg = Config {
        allow_cross_namespace_refs: true,
        ..Default::default()
    };
    let r = run_mr(&cfg, mr, &Canned::default());
    assert_eq!(r.reason, "DependenciesNotReady");
    assert_eq!(r.outcome, Outcome::FailedTransient);
}

#[test]
fn cross_namespace_source_denied() {
    let mut rel = release();
    rel.spec.source_ref.namespace = "flux-system".into();
    let r = run_rel(&Config::default(), rel.clone(), &Canned::default());
    assert_stall(
        &r,
        "CrossNamespaceRefDenied",
        "Resolve",
        "cross-namespace reference to OCIRepository flux-system/repo is not allowed (--allow-cross-namespace-refs is off)",
    );
    assert!(r.find(EffectKind::ResolveSource).is_none());
    let cfg = Config {
        allow_cross_namespace_refs: true,
        ..Default::default()
    };
    let r = run_rel(&cfg, rel, &Canned::default());
    assert_eq!(r.outcome, Outcome::Applied);
    match r.find(EffectKind::ResolveSource) {
        Some(Effect::ResolveSource { source }) => assert_eq!(source.namespace, "flux-system"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_source_kind_stalls() {
    let mut rel = release();
    rel.spec.source_ref.kind = "HelmRepository".into();
    let r = run_rel(&Config::default(), rel, &Canned::default());
    assert_stall(
        &r,
        "SourceNotReady",
        "Resolve",
        "unsupported source kind \"HelmRepository\" (expected OCIRepository, GitRepository or Bucket)",
    );
}

#[test]
fn source_not_found_stalls() {
    let canned = Canned {
        source: Err(SourceError::NotFound),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "SourceNotReady",
        "Resolve",
        "source OCIRepository demo/repo not found",
    );
}

#[test]
fn source_not_ready_or_without_artifact_is_soft_blocked() {
    let canned = Canned {
        source: Err(SourceError::NotReady {
            message: "fetching".into(),
        }),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_soft(
        &r,
        "SourceNotReady",
        "Resolve",
        "source OCIRepository demo/repo is not ready: fetching",
        &ReleaseStatus::default(),
    );
    let canned = Canned {
        source: Err(SourceError::NoArtifact),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_soft(
        &r,
        "SourceNotReady",
        "Resolve",
        "source OCIRepository demo/repo has no artifact",
        &ReleaseStatus::default(),
    );
}

#[test]
fn source_read_failure_is_transient() {
    let canned = Canned {
        source: Err(SourceError::Api {
            error: ApiError::Unavailable {
                message: "etcd down".into(),
            },
        }),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_transient(
        &r,
        "SourceNotReady",
        "Resolve",
        "reading source OCIRepository demo/repo failed: unavailable: etcd down",
        1,
    );
}

#[test]
fn artifact_download_failures_are_transient() {
    let cases = [
        (
            FetchError::Http { status: 503 },
            "artifact download failed: HTTP status 503",
        ),
        (
            FetchError::Timeout,
            "artifact download failed: download timed out",
        ),
        (
            FetchError::Connection {
                message: "refused".into(),
            },
            "artifact download failed: connection failed: refused",
        ),
        (
            FetchError::DigestMismatch {
                expected: "sha256:a".into(),
                actual: "sha256:b".into(),
            },
            "artifact download failed: digest mismatch: expected sha256:a, got sha256:b",
        ),
    ];
    for (err, msg) in cases {
        let canned = Canned {
            fetch: Some(Err(err)),
            ..Default::default()
        };
        let r = run_rel(&Config::default(), release(), &canned);
        assert_transient(&r, "FetchFailed", "Fetch", msg, 1);
        assert_eq!(r.status.last_attempted_source_digest, ARTIFACT_DIGEST);
        assert_eq!(
            r.status.source.as_ref().unwrap().artifact_digest,
            ARTIFACT_DIGEST
        );
        assert_eq!(r.status.history[0].phase, "fetch");
    }
}

#[test]
fn invalid_artifact_stalls() {
    let canned = Canned {
        fetch: Some(Err(FetchError::InvalidArtifact {
            message: "entry ../x escapes the root".into(),
        })),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "InvalidArtifact",
        "Fetch",
        "invalid artifact: entry ../x escapes the root",
    );
    let canned = Canned {
        fetch: Some(Err(FetchError::TooLarge {
            message: "over 64 MiB".into(),
        })),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "InvalidArtifact",
        "Fetch",
        "invalid artifact: over 64 MiB",
    );
    // A digest in another algorithm is refused before downloading.
    let mut canned = Canned::default();
    if let Ok(a) = canned.source.as_mut() {
        a.digest = "sha512:abcd".into();
    }
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "InvalidArtifact",
        "Fetch",
        "invalid artifact: unsupported digest \"sha512:abcd\" (expected sha256:<64 lowercase hex>)",
    );
    assert!(r.find(EffectKind::FetchArtifact).is_none());
}

#[test]
fn path_not_found_stalls() {
    let canned = Canned {
        render: Err(RenderError::PathNotFound {
            message: "path \"./app\" not found in artifact".into(),
        }),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "PathNotFound",
        "Load",
        "path \"./app\" not found in artifact",
    );
}

#[test]
fn release_file_not_found_stalls() {
    let canned = Canned {
        render: Err(RenderError::ReleaseFileNotFound {
            message: "no release.cue in ./app".into(),
        }),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(&r, "ReleaseFileNotFound", "Load", "no release.cue in ./app");
}

#[test]
fn unsupported_kind_stalls() {
    let canned = Canned {
        render: Err(RenderError::UnsupportedKind {
            kind: Some("Bundle".into()),
        }),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "UnsupportedKind",
        "Load",
        "exported kind \"Bundle\" is not supported (expected ModuleRelease)",
    );
    // Also when the exported value itself says so.
    let canned = Canned {
        render: Ok(RenderOutput {
            value: json!({"components": {}}),
            cluster_scoped: vec![],
        }),
        ..Default::default()
    };
    let r = run_rel(&Config::default(), release(), &canned);
    assert_stall(
        &r,
        "UnsupportedKind",
        "Load",
        "exported value has no kind (expected ModuleRelease)",
    );
}

#[test]
fn resolution_failure_stalls_and_marks_module_unresolved() {
    let msg = "module example.com/modules/web@v0@v0.9.9: module not found";
    let canned = Canned {
        render: Err(RenderError::Resolution {
            message: msg.into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), module_release(), &canned);
    assert_stall(&r, "ResolutionFailed", "Render", msg);
    assert_eq!(
        r.cond3("ModuleResolved"),
        c3("False", "ResolutionFailed", msg)
    );
    // A major-version mismatch is caught before `cue` runs.
    let mut mr = module_release();
    mr.spec.module.version = "v1.0.0".into();
    let r = run_mr(&Config::default(), mr, &Canned::default());
    assert_stall(
        &r,
        "ResolutionFailed",
        "Render",
        "module example.com/modules/web@v0: version v1.0.0 does not match major version v0",
    );
    assert!(r.find(EffectKind::Render).is_none());
}

#[test]
fn evaluation_errors_and_malformed_objects_stall_as_render_failed() {
    let msg = "#config.replicas: conflicting values 2 and \"two\"";
    let canned = Canned {
        render: Err(RenderError::Evaluation {
            message: msg.into(),
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), module_release(), &canned);
    assert_stall(&r, "RenderFailed", "Render", msg);

    let bad = exported(
        json!({"extra": {"broken": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}}}),
    );
    let canned = Canned {
        render: Ok(RenderOutput {
            value: bad,
            cluster_scoped: vec![],
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), module_release(), &canned);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "component \"extra\" key \"broken\": missing metadata.name",
    );

    let conflicting = exported(
        json!({"extra": {"cm": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "labels": {"module-release.opmodel.dev/name": "other"}}}}}),
    );
    let canned = Canned {
        render: Ok(RenderOutput {
            value: conflicting,
            cluster_scoped: vec![],
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), module_release(), &canned);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "component \"extra\" key \"cm\": label \"module-release.opmodel.dev/name\" is \"other\", but the operator sets \"web\"",
    );
}

#[test]
fn registry_unreachable_or_cue_timeout_is_transient() {
    for err in [
        RenderError::RegistryUnreachable {
            message: "cannot do HTTP request".into(),
        },
        RenderError::Timeout {
            message: "cue export timed out after 60s".into(),
        },
    ] {
        let msg = err.to_string();
        let canned = Canned {
            render: Err(err),
            ..Default::default()
        };
        let r = run_mr(&Config::default(), module_release(), &canned);
        assert_transient(&r, "RenderFailed", "Render", &msg, 1);
        assert_eq!(r.status.history[0].phase, "render");
    }
}

#[test]
fn missing_service_account_stalls() {
    let mut mr = module_release();
    mr.spec.common.service_account_name = Some("deployer".into());
    let canned = Canned {
        sa_exists: Ok(false),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), mr, &canned);
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
    let r = run_mr(&Config::default(), mr, &canned);
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
    let r = run_mr(&Config::default(), module_release(), &canned);
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
    let r = run_mr(&Config::default(), module_release(), &canned);
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
    let r = run_mr(&Config::default(), module_release(), &canned);
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
        },
        ApiError::Timeout {
            message: "deadline".into(),
        },
    ] {
        let canned = Canned {
            apply_errors: BTreeMap::from([("web-config".to_string(), e)]),
            ..Default::default()
        };
        let r = run_mr(&Config::default(), module_release(), &canned);
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
            value: exported(
                json!({"legacy": {"old": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}}}}),
            ),
            cluster_scoped: vec![],
        }),
        ..Default::default()
    };
    let r = run_mr(&Config::default(), module_release(), &first);
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
    let r = run_mr(&Config::default(), mr, &canned);
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
    let r = run_mr(&Config::default(), mr, &canned);
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
    let r = run_mr(&Config::default(), module_release(), &Canned::default());
    assert_eq!(
        (r.outcome, r.reason.as_str(), r.requeue),
        (Outcome::Applied, "Applied", Some(secs(300)))
    );
    assert_eq!(
        r.cond3("Ready"),
        c3(
            "True",
            "ReconciliationSucceeded",
            "Reconciliation succeeded"
        )
    );
    assert_eq!(r.cond_types(), vec!["Ready", "ModuleResolved"]);
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
            EffectKind::Apply,
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
            Metric::Reconcile {
                outcome: Outcome::Applied,
                duration: secs(2)
            },
            Metric::ApplyResources {
                created: 3,
                updated: 0,
                unchanged: 0
            },
            Metric::InventorySize { count: 3 },
        ]
    );
}

#[test]
fn applied_and_pruned() {
    let (mr, canned) = with_stale_object();
    let r = run_mr(&Config::default(), mr, &canned);
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
    let r = run_mr(&Config::default(), mr, &Canned::default());
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
        vec![EffectKind::Render, EffectKind::CheckDrift]
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
        },
        ..Default::default()
    };
    let msg = "1 resource(s) drifted from desired state: Deployment/demo/web";

    let r = run_mr(&Config::default(), mr.clone(), &canned);
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
    });
    let r = run_mr(&Config::default(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::Applied);
    assert_eq!(r.cond("Drifted"), None, "a successful apply clears Drifted");

    mr.spec.common.drift_detection = Some(DriftDetection {
        mode: DriftMode::Disabled,
    });
    let r = run_mr(&Config::default(), mr, &canned);
    assert_eq!(r.outcome, Outcome::NoOp);
    assert!(r.find(EffectKind::CheckDrift).is_none());
}
