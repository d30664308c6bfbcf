use std::collections::BTreeMap;

use super::*;
use crate::input::LiveMeta;

fn id(group: &str, kind: &str, name: &str) -> ResourceId {
    ResourceId {
        group: group.into(),
        kind: kind.into(),
        namespace: if kind == "Namespace" {
            String::new()
        } else {
            "demo".into()
        },
        name: name.into(),
        version: "v1".into(),
    }
}

fn entry(i: &ResourceId) -> InventoryEntry {
    InventoryEntry {
        group: i.group.clone(),
        kind: i.kind.clone(),
        namespace: i.namespace.clone(),
        name: i.name.clone(),
        v: i.version.clone(),
        component: "c".into(),
        prune: String::new(),
    }
}

fn live(i: &ResourceId, uid: &str, labels: &[(&str, &str)]) -> LiveObject {
    LiveObject {
        id: i.clone(),
        result: Ok(Some(LiveMeta {
            uid: uid.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        })),
    }
}

#[test]
fn plan_protects_namespaces_and_crds_and_reverses_apply_order() {
    let ns = id("", "Namespace", "x");
    let crd = id(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "w.example.com",
    );
    let sa = id("", "ServiceAccount", "sa");
    let deploy = id("apps", "Deployment", "web");
    let cm = id("", "ConfigMap", "cfg");
    let (protected, targets) = plan(&[
        entry(&ns),
        entry(&sa),
        entry(&crd),
        entry(&cm),
        entry(&deploy),
    ]);
    assert_eq!(protected, vec![crd, ns]);
    assert_eq!(targets, vec![deploy, cm, sa]);
}

#[test]
fn guards_check_manager_and_uuid() {
    let a = id("", "ConfigMap", "a");
    let b = id("", "ConfigMap", "b");
    let c = id("", "ConfigMap", "c");
    let d = id("", "ConfigMap", "d");
    let e = id("", "ConfigMap", "e");
    let f = id("", "ConfigMap", "f");
    let targets = vec![
        a.clone(),
        b.clone(),
        c.clone(),
        d.clone(),
        e.clone(),
        f.clone(),
    ];
    let observed = vec![
        live(
            &a,
            "u-a",
            &[
                ("app.kubernetes.io/managed-by", "opm-controller"),
                ("module-release.opmodel.dev/uuid", "ours"),
            ],
        ),
        live(&b, "u-b", &[("app.kubernetes.io/managed-by", "opm-cli")]),
        live(&c, "u-c", &[("app.kubernetes.io/managed-by", "helm")]),
        live(
            &d,
            "u-d",
            &[
                ("app.kubernetes.io/managed-by", "open-platform-model"),
                ("module-release.opmodel.dev/uuid", "theirs"),
            ],
        ),
        LiveObject {
            id: e.clone(),
            result: Ok(None),
        },
        LiveObject {
            id: f.clone(),
            result: Err(ApiError::Unavailable {
                message: "down".into(),
            }),
        },
    ];
    let dec = decide(&targets, &observed, "ours", &[]);
    // `b` carries one of our managed-by values but no uuid: not provably ours (issue 13
    // item 8), so it is left alone.
    assert_eq!(
        dec.deletions,
        vec![Deletion {
            id: a.clone(),
            uid: "u-a".into(),
            orphan: false,
            resume: false,
        }]
    );
    assert_eq!(dec.not_ours, vec![b, c, d]);
    assert_eq!(
        dec.failures,
        vec![PruneFailure {
            id: f,
            error: ApiError::Unavailable {
                message: "down".into()
            }
        }]
    );
}

#[test]
fn unrequested_objects_are_ignored() {
    let a = id("", "ConfigMap", "a");
    let stranger = id("", "ConfigMap", "stranger");
    let dec = decide(
        &[a],
        &[live(
            &stranger,
            "u",
            &[("app.kubernetes.io/managed-by", "opm-controller")],
        )],
        "ours",
        &[],
    );
    assert!(dec.deletions.is_empty());
}

#[test]
fn tally_counts_and_tolerates_gone_and_successors() {
    let a = id("", "ConfigMap", "a");
    let b = id("", "ConfigMap", "b");
    let c = id("", "ConfigMap", "c");
    let d = id("", "ConfigMap", "d");
    let req: Vec<Deletion> = [&a, &b, &c, &d]
        .iter()
        .map(|i| Deletion {
            id: (*i).clone(),
            uid: "u".into(),
            orphan: false,
            resume: false,
        })
        .collect();
    let results = vec![
        ObjectResult {
            id: a,
            result: Ok(()),
        },
        ObjectResult {
            id: b,
            result: Err(ApiError::NotFound {
                message: String::new(),
            }),
        },
        ObjectResult {
            id: c,
            result: Err(ApiError::Conflict {
                message: "uid".into(),
            }),
        },
        ObjectResult {
            id: d.clone(),
            result: Err(ApiError::Forbidden {
                message: "no".into(),
            }),
        },
    ];
    let (n, failures) = tally(&req, &results);
    assert_eq!(n, 1);
    assert_eq!(failures.len(), 1);
    assert_eq!(
        failure_message(&failures),
        "prune failed for 1 object(s): ConfigMap/demo/d: forbidden: no"
    );
}
