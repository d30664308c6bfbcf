//! SPEC §4 rows up to render: one scenario per row, asserting outcome, conditions, events,
//! requeue and ledger.

mod support;

use opm_core::api::{DependencyRef, ReleaseStatus};
use opm_core::effect::{Effect, EffectKind};
use opm_core::input::{
    ApiError, DependencyReport, FetchError, ReleaseSnapshot, RenderError, RenderOutput, SourceError,
};
use opm_core::{Config, Kind, Outcome, ReleaseKey};
use serde_json::json;
use support::*;

fn dep(name: &str) -> DependencyRef {
    DependencyRef {
        name: name.into(),
        namespace: String::new(),
        kind: String::new(),
        ..Default::default()
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
        deleting: false,
    }
}

#[test]
fn dependency_not_ready_is_soft_blocked() {
    let mut mr = module_release();
    mr.spec.common.depends_on = vec![dep("db")];
    let canned = Canned {
        deps: Ok(DependencyReport {
            releases: vec![snapshot("db", "False", 1, 1)],
            objects: Vec::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
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
            objects: Vec::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_soft(
        &r,
        "DependenciesNotReady",
        "DependsOn",
        "waiting for dependency demo/old",
        &ReleaseStatus::default(),
    );
    mr.spec.common.depends_on = vec![dep("ready"), dep("missing")];
    let r = run_mr(&operator_cfg(), mr, &canned);
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
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
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
        deps: Ok(DependencyReport {
            releases: vec![db],
            objects: Vec::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
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
        ..Default::default()
    }];
    let r = run_mr(&operator_cfg(), mr.clone(), &Canned::default());
    assert_stall(
        &r,
        "CrossNamespaceRefDenied",
        "Resolve",
        "cross-namespace dependency on ModuleRelease infra/db is not allowed (--allow-cross-namespace-refs is off)",
    );
    // With the flag the dependency is checked instead.
    let cfg = Config {
        allow_cross_namespace_refs: true,
        ..operator_cfg()
    };
    let r = run_mr(&cfg, mr, &Canned::default());
    assert_eq!(r.reason, "DependenciesNotReady");
    assert_eq!(r.outcome, Outcome::FailedTransient);
}

#[test]
fn cross_namespace_source_denied() {
    let mut rel = release();
    rel.spec.source_ref.namespace = "flux-system".into();
    let r = run_rel(&operator_cfg(), rel.clone(), &Canned::default());
    assert_stall(
        &r,
        "CrossNamespaceRefDenied",
        "Resolve",
        "cross-namespace reference to OCIRepository flux-system/repo is not allowed (--allow-cross-namespace-refs is off)",
    );
    assert!(r.find(EffectKind::ResolveSource).is_none());
    let cfg = Config {
        allow_cross_namespace_refs: true,
        ..operator_cfg()
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
    let r = run_rel(&operator_cfg(), rel, &Canned::default());
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
        (
            FetchError::Io {
                message: "truncated after 10 bytes".into(),
            },
            "artifact download failed: truncated after 10 bytes",
        ),
    ];
    for (err, msg) in cases {
        let canned = Canned {
            fetch: Some(Err(err)),
            ..Default::default()
        };
        let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_rel(&operator_cfg(), release(), &canned);
    assert_stall(
        &r,
        "UnsupportedKind",
        "Load",
        "exported kind \"Bundle\" is not supported (expected ModuleRelease)",
    );
    // Also when the exported value itself says so.
    let canned = Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: json!({"components": {}}),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_rel(&operator_cfg(), release(), &canned);
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
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_stall(&r, "ResolutionFailed", "Render", msg);
    assert_eq!(
        r.cond3("ModuleResolved"),
        c3("False", "ResolutionFailed", msg)
    );
    // A major-version mismatch is caught before `cue` runs.
    let mut mr = module_release();
    mr.spec.module.version = "v1.0.0".into();
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
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
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_stall(&r, "RenderFailed", "Render", msg);

    let bad = exported(
        json!({"extra": {"broken": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}}}),
    );
    let canned = Canned {
        render: Ok(RenderOutput {
            bytes: 0,
            value: bad,
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
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
            bytes: 0,
            value: conflicting,
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
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
        let r = run_mr(&operator_cfg(), module_release(), &canned);
        assert_transient(&r, "RenderFailed", "Render", &msg, 1);
        assert_eq!(r.status.history[0].phase, "render");
    }
}

/// SPEC §4/§24: a render over `--max-render-objects` or `--max-render-bytes`, or one that
/// the interpreter cut off at the byte cap or that ran out of memory, stalls `RenderFailed`
/// with the figures; nothing is applied.
#[test]
fn renders_over_the_caps_stall_with_the_count_or_size() {
    let two = exported(json!({"a": {
        "x": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        "y": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}}}}));
    let cfg = Config {
        max_render_objects: 4,
        max_render_bytes: 1000,
        ..operator_cfg()
    };
    let out = |bytes| Canned {
        render: Ok(RenderOutput {
            bytes,
            value: two.clone(),
            cluster_scoped: vec![],
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&cfg, module_release(), &out(10));
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "rendered 5 objects; the cap is 4 (--max-render-objects)",
    );
    let cfg = Config {
        max_render_bytes: 1000,
        ..operator_cfg()
    };
    let r = run_mr(&cfg, module_release(), &out(1001));
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "rendered 1001 bytes of JSON (1001 B); the cap is 1000 (1000 B, --max-render-bytes)",
    );
    assert_eq!(
        run_mr(&cfg, module_release(), &out(1000)).outcome,
        Outcome::Applied
    );
    let canned = Canned {
        render: Err(RenderError::TooLarge {
            bytes_at_least: 2000,
            cap: 1000,
        }),
        ..Default::default()
    };
    let r = run_mr(&cfg, module_release(), &canned);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "rendered more than 2000 bytes of JSON; the cap is 1000 (1000 B, --max-render-bytes)",
    );
    let canned = Canned {
        render: Err(RenderError::OutOfMemory {
            limit_bytes: 1 << 30,
        }),
        ..Default::default()
    };
    let r = run_mr(&cfg, module_release(), &canned);
    assert_stall(
        &r,
        "RenderFailed",
        "Render",
        "cue ran out of memory: the limit of one render is 1.0 GiB (--render-memory-limit)",
    );
}

/// SPEC §4: when the Render step has to download the artifact again (the local cache evicted
/// it after the fetch) and that download fails, the failure is classified like the fetch
/// step's own: a 503 backs off as `FetchFailed`, only invalid content stalls.
#[test]
fn a_failed_download_during_render_is_a_fetch_failure() {
    let canned = Canned {
        render: Err(RenderError::Refetch {
            error: FetchError::Http { status: 503 },
        }),
        ..Default::default()
    };
    let r = run_rel(&operator_cfg(), release(), &canned);
    assert_transient(
        &r,
        "FetchFailed",
        "Fetch",
        "artifact download failed: HTTP status 503",
        1,
    );
    let canned = Canned {
        render: Err(RenderError::Refetch {
            error: FetchError::InvalidArtifact {
                message: "not a tar.gz or zip archive".into(),
            },
        }),
        ..Default::default()
    };
    let r = run_rel(&operator_cfg(), release(), &canned);
    assert_stall(
        &r,
        "InvalidArtifact",
        "Fetch",
        "invalid artifact: not a tar.gz or zip archive",
    );
}
