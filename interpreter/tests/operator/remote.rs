//! Remote clusters (SPEC §31) with two real API servers: the test binary's (the management
//! cluster, where releases, their status, events and sources live) and a second one of its
//! own process (the remote cluster, reached through a kubeconfig Secret with inline client
//! credentials). What a release applies goes there and nowhere else.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use opm_core::api::{ModuleRelease, Release};
use opm_testenv::RestartableApiServer;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::harness::*;

/// The remote cluster the tests share (the kill test starts its own).
static REMOTE: OnceCell<RestartableApiServer> = OnceCell::const_new();

async fn shared_remote() -> &'static RestartableApiServer {
    REMOTE
        .get_or_init(|| async {
            RestartableApiServer::start()
                .await
                .expect("a second API server")
        })
        .await
}

/// `ns` in the remote cluster too (releases write there in their own namespace's name).
async fn remote_namespace(remote: &RestartableApiServer, ns: &str) -> Client {
    let client = remote.client().await.expect("remote client");
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await;
    client
}

/// The kubeconfig Secret `name` in the management namespace, holding `kubeconfig`.
async fn put_kubeconfig(client: &Client, ns: &str, name: &str, kubeconfig: &str) {
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": {"value": kubeconfig},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::apply("opm-test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .expect("kubeconfig Secret");
}

/// The Ready condition's message.
fn ready_message(s: &opm_core::api::ReleaseStatus) -> String {
    condition(s, "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn kube_config(secret: &str) -> Value {
    json!({"kubeConfig": {"secretRef": {"name": secret}}})
}

fn with(mut a: Value, b: Value) -> Value {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), b) {
        a.extend(b);
    }
    a
}

