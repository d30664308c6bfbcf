use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::status_code;

fn config_map(value: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ssa"},
        "data": {"key": value},
    })
}

fn managers(cm: &ConfigMap) -> Vec<(String, String)> {
    cm.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn owns_key(cm: &ConfigMap, manager: &str) -> bool {
    cm.metadata.managed_fields.iter().flatten().any(|m| {
        m.manager.as_deref() == Some(manager)
            && m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:data/f:key").is_some())
    })
}

#[tokio::test]
async fn server_side_apply_conflicts_force_and_dry_run() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let api: Api<ConfigMap> = ns.api();

    // Create through SSA with the operator's field manager.
    let ours = PatchParams::apply("opm-controller");
    let created = api
        .patch("ssa", &ours, &Patch::Apply(&config_map("one")))
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["key"], "one");
    assert_eq!(
        managers(&created),
        vec![("opm-controller".to_owned(), "Apply".to_owned())]
    );

    // Another manager changing the same field conflicts without force...
    let theirs = PatchParams::apply("someone-else");
    let err = api
        .patch("ssa", &theirs, &Patch::Apply(&config_map("two")))
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(409), "{err}");
    let kube::Error::Api(status) = &err else {
        unreachable!()
    };
    assert_eq!(status.reason, "Conflict");
    assert!(
        status.message.contains("opm-controller"),
        "{}",
        status.message
    );
    let unchanged = api.get("ssa").await.unwrap();
    assert_eq!(unchanged.data.as_ref().unwrap()["key"], "one");

    // ...and wins with force, taking the field over.
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(&config_map("two")),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["key"], "two");
    assert!(owns_key(&forced, "someone-else"));
    assert!(!owns_key(&forced, "opm-controller"));

    // A dry-run apply returns the would-be object and changes nothing.
    let before = api.get("ssa").await.unwrap();
    let dry = api
        .patch(
            "ssa",
            &PatchParams::apply("opm-controller").force().dry_run(),
            &Patch::Apply(&config_map("three")),
        )
        .await
        .unwrap();
    assert_eq!(dry.data.as_ref().unwrap()["key"], "three");
    let after = api.get("ssa").await.unwrap();
    assert_eq!(after.data.as_ref().unwrap()["key"], "two");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert!(owns_key(&after, "someone-else"));
}

#[tokio::test]
async fn dry_run_create_leaves_nothing_behind() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let mut obj = config_map("x");
    obj["metadata"]["name"] = json!("ghost");
    let dry = api
        .patch(
            "ghost",
            &PatchParams::apply("opm-controller").dry_run(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap();
    assert_eq!(dry.metadata.name.as_deref(), Some("ghost"));
    let err = api.get("ghost").await.unwrap_err();
    assert_eq!(status_code(&err), Some(404), "{err}");
}

#[tokio::test]
async fn invalid_object_is_rejected_with_422() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let bad = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bad-key"},
        "data": {"not a valid key!": "x"},
    });
    let err = api
        .patch(
            "bad-key",
            &PatchParams::apply("opm-controller"),
            &Patch::Apply(&bad),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(422), "{err}");
}
