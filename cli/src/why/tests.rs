use super::*;
use opm_core::api::{
    Inventory, KubeConfigReference, KubeConfigSecretRef, LeftBehind, ModuleRelease,
};

#[test]
fn a_remote_release_names_its_cluster_what_it_left_and_its_secret_as_a_trigger() {
    let mut mr: ModuleRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
        "metadata": {"name": "web", "namespace": "team", "generation": 1},
        "spec": {"module": {"path": "example.com/modules/web@v0", "version": "v0.2.1"}},
    }))
    .unwrap();
    mr.spec.common.kube_config = Some(KubeConfigReference {
        secret_ref: KubeConfigSecretRef {
            name: "prod".into(),
            key: None,
        },
    });
    let obj = ReleaseObject::ModuleRelease(mr.clone());
    let now = Timestamp::UNIX_EPOCH;
    let w = explain(&obj, now);
    assert_eq!(
        w.cluster.as_deref(),
        Some("the cluster of the kubeconfig Secret team/prod (nothing applied there yet)")
    );
    assert!(
        w.triggers
            .iter()
            .any(|t| t == "the kubeconfig Secret team/prod being created or changed")
    );
    mr.status = Some(opm_core::api::ReleaseStatus {
        inventory: Some(Inventory {
            cluster: "https://new:6443".into(),
            ..Default::default()
        }),
        left_behind: Some(LeftBehind {
            cluster: "https://old:6443".into(),
            count: 4,
            ..Default::default()
        }),
        ..Default::default()
    });
    let w = explain(&ReleaseObject::ModuleRelease(mr), now);
    let t = text(&w);
    assert!(
        t.contains("Applies to cluster https://new:6443 (through the kubeconfig Secret team/prod)"),
        "{t}"
    );
    assert!(
        t.contains("Left behind: 4 objects in https://old:6443"),
        "{t}"
    );
}
