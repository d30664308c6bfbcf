//! Each executor's answer to an overrun bound: it answers its own effect (the core would
//! refuse anything else), fails every object it was given, and names the effect.

use opm_core::effect::{Effect, EffectKind};
use opm_core::{ApiError, FetchError, InputKind, RenderError, SourceError};
use serde_json::json;

use super::*;

/// The timeout table, for the test only: production reaches each `timed_out` through its
/// executor's `run`.
fn timed_out(effect: &Effect) -> InputKind {
    match effect {
        Effect::AddFinalizer { .. } => finalizer::timed_out_add(),
        Effect::RemoveFinalizer { .. } => finalizer::timed_out_remove(),
        Effect::CheckDependencies { .. } => dependencies::timed_out(),
        Effect::ListDependents { .. } => dependencies::timed_out_dependents(),
        Effect::ResolveSource { .. } => source::timed_out(),
        Effect::FetchArtifact { .. } => fetch::timed_out(),
        Effect::Render { .. } => render::timed_out(),
        Effect::CheckServiceAccount { .. } => service_account::timed_out(),
        Effect::CheckDrift { objects, .. } => drift::timed_out(objects),
        Effect::Apply { stages, .. } => apply::timed_out(stages),
        Effect::InspectOwners { targets, .. } => owners::timed_out(targets),
        Effect::AssessHealth { targets, .. } => health::timed_out(targets),
        Effect::InspectStale { targets, .. } => prune::timed_out_inspect(targets),
        Effect::Prune { deletions, .. } => prune::timed_out_delete(deletions),
        Effect::AwaitTermination { targets, .. } => termination::timed_out(targets),
        Effect::PatchStatus { .. } => status::timed_out(),
        Effect::ReadValues {
            refs, credentials, ..
        } => values::timed_out(refs, credentials.as_deref()),
        Effect::ReadKubeConfig { .. } => kube_config::timed_out(),
        other => panic!("not awaited: {other:?}"),
    }
}

/// One effect of every awaited kind, with two objects where it takes objects.
fn every_awaited_effect() -> Vec<Effect> {
    let id = |n: &str| json!({"kind": "ConfigMap", "namespace": "a", "name": n, "version": "v1"});
    let desired = |n: &str| json!({"id": id(n), "component": "c", "manifest": {}});
    let deletion = |n: &str| json!({"id": id(n), "uid": "u"});
    let key = json!({"kind": "ModuleRelease", "namespace": "a", "name": "dep"});
    let effects = json!([
        {"type": "addFinalizer", "finalizer": "f"},
        {"type": "removeFinalizer", "finalizer": "f"},
        {"type": "checkDependencies", "namespace": "a", "refs": [key]},
        {"type": "listDependents", "release": key},
        {"type": "resolveSource", "source": {"apiVersion": "v1", "kind": "OCIRepository",
            "namespace": "a", "name": "s"}},
        {"type": "fetchArtifact", "url": "http://x/a.tgz", "digest": "sha256:0", "revision": "r"},
        {"type": "render", "request": {"source": "artifact", "artifactDigest": "sha256:0",
            "artifactUrl": "http://x/a.tgz", "path": "."}},
        {"type": "checkServiceAccount", "namespace": "a", "name": "sa"},
        {"type": "checkDrift", "objects": [desired("o1"), desired("o2")],
            "fieldManager": "m", "identity": null},
        {"type": "apply", "stages": [{"stage": 1, "objects": [desired("o1"), desired("o2")]},
            {"stage": 3, "objects": [desired("o3")]}],
            "fieldManager": "m", "force": false, "identity": null},
        {"type": "inspectOwners", "targets": [id("o1"), id("o2")], "identity": null},
        {"type": "inspectStale", "targets": [id("o1"), id("o2")], "identity": null},
        {"type": "prune", "deletions": [deletion("o1"), deletion("o2")], "identity": null},
        {"type": "patchStatus", "patch": {}, "status": {}},
        {"type": "awaitTermination", "targets": [deletion("o1"), deletion("o2")],
            "identity": null, "until": "2026-03-01T10:00:00Z"},
        {"type": "readValues", "namespace": "a", "refs": [{"kind": "ConfigMap", "name": "v1"},
            {"kind": "Secret", "name": "v2"}], "credentials": "sha256:1", "identity": null},
        {"type": "assessHealth", "targets": [{"id": id("o1")}, {"id": id("o2"), "pods": true}],
            "identity": null},
        {"type": "readKubeConfig", "namespace": "a", "name": "kc", "maxBytes": 65536},
    ]);
    serde_json::from_value(effects).expect("the sample effects parse")
}

