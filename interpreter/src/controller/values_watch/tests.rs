use super::*;
use serde_json::json;

fn mr(ns: &str, name: &str, spec: serde_json::Value) -> ModuleRelease {
    let mut s = json!({"module": {"path": "m@v0", "version": "v0.1.0"}});
    if let (Some(a), Some(b)) = (s.as_object_mut(), spec.as_object()) {
        a.extend(b.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
        "metadata": {"name": name, "namespace": ns}, "spec": s}))
    .unwrap()
}

#[test]
fn only_referenced_objects_are_watched_under_each_release_identity() {
    let mrs = [
        mr("a", "plain", json!({})),
        mr(
            "a",
            "x",
            json!({"serviceAccountName": "dep", "valuesFrom": [
            {"kind": "Secret", "name": "db"}, {"kind": "ConfigMap", "name": "base"}],
            "module": {"path": "m@v0", "version": "v0.1.0", "secretRef": {"name": "reg"}}}),
        ),
        mr(
            "b",
            "y",
            json!({"valuesFrom": [{"kind": "Secret", "name": "db"}]}),
        ),
    ];
    let w = watched(&mrs, Some("fallback"));
    let names: Vec<_> = w
        .iter()
        .map(|k| format!("{}:{}:{}/{}", k.user, k.kind.as_str(), k.namespace, k.name))
        .collect();
    assert_eq!(
        names,
        [
            "system:serviceaccount:a:dep:ConfigMap:a/base",
            "system:serviceaccount:a:dep:Secret:a/db",
            "system:serviceaccount:a:dep:Secret:a/reg",
            "system:serviceaccount:b:fallback:Secret:b/db",
        ]
    );
    assert!(watched(&mrs[..1], None).is_empty());
}

#[test]
fn a_watch_opens_only_after_a_read_under_its_identity_and_its_backoff() {
    let reads = ReadVersions::default();
    let key = |user: &str| WatchKey {
        user: user.into(),
        kind: ValuesKind::Secret,
        namespace: "a".into(),
        name: "db".into(),
    };
    let sa = key("system:serviceaccount:a:dep");
    let now = Instant::now();
    assert!(!may_open(&reads, &sa, None, now), "nothing read yet");
    reads.record(key(""), Some("5".into()));
    assert!(
        !may_open(&reads, &sa, None, now),
        "a read as the operator opens no watch as the ServiceAccount"
    );
    reads.record(sa.clone(), None);
    assert!(
        may_open(&reads, &sa, None, now),
        "read (absent) under that identity"
    );
    let later = now + Duration::from_secs(10);
    assert!(!may_open(&reads, &sa, Some(later), now), "refused: waits");
    assert!(may_open(&reads, &sa, Some(later), later));
}

#[test]
fn a_refused_watch_waits_longer_each_time_up_to_the_max() {
    let mut w = None;
    let mut waits = Vec::new();
    for _ in 0..7 {
        let next = refused_wait(w);
        waits.push(next.as_secs());
        w = Some(next);
    }
    assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300]);
    let forbidden = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
    assert!(is_forbidden(&watcher::Error::InitialListFailed(
        kube::Error::Api(Box::new(forbidden.clone()))
    )));
    assert!(is_forbidden(&watcher::Error::WatchError(Box::new(
        forbidden
    ))));
    let gone = kube::core::Status::failure("gone", "Expired").with_code(410);
    assert!(!is_forbidden(&watcher::Error::WatchError(Box::new(gone))));
}

#[test]
fn the_first_list_triggers_when_it_differs_from_the_read() {
    let v = |s: &str| Some(s.to_string());
    // Edited between the read and the watch: everyone, Ready or not.
    assert_eq!(first_list_triggers(Some(&v("5")), &v("6")), FirstList::All);
    // Created after a read that found nothing, deleted after a read that found it.
    assert_eq!(first_list_triggers(Some(&None), &v("6")), FirstList::All);
    assert_eq!(first_list_triggers(Some(&v("5")), &None), FirstList::All);
    // Unchanged.
    assert_eq!(
        first_list_triggers(Some(&v("5")), &v("5")),
        FirstList::Nothing
    );
    assert_eq!(first_list_triggers(Some(&None), &None), FirstList::Nothing);
    // No read recorded (a restart dropped it): the releases not Ready, if it exists.
    assert_eq!(first_list_triggers(None, &v("5")), FirstList::NotReady);
    assert_eq!(first_list_triggers(None, &None), FirstList::Nothing);
}