async fn exists<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.expect("GET").is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_release_applies_to_the_remote_cluster_only_drift_is_corrected_there_and_deletion_prunes_there()
 {
    let (env, ns) = namespace().await;
    let remote = shared_remote().await;
    let rc = remote_namespace(remote, &ns.name).await;
    put_kubeconfig(
        &ns.client,
        &ns.name,
        "remote",
        &remote.inline_kubeconfig().unwrap(),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let spec = with(
        kube_config("remote"),
        json!({"prune": true, "driftDetection": {"mode": "Correct"}}),
    );
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({"message": "hi"}), spec),
    )
    .await;
    let got = wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    let s = got.status.unwrap();
    let inv = s.inventory.expect("inventory");
    assert_eq!(inv.count, 4);
    assert_eq!(inv.cluster, remote.server_url(), "status names the cluster");

    // Everything is in the remote cluster; the management namespace has none of it.
    let remote_cm = Api::<ConfigMap>::namespaced(rc.clone(), &ns.name);
    let remote_dep = Api::<Deployment>::namespaced(rc.clone(), &ns.name);
    assert!(exists(&remote_dep, "web").await);
    assert_eq!(
        remote_cm.get("web-config").await.unwrap().data.unwrap()["message"],
        "hi"
    );
    let here_cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let here_dep = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    assert!(!exists(&here_dep, "web").await);
    assert!(!exists(&here_cm, "web-config").await);
    // Nothing the operator stamped is in the management namespace, of any kind it applied.
    let stamped = ListParams::default().labels("app.kubernetes.io/managed-by=opm-controller");
    let here = [
        here_cm.list_metadata(&stamped).await.unwrap().items.len(),
        here_dep.list_metadata(&stamped).await.unwrap().items.len(),
        Api::<Service>::namespaced(ns.client.clone(), &ns.name)
            .list_metadata(&stamped)
            .await
            .unwrap()
            .items
            .len(),
        Api::<ServiceAccount>::namespaced(ns.client.clone(), &ns.name)
            .list_metadata(&stamped)
            .await
            .unwrap()
            .items
            .len(),
    ];
    assert_eq!(here, [0, 0, 0, 0], "only status and events here");

    // The metrics name the cluster; one client and its watches serve it.
    let text = op.rt.metrics.render();
    assert!(
        text.contains(&format!("cluster=\"{}\"", remote.server_url())),
        "{text}"
    );
    assert_eq!(op.rt.clusters.open(), 1);
    assert!(
        op.rt.clusters.watches() >= 1,
        "managed-object watches there"
    );

    // Drift in the remote cluster is corrected there.
    remote_cm
        .patch(
            "web-config",
            &PatchParams::apply("kubectl-edit").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web-config"}, "data": {"message": "tampered"}})),
        )
        .await
        .unwrap();
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {"reconcile.opmodel.dev/requestedAt": "drift-1"}}}),
    )
    .await;
    eventually("the remote drift corrected", || {
        let remote_cm = remote_cm.clone();
        async move { remote_cm.get("web-config").await.unwrap().data.unwrap()["message"] == "hi" }
    })
    .await;

    // Deletion prunes in the remote cluster, then the release goes.
    Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the release deleted", || {
        let c = ns.client.clone();
        let n = ns.name.clone();
        async move {
            Api::<ModuleRelease>::namespaced(c, &n)
                .get_opt("web")
                .await
                .unwrap()
                .is_none()
        }
    })
    .await;
    assert!(!exists(&remote_dep, "web").await, "pruned remotely");
    assert!(!exists(&remote_cm, "web-config").await);
    eventually("the remote client closed once unused", || {
        let rt = op.rt.clone();
        async move { rt.clusters.open() == 0 }
    })
    .await;
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_prunes_in_the_remote_cluster_and_waits_for_termination_there() {
    let (env, ns) = namespace().await;
    let remote = shared_remote().await;
    let rc = remote_namespace(remote, &ns.name).await;
    put_kubeconfig(
        &ns.client,
        &ns.name,
        "remote",
        &remote.inline_kubeconfig().unwrap(),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let both = json!({"c": {"a": configmap("keep", json!({"k": "1"})), "b": configmap("stale", json!({"k": "2"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &both))
        .await;
    let spec = with(
        kube_config("remote"),
        json!({"prune": true, "deletionPolicy": "WaitForTermination"}),
    );
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", spec)).await;
    wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    let remote_cm = Api::<ConfigMap>::namespaced(rc.clone(), &ns.name);
    assert!(exists(&remote_cm, "keep").await && exists(&remote_cm, "stale").await);
    let here_cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(!exists(&here_cm, "keep").await);

    // A new revision without `stale`: pruned in the remote cluster.
    let one = json!({"c": {"a": configmap("keep", json!({"k": "1"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &one))
        .await;
    eventually("stale pruned remotely", || {
        let remote_cm = remote_cm.clone();
        async move { remote_cm.get_opt("stale").await.unwrap().is_none() }
    })
    .await;
    assert!(exists(&remote_cm, "keep").await);

    // WaitForTermination: a finalizer on the remote object holds the release until it goes.
    remote_cm
        .patch(
            "keep",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        )
        .await
        .unwrap();
    Api::<Release>::namespaced(ns.client.clone(), &ns.name)
        .delete("r", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        Api::<Release>::namespaced(ns.client.clone(), &ns.name)
            .get_opt("r")
            .await
            .unwrap()
            .is_some(),
        "held while the remote object terminates"
    );
    remote_cm
        .patch(
            "keep",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("the release let go once the remote object is gone", || {
        let c = ns.client.clone();
        let n = ns.name.clone();
        async move {
            Api::<Release>::namespaced(c, &n)
                .get_opt("r")
                .await
                .unwrap()
                .is_none()
        }
    })
    .await;
    assert!(!exists(&remote_cm, "keep").await);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_remote_server_is_cluster_unreachable_then_ready_again_with_nothing_lost() {
    let (env, ns) = namespace().await;
    let remote = RestartableApiServer::start().await.expect("remote");
    let rc = remote_namespace(&remote, &ns.name).await;
    put_kubeconfig(
        &ns.client,
        &ns.name,
        "remote",
        &remote.inline_kubeconfig().unwrap(),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), kube_config("remote")),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    remote.kill();
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {"reconcile.opmodel.dev/requestedAt": "down"}}}),
    )
    .await;
    let down = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "ClusterUnreachable",
        reason_is_mr("ClusterUnreachable"),
    )
    .await;
    let msg = ready_message(down.status.as_ref().unwrap());
    assert!(msg.contains(&remote.server_url()), "{msg}");
    assert!(
        down.status.unwrap().next_retry_at.is_some(),
        "transient: retried with backoff"
    );
    remote.restart().await.expect("restart");
    wait_mr(&ns.client, &ns.name, "web", "Ready again", is_ready_mr).await;
    let dep = Api::<Deployment>::namespaced(rc, &ns.name);
    assert!(exists(&dep, "web").await, "nothing lost");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_kubeconfig_is_refused_and_a_missing_secret_waits_for_its_creation() {
    let (env, ns) = namespace().await;
    let remote = shared_remote().await;
    let rc = remote_namespace(remote, &ns.name).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    // Missing Secret: a stall naming it.
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), kube_config("remote")),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "InvalidKubeConfig",
        reason_is_mr("InvalidKubeConfig"),
    )
    .await;
    let msg = ready_message(got.status.as_ref().unwrap());
    assert!(
        msg.contains(&format!("Secret {}/remote not found", ns.name)),
        "{msg}"
    );

    // An exec kubeconfig: refused naming the field, the command never run.
    let marker = tempfile::tempdir().unwrap();
    let ran = marker.path().join("ran");
    let exec = remote.inline_kubeconfig().unwrap().replace(
        "    client-certificate-data:",
        &format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [\"-c\", \"touch {}\"]\n    client-certificate-data:",
            ran.display()
        ),
    );
    put_kubeconfig(&ns.client, &ns.name, "remote", &exec).await;
    eventually("refused naming exec", || {
        let c = ns.client.clone();
        let n = ns.name.clone();
        async move {
            let mr = Api::<ModuleRelease>::namespaced(c, &n)
                .get("web")
                .await
                .unwrap();
            let msg = ready_message(mr.status.as_ref().unwrap());
            msg.contains("users[remote-admin].user.exec")
                && msg.contains("--allow-insecure-kubeconfig")
        }
    })
    .await;
    assert!(!ran.exists(), "the command was not run");
    let remote_dep = Api::<Deployment>::namespaced(rc.clone(), &ns.name);
    assert!(!exists(&remote_dep, "web").await, "nothing applied");

    // The Secret fixed: its change re-triggers the release, long before the stall recheck.
    put_kubeconfig(
        &ns.client,
        &ns.name,
        "remote",
        &remote.inline_kubeconfig().unwrap(),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    assert!(exists(&remote_dep, "web").await);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_pointed_at_another_server_moves_the_release_and_reports_what_it_left() {
    let (env, ns) = namespace().await;
    let remote = shared_remote().await;
    let rc = remote_namespace(remote, &ns.name).await;
    put_kubeconfig(
        &ns.client,
        &ns.name,
        "target",
        &remote.inline_kubeconfig().unwrap(),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), kube_config("target")),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    let remote_dep = Api::<Deployment>::namespaced(rc.clone(), &ns.name);
    assert!(exists(&remote_dep, "web").await);

    // The Secret now points at the management cluster's own server.
    let here = std::fs::read_to_string(env.kubeconfig_path()).unwrap();
    put_kubeconfig(&ns.client, &ns.name, "target", &here).await;
    wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "applied in the new cluster, the old one reported",
        |mr| {
            mr.status
                .as_ref()
                .and_then(|s| s.left_behind.as_ref())
                .is_some_and(|l| l.count == 4)
        },
    )
    .await;
    let mr = wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    let s = mr.status.unwrap();
    let left = s.left_behind.unwrap();
    assert_eq!(left.cluster, remote.server_url());
    assert_eq!(left.entries.len(), 4);
    assert_eq!(
        s.inventory.unwrap().cluster,
        env.server_url().trim_end_matches('/')
    );
    let here_dep = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    assert!(exists(&here_dep, "web").await, "applied in the new cluster");
    assert!(
        exists(&remote_dep, "web").await,
        "left in the old one, not pruned"
    );
    let evs = events_with(&ns.client, &ns.name, "web", &["ClusterChanged"]).await;
    assert!(reasons(&evs).contains(&"ClusterChanged".to_string()));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_account_is_impersonated_in_the_remote_cluster_under_its_rbac() {
    let (env, ns) = namespace().await;
    let remote = shared_remote().await;
    let rc = remote_namespace(remote, &ns.name).await;
    put_kubeconfig(
        &ns.client,
        &ns.name,
        "remote",
        &remote.inline_kubeconfig().unwrap(),
    )
    .await;
    // The ServiceAccount exists in the remote cluster only, allowed nothing yet.
    opm_testenv::rbac::create_service_account(&rc, &ns.name, "deployer")
        .await
        .unwrap();
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = opm_core::AllowOperatorIdentity::Off;
    })
    .await;
    let spec = with(
        kube_config("remote"),
        json!({"serviceAccountName": "deployer"}),
    );
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), spec),
    )
    .await;
    let refused = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "refused by the remote RBAC",
        |m| {
            m.status.as_ref().is_some_and(|s| {
                ready(s).0 == "False"
                    && ready_message(s)
                        .contains(&format!("system:serviceaccount:{}:deployer", ns.name))
            })
        },
    )
    .await;
    let msg = ready_message(refused.status.as_ref().unwrap());
    assert!(msg.contains("forbidden"), "{msg}");
    let remote_dep = Api::<Deployment>::namespaced(rc.clone(), &ns.name);
    assert!(!exists(&remote_dep, "web").await);

    // A Role in the remote cluster lets it write there.
    let rules = vec![
        opm_testenv::rbac::rule(
            "",
            &["configmaps", "services", "serviceaccounts"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        opm_testenv::rbac::rule(
            "apps",
            &["deployments"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
    ];
    opm_testenv::rbac::create_role(&rc, &ns.name, "deployer", rules)
        .await
        .unwrap();
    opm_testenv::rbac::bind_role(
        &rc,
        &ns.name,
        "deployer",
        "deployer",
        opm_testenv::rbac::service_account_subject("deployer", &ns.name),
    )
    .await
    .unwrap();
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {"reconcile.opmodel.dev/requestedAt": "granted"}}}),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    let dep = remote_dep.get("web").await.unwrap();
    let managers: Vec<String> = dep
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"opm-controller".to_string()),
        "{managers:?}"
    );
    op.stop().await;
}

/// Red team: a kubeconfig over `--max-kubeconfig-bytes` is refused unparsed, naming the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeconfig_over_the_size_cap_is_refused_naming_the_cap() {
    let (env, ns) = namespace().await;
    let remote = shared_remote().await;
    let rc = remote_namespace(remote, &ns.name).await;
    let kubeconfig = remote.inline_kubeconfig().unwrap();
    put_kubeconfig(&ns.client, &ns.name, "remote", &kubeconfig).await;
    let op = Operator::start(env, &ns.name, |a| a.max_kubeconfig_bytes = 512).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), kube_config("remote")),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "InvalidKubeConfig",
        reason_is_mr("InvalidKubeConfig"),
    )
    .await;
    let msg = ready_message(got.status.as_ref().unwrap());
    assert!(
        msg.contains(&format!(
            "is {} bytes; the cap is 512 (--max-kubeconfig-bytes)",
            kubeconfig.len()
        )),
        "{msg}"
    );
    assert!(!msg.contains("BEGIN"), "no credential quoted");
    let remote_dep = Api::<Deployment>::namespaced(rc, &ns.name);
    assert!(!exists(&remote_dep, "web").await);
    op.stop().await;
}
