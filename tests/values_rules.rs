//! SPEC §27 and §4 `ValuesNotFound`: valuesFrom and module.secretRef are read under the
//! effective identity after its ServiceAccount is known to exist, merged before the render,
//! and the config digest covers the merged result.

mod support;

use std::collections::BTreeMap;

use opm_core::api::values_from::{LocalSecretRef, ValuesKind, ValuesReference};
use opm_core::effect::{Effect, EffectKind, RenderRequest};
use opm_core::input::ApiError;
use opm_core::values_from::{CredentialsContent, ValuesContent};
use opm_core::{Outcome, digest};
use serde_json::json;
use support::*;

fn reference(kind: ValuesKind, name: &str) -> ValuesReference {
    ValuesReference {
        kind,
        name: name.into(),
        ..Default::default()
    }
}

fn with_values_from(refs: Vec<ValuesReference>) -> opm_core::api::ModuleRelease {
    let mut mr = module_release();
    mr.spec.common.service_account_name = Some("deployer".into());
    mr.spec.values_from = refs;
    mr
}

fn secret_digest() -> String {
    digest::sha256(b"hunter2")
}

fn canned_found() -> Canned {
    Canned {
        values: BTreeMap::from([
            (
                "base".to_string(),
                Ok(ValuesContent::Found {
                    value: json!({"replicas": 1, "image": "nginx"}),
                }),
            ),
            (
                "db".to_string(),
                Ok(ValuesContent::Found {
                    value: json!(secret_digest()),
                }),
            ),
        ]),
        ..Canned::default()
    }
}

fn render_values(r: &Run) -> Option<serde_json::Value> {
    match r.find(EffectKind::Render) {
        Some(Effect::Render {
            request: RenderRequest::Module { values, .. },
        }) => values.clone(),
        other => panic!("no module render: {other:?}"),
    }
}

#[test]
fn values_from_is_read_as_the_release_identity_after_the_sa_check_and_merged_under_values() {
    let mut db = reference(ValuesKind::Secret, "db");
    db.values_key = Some("password".into());
    db.target_path = Some("db.password".into());
    let mr = with_values_from(vec![reference(ValuesKind::ConfigMap, "base"), db]);
    let r = run_mr(&operator_cfg(), mr, &canned_found());
    assert_eq!(r.outcome, Outcome::Applied, "{r:#?}");
    // The ServiceAccount is checked once, before the read, and not again at step 12.
    let awaited = r.awaited();
    assert_eq!(
        &awaited[..3],
        &[
            EffectKind::CheckServiceAccount,
            EffectKind::ReadValues,
            EffectKind::Render
        ]
    );
    assert_eq!(
        awaited
            .iter()
            .filter(|k| **k == EffectKind::CheckServiceAccount)
            .count(),
        1
    );
    match r.find(EffectKind::ReadValues) {
        Some(Effect::ReadValues {
            namespace,
            refs,
            credentials,
            identity,
        }) => {
            assert_eq!(namespace, "demo");
            assert_eq!(refs.len(), 2);
            assert_eq!(credentials, &None);
            assert_eq!(
                identity.as_ref().map(|i| i.user.as_str()),
                Some("system:serviceaccount:demo:deployer")
            );
        }
        other => panic!("{other:?}"),
    }
    let merged = json!({"replicas": 2, "image": "nginx", "db": {"password": secret_digest()}});
    assert_eq!(render_values(&r), Some(merged.clone()));
    assert_eq!(
        r.status.last_applied_config_digest,
        digest::module_config(Some(&merged))
    );
    // The trace holds the digest, never the value.
    assert!(!r.trace.join("\n").contains("hunter2"));
}

#[test]
fn a_missing_reference_stalls_values_not_found_naming_object_and_key() {
    let mr = with_values_from(vec![reference(ValuesKind::ConfigMap, "absent")]);
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    assert_stall(
        &r,
        "ValuesNotFound",
        "Render",
        "valuesFrom ConfigMap demo/absent not found (key \"values.yaml\")",
    );
    assert!(r.find(EffectKind::Render).is_none());
}

