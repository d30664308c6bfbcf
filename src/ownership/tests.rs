use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::input::LiveMeta;
use crate::object::Kind;

fn cm(name: &str) -> ResourceId {
    ResourceId {
        kind: "ConfigMap".into(),
        namespace: "demo".into(),
        name: name.into(),
        version: "v1".into(),
        ..Default::default()
    }
}

fn labelled(pairs: &[(&str, &str)]) -> Result<Option<LiveMeta>, ApiError> {
    Ok(Some(LiveMeta {
        uid: "u".into(),
        labels: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }))
}

fn live(id: &ResourceId, result: Result<Option<LiveMeta>, ApiError>) -> LiveObject {
    LiveObject {
        id: id.clone(),
        result,
    }
}

#[test]
fn another_release_is_named_from_its_labels() {
    let other = release_uuid(Kind::ModuleRelease, "demo", "other");
    let l = BTreeMap::from([
        (labels::RELEASE_UUID.to_string(), other.clone()),
        (labels::RELEASE_NAME.to_string(), "other".to_string()),
        (labels::RELEASE_NAMESPACE.to_string(), "demo".to_string()),
    ]);
    assert_eq!(
        owner(Some(&l), "mine"),
        Owner::Release("ModuleRelease demo/other".into())
    );
    let err = decide(
        &[cm("app")],
        &[live(
            &cm("app"),
            labelled(&[
                (labels::RELEASE_UUID, &other),
                (labels::RELEASE_NAME, "other"),
                (labels::RELEASE_NAMESPACE, "demo"),
            ]),
        )],
        "mine",
        true,
        None,
    )
    .unwrap_err();
    assert_eq!(err.reason, Reason::OwnershipConflict);
    assert_eq!(
        err.message,
        "ConfigMap demo/app belongs to ModuleRelease demo/other"
    );
}

#[test]
fn forged_owner_labels_are_named_by_uuid() {
    let l = BTreeMap::from([
        (labels::RELEASE_UUID.to_string(), "1234".to_string()),
        (labels::RELEASE_NAME.to_string(), "victim".to_string()),
    ]);
    assert_eq!(
        owner(Some(&l), "mine"),
        Owner::Release("the release with uuid 1234".into())
    );
}

#[test]
fn unowned_needs_adopt_existing() {
    let obs = [live(
        &cm("app"),
        labelled(&[(labels::MANAGED_BY, "opm-controller")]),
    )];
    let err = decide(&[cm("app")], &obs, "mine", false, None).unwrap_err();
    assert_eq!(err.reason, Reason::OwnershipConflict);
    assert_eq!(
        err.message,
        "ConfigMap demo/app exists and was not created by a release; set spec.rollout.adoptExisting: true to take it over"
    );
    assert!(decide(&[cm("app")], &obs, "mine", true, None).is_ok());
}

#[test]
fn absent_and_ours_go_ahead() {
    let obs = [
        live(&cm("a"), Ok(None)),
        live(
            &cm("b"),
            Err(ApiError::NotFound {
                message: "gone".into(),
            }),
        ),
        live(&cm("c"), labelled(&[(labels::RELEASE_UUID, "mine")])),
    ];
    assert!(decide(&[cm("a"), cm("b"), cm("c")], &obs, "mine", false, None).is_ok());
}

#[test]
fn read_errors_are_classified() {
    let forbidden = [live(
        &cm("a"),
        Err(ApiError::Forbidden {
            message: "no".into(),
        }),
    )];
    let f = decide(
        &[cm("a")],
        &forbidden,
        "mine",
        false,
        Some("system:serviceaccount:demo:sa"),
    )
    .unwrap_err();
    assert_eq!(f.reason, Reason::ImpersonationFailed);
    let f = decide(&[cm("a")], &forbidden, "mine", false, None).unwrap_err();
    assert_eq!(f.reason, Reason::ApplyFailed);
    assert_eq!(f.class, crate::outcome::FailureClass::Transient);
    // No answer at all for a target is never taken as "absent".
    assert!(decide(&[cm("a")], &[], "mine", true, None).is_err());
}

#[test]
fn policies_are_stripped_and_recorded() {
    let mut objects = vec![
        DesiredObject {
            id: cm("keep"),
            component: "c".into(),
            manifest: json!({"metadata": {"name": "keep",
                "annotations": {"releases.opmodel.dev/prune": "disabled", "a": "b"}}}),
            policy: Default::default(),
        },
        DesiredObject {
            id: cm("odd"),
            component: "c".into(),
            manifest: json!({"metadata": {"name": "odd",
                "annotations": {"releases.opmodel.dev/prune": "enabled"}}}),
            policy: Default::default(),
        },
    ];
    let disabled = strip_policies(&mut objects);
    assert_eq!(disabled, vec![cm("keep")]);
    assert_eq!(
        objects[0].manifest,
        json!({"metadata": {"name": "keep", "annotations": {"a": "b"}}})
    );
    assert_eq!(objects[1].manifest, json!({"metadata": {"name": "odd"}}));
    let mut entries: Vec<InventoryEntry> =
        objects.iter().map(DesiredObject::inventory_entry).collect();
    mark_prune_disabled(&mut entries, &disabled);
    assert!(prune_disabled(&entries[0]));
    assert!(!prune_disabled(&entries[1]));
}

/// Every desired object is read, whatever the inventory says: an entry in
/// `status.inventory` (which a tenant may write) proves nothing about the live object.
#[test]
fn every_object_is_checked_in_or_out_of_the_inventory() {
    let objects: Vec<DesiredObject> = ["a", "b"]
        .iter()
        .map(|n| DesiredObject {
            id: cm(n),
            component: "c".into(),
            manifest: json!({}),
            policy: Default::default(),
        })
        .collect();
    assert_eq!(targets(&objects), vec![cm("a"), cm("b")]);
}
