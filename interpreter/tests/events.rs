//! The event publisher on the real API server (SPEC §11): a repeat folds into the first
//! Event's `series`, anything else is a new Event, and a series whose Event is gone starts
//! a new one.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as KEvent;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use opm_core::reason::Reason;
use opm_core::{Event, EventType};
use opm_operator::steps::events::EventSink;
use opm_testenv::{TestEnv, TestNamespace};

fn warning(note: &str) -> Event {
    Event {
        event_type: EventType::Warning,
        reason: Reason::ApplyFailed,
        action: "Apply".into(),
        note: note.into(),
    }
}

async fn listed(api: &Api<KEvent>) -> Vec<KEvent> {
    let mut evs = api.list(&ListParams::default()).await.expect("list").items;
    evs.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    evs
}

fn count(e: &KEvent) -> i32 {
    e.series.as_ref().map_or(1, |s| s.count)
}

/// A fresh namespace, a publisher, the namespace's Events, and a Release `name` there.
async fn setup(name: &str) -> (TestNamespace, EventSink, Api<KEvent>, ObjectReference) {
    let ns = TestEnv::global()
        .await
        .namespace()
        .await
        .expect("namespace");
    let sink = EventSink::new(ns.client.clone());
    let api: Api<KEvent> = Api::namespaced(ns.client.clone(), &ns.name);
    let regarding = ObjectReference {
        api_version: Some("releases.opmodel.dev/v1alpha1".into()),
        kind: Some("Release".into()),
        namespace: Some(ns.name.clone()),
        name: Some(name.into()),
        uid: Some("00000000-0000-0000-0000-000000000001".into()),
        ..Default::default()
    };
    (ns, sink, api, regarding)
}

#[tokio::test]
async fn repeats_fold_into_a_series_and_a_gone_event_starts_a_new_one() {
    let (_ns, sink, api, regarding) = setup("r").await;

    sink.publish(&warning("apply failed: boom"), &regarding)
        .await;
    sink.publish(&warning("apply failed: boom"), &regarding)
        .await;
    sink.publish(&warning("apply failed: boom"), &regarding)
        .await;
    let evs = listed(&api).await;
    assert_eq!(evs.len(), 1, "three repeats are one Event: {evs:?}");
    let e = &evs[0];
    assert_eq!(count(e), 3);
    assert!(
        e.series
            .as_ref()
            .is_some_and(|s| s.last_observed_time.0 >= e.event_time.as_ref().expect("time").0)
    );
    assert_eq!(e.reason.as_deref(), Some("ApplyFailed"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.action.as_deref(), Some("Apply"));
    assert_eq!(e.note.as_deref(), Some("apply failed: boom"));
    assert_eq!(e.reporting_controller.as_deref(), Some("opm-controller"));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("r")
    );

    // Another note is another event (client-go keys events by their note too).
    sink.publish(&warning("apply failed: bang"), &regarding)
        .await;
    let evs = listed(&api).await;
    assert_eq!(evs.len(), 2, "{evs:?}");
    assert_eq!(evs[1].note.as_deref(), Some("apply failed: bang"));
    assert_eq!(count(&evs[1]), 1);

    // The API server expired (here: someone deleted) the first Event: its next repeat is
    // a new Event, not a lost one.
    let first = evs[0].metadata.name.clone().expect("name");
    api.delete(&first, &DeleteParams::default())
        .await
        .expect("delete");
    sink.publish(&warning("apply failed: boom"), &regarding)
        .await;
    let evs = listed(&api).await;
    let booms: Vec<_> = evs
        .iter()
        .filter(|e| e.note.as_deref() == Some("apply failed: boom"))
        .collect();
    assert_eq!(booms.len(), 1, "{evs:?}");
    assert_ne!(booms[0].metadata.name.as_deref(), Some(first.as_str()));
    assert_eq!(count(booms[0]), 1);
    // ...and the series continues on it.
    sink.publish(&warning("apply failed: boom"), &regarding)
        .await;
    let evs = listed(&api).await;
    let boom = evs
        .iter()
        .find(|e| e.note.as_deref() == Some("apply failed: boom"))
        .expect("boom");
    assert_eq!(count(boom), 2);
}

#[tokio::test]
async fn a_release_with_the_longest_name_still_gets_its_events() {
    // 253 characters: the longest name a release may have; `<name>.<nanos>` would not fit.
    let name = format!("{}-{}", "a".repeat(200), "b".repeat(52));
    let (_ns, sink, api, regarding) = setup(&name).await;
    sink.publish(&warning("apply failed"), &regarding).await;
    let evs = listed(&api).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(
        evs[0].regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some(name.as_str())
    );
}