#[test]
fn an_optional_missing_reference_is_skipped() {
    let mut absent = reference(ValuesKind::Secret, "absent");
    absent.optional = true;
    let r = run_mr(
        &operator_cfg(),
        with_values_from(vec![absent]),
        &Canned::default(),
    );
    assert_eq!(r.outcome, Outcome::Applied, "{r:#?}");
    assert_eq!(render_values(&r), Some(json!({"replicas": 2})));
    // Same config digest as without valuesFrom.
    assert_eq!(
        r.status.last_applied_config_digest,
        digest::module_config(Some(&json!({"replicas": 2})))
    );
}

#[test]
fn forbidden_read_is_impersonation_failed() {
    let canned = Canned {
        values: BTreeMap::from([(
            "db".to_string(),
            Err(ApiError::Forbidden {
                message: "secrets \"db\" is forbidden".into(),
            }),
        )]),
        ..Canned::default()
    };
    let r = run_mr(
        &operator_cfg(),
        with_values_from(vec![reference(ValuesKind::Secret, "db")]),
        &canned,
    );
    assert_stall(
        &r,
        "ImpersonationFailed",
        "Apply",
        "reading Secret demo/db (valuesFrom) forbidden as system:serviceaccount:demo:deployer: secrets \"db\" is forbidden",
    );
}

#[test]
fn a_missing_service_account_stalls_before_anything_is_read() {
    let canned = Canned {
        sa_exists: Ok(false),
        ..canned_found()
    };
    let r = run_mr(
        &operator_cfg(),
        with_values_from(vec![reference(ValuesKind::ConfigMap, "base")]),
        &canned,
    );
    assert_eq!(r.reason, "ImpersonationFailed");
    assert!(r.find(EffectKind::ReadValues).is_none());
}

#[test]
fn without_any_service_account_nothing_is_read_under_the_default_config() {
    let mut mr = with_values_from(vec![reference(ValuesKind::ConfigMap, "base")]);
    mr.spec.common.service_account_name = None;
    let r = run_mr(&opm_core::Config::default(), mr, &canned_found());
    assert_eq!(r.reason, "ImpersonationFailed");
    assert!(r.find(EffectKind::ReadValues).is_none());
    // With operator identity allowed, the read goes out as the operator.
    let mut mr = with_values_from(vec![reference(ValuesKind::ConfigMap, "base")]);
    mr.spec.common.service_account_name = None;
    let r = run_mr(&operator_cfg(), mr, &canned_found());
    assert_eq!(r.outcome, Outcome::Applied, "{r:#?}");
    assert!(matches!(
        r.find(EffectKind::ReadValues),
        Some(Effect::ReadValues { identity: None, .. })
    ));
}

#[test]
fn a_release_without_references_reads_nothing() {
    let r = run_mr(&operator_cfg(), module_release(), &Canned::default());
    assert!(r.find(EffectKind::ReadValues).is_none());
}

#[test]
fn secret_ref_credentials_reach_the_render_as_a_digest() {
    let mut mr = with_values_from(vec![]);
    mr.spec.module.secret_ref = Some(LocalSecretRef {
        name: "regcred".into(),
    });
    let digest = digest::sha256(b"{\"auths\":{}}");
    let canned = Canned {
        credentials: Ok(CredentialsContent::Found {
            digest: digest.clone(),
        }),
        ..Canned::default()
    };
    let r = run_mr(&operator_cfg(), mr.clone(), &canned);
    assert_eq!(r.outcome, Outcome::Applied, "{r:#?}");
    assert!(matches!(
        r.find(EffectKind::ReadValues),
        Some(Effect::ReadValues { credentials: Some(n), .. }) if n == "regcred"
    ));
    assert!(matches!(
        r.find(EffectKind::Render),
        Some(Effect::Render { request: RenderRequest::Module { credentials: Some(d), .. } }) if *d == digest
    ));
    let canned = Canned {
        credentials: Ok(CredentialsContent::ObjectMissing),
        ..Canned::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    assert_stall(
        &r,
        "ResolutionFailed",
        "Render",
        "Secret demo/regcred (module.secretRef) not found",
    );
}
