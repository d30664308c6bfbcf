use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use opm_testenv::flux::{self, Artifact, SourceKind};
use serde_json::json;

use crate::status_code;

const FINALIZER: &str = "releases.opmodel.dev/cleanup";

#[tokio::test]
async fn status_subresource_is_separate_from_the_main_resource() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let kind = SourceKind::OciRepository;
    let created = flux::create_source(&ns.client, &ns.name, kind, "status")
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &kind.api_resource(),
    );

    // Status written through the main resource is dropped.
    let ignored = api
        .patch(
            "status",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 42}})),
        )
        .await
        .unwrap();
    // (The Flux CRD defaults status.observedGeneration to -1.)
    assert_ne!(ignored.data["status"]["observedGeneration"], 42);

    // Through the subresource it sticks, and the generation does not move.
    let artifact = Artifact::for_bytes("http://127.0.0.1:1/a.tar.gz", b"bytes");
    let with_status = flux::set_artifact(&ns.client, &ns.name, kind, "status", &artifact)
        .await
        .unwrap();
    assert_eq!(
        with_status.data["status"]["artifact"]["digest"],
        artifact.digest
    );
    assert_eq!(with_status.metadata.generation, Some(1));

    // A spec change bumps the generation; a spec change through /status is ignored.
    let bumped = api
        .patch(
            "status",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"interval": "1m"}})),
        )
        .await
        .unwrap();
    assert_eq!(bumped.metadata.generation, Some(2));
    let spec_via_status = api
        .patch_status(
            "status",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"interval": "7m"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec_via_status.data["spec"]["interval"], "1m");
    assert_eq!(spec_via_status.metadata.generation, Some(2));
}

#[tokio::test]
async fn finalizer_holds_deletion_until_removed() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("held".into());
    cm.metadata.finalizers = Some(vec![FINALIZER.into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();

    // Delete only marks the object while the finalizer is there.
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = api.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.finalizers(), [FINALIZER.to_owned()]);

    // A terminating object accepts no new finalizers but may drop its own.
    let err = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER, "example.com/other"]}})),
        )
        .await
        .unwrap_err();
    assert_eq!(status_code(&err), Some(422), "{err}");

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let gone = api.get("held").await.unwrap_err();
    assert_eq!(status_code(&gone), Some(404), "{gone}");
}

#[tokio::test]
async fn delete_with_a_stale_uid_precondition_conflicts() {
    let env = opm_testenv::TestEnv::global().await;
    let ns = env.namespace().await.unwrap();
    let api: Api<ConfigMap> = ns.api();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("recreated".into());
    let first = api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("recreated", &DeleteParams::default())
        .await
        .unwrap();
    let second = api.create(&PostParams::default(), &cm).await.unwrap();
    assert_ne!(first.uid(), second.uid());

    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            uid: first.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = api.delete("recreated", &stale).await.unwrap_err();
    assert_eq!(status_code(&err), Some(409), "{err}");
    assert!(api.get("recreated").await.is_ok());
}
