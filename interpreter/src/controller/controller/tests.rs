use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use opm_core::constants::REQUESTED_AT_ANNOTATION;

#[test]
fn the_stored_copy_keeps_what_is_read_and_drops_the_rest() {
    let mut r = Release::new("r", Default::default());
    r.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    r.metadata.annotations = Some(
        [
            (LAST_APPLIED, "{\"apiVersion\":\"…\"}"),
            (REQUESTED_AT_ANNOTATION, "now"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
    );
    r.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
    let before = trigger_hash(&r);
    trim_for_store(&mut r);
    assert_eq!(r.metadata.managed_fields, None);
    let annotations = r.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        vec![REQUESTED_AT_ANNOTATION]
    );
    assert_eq!(r.metadata.labels.as_ref().map(|l| l.len()), Some(1));
    assert_eq!(
        trigger_hash(&r),
        before,
        "what starts an attempt is unchanged"
    );
}