/// The `ApiError`s an answer carries, in order.
fn api_errors(answer: &InputKind) -> Vec<&ApiError> {
    fn errs(rs: Vec<Option<&ApiError>>) -> Vec<&ApiError> {
        rs.into_iter().map(|e| e.expect("failed")).collect()
    }
    match answer {
        InputKind::FinalizerAdded { result }
        | InputKind::FinalizerRemoved { result }
        | InputKind::StatusPatched { result } => errs(vec![result.as_ref().err()]),
        InputKind::DependenciesChecked { result } | InputKind::DependentsListed { result } => {
            errs(vec![result.as_ref().err()])
        }
        InputKind::ServiceAccountChecked { result } => errs(vec![result.as_ref().err()]),
        InputKind::KubeConfigRead {
            result: Err(opm_core::remote::KubeConfigError::Api { error }),
        } => vec![error],
        InputKind::SourceResolved {
            result: Err(SourceError::Api { error }),
        } => vec![error],
        InputKind::DriftChecked { report } => {
            assert!(report.drifted.is_empty() && report.details.is_empty());
            errs(
                report
                    .errors
                    .iter()
                    .map(|o| o.result.as_ref().err())
                    .collect(),
            )
        }
        InputKind::Applied { report } => errs(
            report
                .objects
                .iter()
                .map(|o| o.result.as_ref().err())
                .collect(),
        ),
        InputKind::OwnersInspected { objects } | InputKind::StaleInspected { objects } => {
            errs(objects.iter().map(|o| o.result.as_ref().err()).collect())
        }
        InputKind::Pruned { results } => {
            errs(results.iter().map(|o| o.result.as_ref().err()).collect())
        }
        InputKind::HealthRead { objects } => {
            assert!(objects.iter().all(|o| o.pods.is_empty()));
            errs(objects.iter().map(|o| o.result.as_ref().err()).collect())
        }
        InputKind::ValuesRead {
            values,
            credentials,
        } => errs(
            values
                .iter()
                .map(|r| r.as_ref().err())
                .chain(credentials.iter().map(|r| r.as_ref().err()))
                .collect(),
        ),
        other => panic!("no API errors expected in {other:?}"),
    }
}

#[test]
fn a_timed_out_executor_answers_its_effect_and_fails_every_object() {
    let effects = every_awaited_effect();
    let mut kinds: Vec<EffectKind> = effects.iter().map(Effect::kind).collect();
    kinds.sort();
    let mut awaited = EffectKind::AWAITED.to_vec();
    awaited.sort();
    assert_eq!(kinds, awaited, "one sample per awaited kind");
    for effect in &effects {
        let answer = timed_out(effect);
        assert_eq!(Some(answer.kind()), effect.answered_by(), "{effect:?}");
        match (effect.kind(), &answer) {
            (EffectKind::FetchArtifact, InputKind::ArtifactFetched { result }) => {
                assert!(matches!(result, Err(FetchError::Timeout)));
            }
            (EffectKind::Render, InputKind::Rendered { result }) => {
                assert!(matches!(result, Err(RenderError::Timeout { .. })));
            }
            // SPEC §12: the wait's bound is no error; every target is reported left.
            (EffectKind::AwaitTermination, InputKind::TerminationAwaited { remaining, error }) => {
                assert_eq!(remaining.len(), 2);
                assert!(error.is_none());
            }
            (kind, answer) => {
                let errors = api_errors(answer);
                let expected = match kind {
                    EffectKind::CheckDrift
                    | EffectKind::Apply
                    | EffectKind::InspectOwners
                    | EffectKind::InspectStale
                    | EffectKind::Prune
                    | EffectKind::AssessHealth => 2,
                    EffectKind::ReadValues => 3,
                    _ => 1,
                };
                assert_eq!(errors.len(), expected, "{kind:?}: {answer:?}");
                for e in errors {
                    assert_eq!(
                        e,
                        &ApiError::Timeout {
                            message: format!("{kind:?} exceeded the attempt deadline"),
                        }
                    );
                }
            }
        }
    }
}

/// SPEC §31: a remote cluster whose client cannot be built fails every object of each
/// object effect as unreachable; after a request got no HTTP answer, the status-less
/// errors of the answer become `Unreachable`, and answers from the server stay what they are.
#[test]
fn a_remote_cluster_that_cannot_be_reached_fails_every_object_as_unreachable() {
    let down = ApiError::Unreachable {
        message: "connection refused".into(),
    };
    let mut targeted = 0;
    for effect in every_awaited_effect() {
        let Some(answer) = failed_for(&effect, &down) else {
            continue;
        };
        targeted += 1;
        assert_eq!(Some(answer.kind()), effect.answered_by());
        assert_eq!(answer.unreachable(), Some(&down), "{effect:?}");
    }
    assert_eq!(targeted, 8, "every effect that can target a remote cluster");

    let mut answer = InputKind::Pruned {
        results: vec![
            opm_core::input::ObjectResult {
                id: serde_json::from_value(
                    json!({"kind": "ConfigMap", "namespace": "a", "name": "x", "version": "v1"}),
                )
                .unwrap(),
                result: Err(ApiError::Unavailable {
                    message: "client error (Connect)".into(),
                }),
            },
            opm_core::input::ObjectResult {
                id: serde_json::from_value(
                    json!({"kind": "ConfigMap", "namespace": "a", "name": "y", "version": "v1"}),
                )
                .unwrap(),
                result: Err(ApiError::Forbidden {
                    message: "no".into(),
                }),
            },
        ],
    };
    unreachable_errors(&mut answer);
    let InputKind::Pruned { results } = &answer else {
        unreachable!()
    };
    assert!(matches!(
        results[0].result,
        Err(ApiError::Unreachable { .. })
    ));
    assert!(matches!(results[1].result, Err(ApiError::Forbidden { .. })));
}
