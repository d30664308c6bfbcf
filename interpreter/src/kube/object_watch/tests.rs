use super::*;
use kube::api::ObjectMeta;

#[test]
fn a_listed_object_keeps_its_version_uid_and_only_the_stamped_labels() {
    let meta = k8s_openapi::api::core::v1::ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("team-a".into()),
            name: Some("web".into()),
            resource_version: Some("42".into()),
            uid: Some("u-1".into()),
            labels: Some(BTreeMap::from([
                (labels::MANAGED_BY.into(), FIELD_MANAGER.into()),
                (labels::RELEASE_NAME.into(), "r".into()),
                (labels::RELEASE_UUID.into(), "r-uid".into()),
                (labels::COMPONENT.into(), "".into()),
                ("team".into(), "payments".into()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    };
    let (key, listed) = object_key(&meta).expect("named and versioned");
    assert_eq!(key, ("team-a".to_string(), "web".to_string()));
    assert_eq!(listed.version(), "42");
    assert_eq!(listed.uid(), "u-1");
    assert_eq!(listed.label(labels::RELEASE_NAME), Some("r"));
    assert_eq!(listed.label(labels::RELEASE_NAMESPACE), None);
    assert_eq!(
        listed.label(labels::COMPONENT),
        Some(""),
        "empty, not absent"
    );
    assert_eq!(listed.label("team"), None);
    assert_eq!(
        listed.labels(),
        BTreeMap::from([
            (labels::MANAGED_BY.to_string(), FIELD_MANAGER.to_string()),
            (labels::RELEASE_NAME.to_string(), "r".to_string()),
            (labels::RELEASE_UUID.to_string(), "r-uid".to_string()),
            (labels::COMPONENT.to_string(), String::new()),
        ])
    );
}
