use opm_core::object::Kind;
use serde_json::json;

use super::*;
use crate::fixtures;
use opm_core::constants::FINALIZER;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn setup() -> (Releases, ReleaseKey) {
    let mut r = Releases::default();
    let o = fixtures::module_release("demo", "app", "example.com/modules/web@v0", "v0.2.1");
    let key = r.create(o, false, "uid-1".into(), t(0)).unwrap();
    (r, key)
}

#[test]
fn merge_patch_follows_rfc7386() {
    let mut v = json!({"a": {"b": 1, "c": 2}, "d": [1]});
    merge_patch(
        &mut v,
        &json!({"a": {"b": null, "e": 3}, "d": [2], "f": "x"}),
    );
    assert_eq!(v, json!({"a": {"c": 2, "e": 3}, "d": [2], "f": "x"}));
}

#[test]
fn spec_edit_bumps_generation_only_on_change() {
    let (mut r, key) = setup();
    assert_eq!(r.get(&key).unwrap().meta().generation, Some(1));
    assert_eq!(
        r.edit_spec(&key, &json!({"values": {"replicas": 2}})),
        Ok(true)
    );
    assert_eq!(
        r.edit_spec(&key, &json!({"values": {"replicas": 2}})),
        Ok(false)
    );
    assert_eq!(r.get(&key).unwrap().meta().generation, Some(2));
    assert!(matches!(
        r.edit_spec(&key, &json!({"module": {"path": 3}})),
        Err(EditError::InvalidSpec(_))
    ));
    // Status and annotations leave the generation alone.
    r.patch_status(&key, &json!({"observedGeneration": 2}))
        .unwrap();
    r.annotate(&key, "a", Some("b"));
    assert_eq!(r.get(&key).unwrap().meta().generation, Some(2));
    assert_eq!(
        r.get(&key).unwrap().status().unwrap().observed_generation,
        2
    );
}

#[test]
fn deletion_waits_for_finalizers() {
    let (mut r, key) = setup();
    r.add_finalizer(&key, FINALIZER).unwrap();
    assert!(r.delete(&key, t(5)));
    let o = r.get(&key).unwrap();
    assert!(o.meta().deletion_timestamp.is_some());
    assert!(r.add_finalizer(&key, "other").is_err());
    r.remove_finalizer(&key, FINALIZER).unwrap();
    assert!(r.get(&key).is_none());
    assert!(matches!(
        r.patch_status(&key, &json!({})),
        Err(ApiError::NotFound { .. })
    ));
}

#[test]
fn delete_without_finalizer_is_immediate() {
    let (mut r, key) = setup();
    assert!(r.delete(&key, t(5)));
    assert!(r.get(&key).is_none());
}

#[test]
fn snapshot_fills_dependency_defaults() {
    let (mut r, key) = setup();
    r.edit_spec(
        &key,
        &json!({"dependsOn": [{"name": "db"}, {"name": "x", "namespace": "o", "kind": "Release"}]}),
    )
    .unwrap();
    let s = r.snapshot(&key).unwrap();
    assert_eq!(s.depends_on[0].kind, Kind::ModuleRelease);
    assert_eq!(s.depends_on[0].namespace, "demo");
    assert_eq!(s.depends_on[1].kind, Kind::Release);
    assert_eq!(s.generation, 2);
    assert_eq!(s.ready, "");
}

fn depending(name: &str, on: &str) -> ReleaseObject {
    let mut o = fixtures::module_release("demo", name, "example.com/modules/web@v0", "v0.2.1");
    fixtures::common_mut(&mut o).depends_on = vec![opm_core::api::DependencyRef {
        name: on.into(),
        ..Default::default()
    }];
    o
}

fn indexed(r: &Releases) -> Vec<String> {
    r.with_depends_on().map(|(k, _)| k.name.clone()).collect()
}

#[test]
fn depends_on_index_follows_creates_edits_and_deletions() {
    let (mut r, plain) = setup();
    let b = r
        .create(depending("b", "app"), false, "uid-b".into(), t(0))
        .unwrap();
    r.create(depending("a", "app"), false, "uid-a".into(), t(0))
        .unwrap();
    // Key order, as walking every release gave; the release without dependsOn is absent.
    assert_eq!(indexed(&r), ["a", "b"]);
    r.edit_spec(&plain, &json!({"dependsOn": [{"name": "b"}]}))
        .unwrap();
    assert_eq!(indexed(&r), ["a", "app", "b"]);
    r.edit_spec(&b, &json!({"dependsOn": null})).unwrap();
    assert_eq!(indexed(&r), ["a", "app"]);
    // Deleting with a finalizer keeps the object (and its entry) until the finalizer goes.
    r.add_finalizer(&plain, FINALIZER).unwrap();
    assert!(r.delete(&plain, t(1)));
    assert_eq!(indexed(&r), ["a", "app"]);
    r.remove_finalizer(&plain, FINALIZER).unwrap();
    assert_eq!(indexed(&r), ["a"]);
    let a = ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: "demo".into(),
        name: "a".into(),
    };
    assert!(r.delete(&a, t(2)));
    assert!(indexed(&r).is_empty());
}

#[test]
fn depends_on_index_is_rebuilt_from_serialised_data() {
    let (mut r, _) = setup();
    r.create(depending("b", "app"), false, "uid-b".into(), t(0))
        .unwrap();
    // What `Deserialize` builds from (the map's keys are not strings, so not via JSON).
    let back = Releases::from(ReleasesData {
        records: r.records.clone(),
        resource_version: r.resource_version,
    });
    assert_eq!(indexed(&back), ["b"]);
    assert_eq!(back, r);
}
