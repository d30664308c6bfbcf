use super::*;
use crate::input::ReleaseSnapshot;
use crate::outcome::FailureClass;

fn key(ns: &str, name: &str) -> ReleaseKey {
    ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: ns.into(),
        name: name.into(),
    }
}

fn snap(
    k: ReleaseKey,
    gen_: i64,
    observed: i64,
    ready: &str,
    deps: Vec<ReleaseKey>,
) -> ReleaseSnapshot {
    ReleaseSnapshot {
        key: k,
        generation: gen_,
        observed_generation: observed,
        ready: ready.into(),
        depends_on: deps,
        deleting: false,
    }
}

#[test]
fn resolve_fills_defaults_and_rejects_unknown_kinds() {
    let own = key("demo", "app");
    let refs = vec![
        DependencyRef {
            name: "db".into(),
            namespace: String::new(),
            kind: String::new(),
            ..Default::default()
        },
        DependencyRef {
            name: "net".into(),
            namespace: "infra".into(),
            kind: "Release".into(),
            ..Default::default()
        },
    ];
    let got = resolve(&own, &refs).unwrap().releases;
    assert_eq!(got[0], key("demo", "db"));
    assert_eq!(
        got[1],
        ReleaseKey {
            kind: Kind::Release,
            namespace: "infra".into(),
            name: "net".into()
        }
    );
    // Another kind without apiVersion names nothing that can be read.
    let bad = vec![DependencyRef {
        name: "x".into(),
        kind: "Helm".into(),
        ..Default::default()
    }];
    assert_eq!(
        resolve(&own, &bad).unwrap_err().class,
        FailureClass::Stalled
    );
}

#[test]
fn precheck_self_and_cross_namespace() {
    let own = key("demo", "app");
    let err = precheck(&own, std::slice::from_ref(&own), &[], true).unwrap_err();
    assert_eq!(err.message, "release demo/app depends on itself");
    let err = precheck(&own, &[key("infra", "db")], &[], false).unwrap_err();
    assert_eq!(err.reason, Reason::CrossNamespaceRefDenied);
    assert!(precheck(&own, &[key("infra", "db")], &[], true).is_ok());
}

#[test]
fn cycles_through_self_are_found() {
    let a = key("demo", "a");
    let b = key("demo", "b");
    let c = key("demo", "c");
    let report = DependencyReport {
        releases: vec![
            snap(b.clone(), 1, 1, "True", vec![c.clone()]),
            snap(c.clone(), 1, 1, "True", vec![a.clone()]),
        ],
        objects: Vec::new(),
    };
    let err = evaluate(&a, std::slice::from_ref(&b), &report).unwrap_err();
    assert_eq!(err.class, FailureClass::Stalled);
    assert_eq!(
        err.message,
        "dependency cycle detected: demo/a -> demo/b -> demo/c -> demo/a"
    );
    // A cycle not through us is not our stall: b waits on its own.
    let report = DependencyReport {
        releases: vec![
            snap(b.clone(), 1, 1, "False", vec![c.clone()]),
            snap(c.clone(), 1, 1, "False", vec![b.clone()]),
        ],
        objects: Vec::new(),
    };
    let err = evaluate(&a, &[b], &report).unwrap_err();
    assert_eq!(err.class, FailureClass::SoftBlocked);
}

#[test]
fn first_blocker_in_order_is_named() {
    let a = key("demo", "a");
    let ready = key("demo", "ready");
    let stale = key("demo", "stale");
    let missing = key("demo", "missing");
    let report = DependencyReport {
        releases: vec![
            snap(ready.clone(), 2, 2, "True", vec![]),
            snap(stale.clone(), 3, 2, "True", vec![]),
        ],
        objects: Vec::new(),
    };
    let err = evaluate(
        &a,
        &[ready.clone(), stale.clone(), missing.clone()],
        &report,
    )
    .unwrap_err();
    assert_eq!(err.message, "waiting for dependency demo/stale");
    assert_eq!(err.class, FailureClass::SoftBlocked);
    let err = evaluate(&a, &[ready.clone(), missing], &report).unwrap_err();
    assert_eq!(err.message, "waiting for dependency demo/missing");
    assert!(evaluate(&a, &[ready], &report).is_ok());
}

#[test]
fn key_of_and_names_agree_with_resolve() {
    let own = key("demo", "app");
    let refs = [
        DependencyRef {
            name: "db".into(),
            namespace: String::new(),
            kind: String::new(),
            ..Default::default()
        },
        DependencyRef {
            name: "net".into(),
            namespace: "infra".into(),
            kind: "Release".into(),
            ..Default::default()
        },
    ];
    let resolved = resolve(&own, &refs).unwrap().releases;
    for (r, k) in refs.iter().zip(&resolved) {
        assert_eq!(&key_of(&own, r), k);
        assert!(names(&own, r, k));
    }
    // Same name, other namespace or kind: not named.
    assert!(!names(&own, &refs[0], &key("other", "db")));
    let mut as_release = resolved[0].clone();
    as_release.kind = Kind::Release;
    assert!(!names(&own, &refs[0], &as_release));
    // Another kind is not a release: never named, and without apiVersion refused.
    let odd = DependencyRef {
        name: "x".into(),
        kind: "Deployment".into(),
        ..Default::default()
    };
    assert!(!names(&own, &odd, &key("demo", "x")));
    assert!(release_keys(&own, std::slice::from_ref(&odd)).is_empty());
    assert!(resolve(&own, &[odd]).is_err());
}

#[test]
fn any_object_with_api_version_resolves_and_a_bad_ready_expr_stalls() {
    let own = key("demo", "app");
    let crd = DependencyRef {
        name: "dbs.example.com".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        ..Default::default()
    };
    let db = DependencyRef {
        name: "main".into(),
        namespace: "data".into(),
        api_version: "example.com/v1".into(),
        kind: "Database".into(),
        ready_expr: "dep.status.ready == true".into(),
    };
    let got = resolve(&own, &[crd, db.clone()]).unwrap();
    assert!(got.releases.is_empty());
    assert_eq!(got.objects.len(), 2);
    assert_eq!(got.objects[0].id.group, "apiextensions.k8s.io");
    assert_eq!(got.objects[0].id.version, "v1");
    assert_eq!(got.objects[0].id.namespace, "demo");
    assert_eq!(got.objects[1].id.namespace, "data");
    assert_eq!(
        got.objects[1].ready_expr.as_deref(),
        Some("dep.status.ready == true")
    );
    let err = precheck(&own, &[], &got.objects, false).unwrap_err();
    assert_eq!(err.reason, Reason::CrossNamespaceRefDenied);
    assert!(precheck(&own, &[], &got.objects, true).is_ok());
    let bad = DependencyRef {
        ready_expr: "dep.status.(".into(),
        ..db
    };
    let err = resolve(&own, &[bad]).unwrap_err();
    assert_eq!(err.class, FailureClass::Stalled);
    assert!(
        err.message
            .starts_with("dependsOn[0] (Database/data/main) readyExpr does not compile"),
        "{}",
        err.message
    );
}
