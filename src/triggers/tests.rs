use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::api::Condition;

fn status(ready: &str, reason: &str) -> ReleaseStatus {
    ReleaseStatus {
        conditions: vec![Condition {
            type_: conditions::READY.into(),
            status: ready.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: None,
            observed_generation: 1,
        }],
        ..Default::default()
    }
}

#[test]
fn only_a_transition_to_ready_retriggers_dependents() {
    let ready = status("True", Reason::Succeeded.as_str());
    assert!(retriggers_dependents(false, Some(&ready)));
    // Staying Ready (a NoOp) does not.
    assert!(!retriggers_dependents(true, Some(&ready)));
    // A suspended NoOp is not Ready: its dependents stay blocked.
    let suspended = status("False", Reason::Suspended.as_str());
    assert!(!retriggers_dependents(false, Some(&suspended)));
    assert!(!retriggers_dependents(
        false,
        Some(&status("Unknown", Reason::Progressing.as_str()))
    ));
    assert!(!retriggers_dependents(false, None));
}

#[test]
fn is_ready_reads_the_ready_condition_only() {
    assert!(is_ready(Some(&status("True", Reason::Succeeded.as_str()))));
    assert!(!is_ready(Some(&status(
        "False",
        Reason::ApplyFailed.as_str()
    ))));
    let mut other = status("True", Reason::Succeeded.as_str());
    other.conditions[0].type_ = conditions::HEALTHY.into();
    assert!(!is_ready(Some(&other)));
    assert!(!is_ready(None));
}

#[test]
fn a_service_account_retriggers_only_releases_waiting_for_one() {
    for reason in [
        Reason::ImpersonationFailed.as_str(),
        Reason::DeletionSAMissing.as_str(),
    ] {
        assert!(waits_for_service_account(Some(&status("False", reason))));
    }
    for reason in [
        Reason::ApplyFailed.as_str(),
        Reason::Succeeded.as_str(),
        Reason::Suspended.as_str(),
    ] {
        assert!(!waits_for_service_account(Some(&status("False", reason))));
    }
    assert!(!waits_for_service_account(None));
    assert_eq!(SERVICE_ACCOUNT_SETTLE, Duration::from_secs(3));
}

#[test]
fn series_are_forgotten_when_the_release_is_gone() {
    assert!(forgets_series(false, Reason::Gone));
    assert!(forgets_series(true, Reason::Deleted));
    assert!(!forgets_series(true, Reason::Succeeded));
    assert!(!forgets_series(true, Reason::DeletionSAMissing));
}

fn meta() -> ObjectMeta {
    ObjectMeta {
        name: Some("app".into()),
        uid: Some("u1".into()),
        generation: Some(1),
        resource_version: Some("10".into()),
        finalizers: Some(vec!["releases.opmodel.dev/cleanup".into()]),
        annotations: Some(BTreeMap::from([("team".into(), "a".into())])),
        ..Default::default()
    }
}

fn deleting(mut m: ObjectMeta) -> ObjectMeta {
    m.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
    m
}

fn annotate(mut m: ObjectMeta, k: &str, v: &str) -> ObjectMeta {
    m.annotations
        .get_or_insert_default()
        .insert(k.into(), v.into());
    m
}

#[test]
fn a_live_release_starts_an_attempt_on_spec_deletion_and_requested_at() {
    let m = meta();
    let mut spec = meta();
    spec.generation = Some(2);
    assert!(starts_attempt(&m, &spec));
    assert!(starts_attempt(&m, &deleting(meta())));
    assert!(starts_attempt(
        &m,
        &annotate(meta(), REQUESTED_AT_ANNOTATION, "t1")
    ));
    let mut recreated = meta();
    recreated.uid = Some("u2".into());
    assert!(starts_attempt(&m, &recreated));
}

#[test]
fn a_live_release_ignores_status_finalizer_and_other_annotation_writes() {
    let m = meta();
    let mut status_write = meta();
    status_write.resource_version = Some("11".into());
    assert!(!starts_attempt(&m, &status_write));
    let mut finalizer = meta();
    finalizer.finalizers = None;
    assert!(!starts_attempt(&m, &finalizer));
    assert!(!starts_attempt(&m, &annotate(meta(), "team", "b")));
}

#[test]
fn a_deleting_release_starts_an_attempt_on_any_annotation_or_finalizer_change() {
    let m = deleting(meta());
    assert!(starts_attempt(
        &m,
        &deleting(annotate(meta(), "opm.dev/force-delete-orphan", "true"))
    ));
    let mut finalizer = deleting(meta());
    finalizer.finalizers = Some(vec![]);
    assert!(starts_attempt(&m, &finalizer));
    let mut status_write = deleting(meta());
    status_write.resource_version = Some("11".into());
    assert!(!starts_attempt(&m, &status_write));
}
