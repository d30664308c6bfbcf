//! Ordered teardown on the real API server: deleting the namespace of a two-release chain
//! (the real kube-controller-manager's namespace controller deleting both releases at once)
//! removes the dependent's objects before its dependency's; a deletion blocked by a
//! dependent says so (`DependentsExist`) and keeps its objects; the dependent's going lets
//! it go at once; `opm.dev/force-delete-orphan` lets it go with its objects orphaned.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher;
use opm_core::AllowOperatorIdentity;
use opm_core::api::{ModuleRelease, Release};
use opm_testenv::workloads::Workloads;
use serde_json::{Value, json};

use crate::harness::*;

fn cm_in(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns}, "data": {"owner": name}})
}

/// A Release `name` (prune on) whose two ConfigMaps live in namespace `objs`.
async fn chain_release(
    ns: &opm_testenv::TestNamespace,
    pkg: &Package,
    objs: &str,
    name: &str,
    extra: Value,
) {
    let components = json!({name: {
        "a": cm_in(objs, &format!("{name}-a")),
        "b": cm_in(objs, &format!("{name}-b")),
    }});
    let src = format!("{name}-src");
    pkg.publish(
        &ns.client,
        &ns.name,
        &src,
        &release_package(name, &components),
    )
    .await;
    let mut spec = json!({"prune": true});
    if let (Some(s), Value::Object(e)) = (spec.as_object_mut(), extra) {
        s.extend(e);
    }
    create_rel(&ns.client, &release(&ns.name, name, &src, ".", spec)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_namespace_of_a_chain_removes_the_dependents_objects_first() {
    let started = Instant::now();
    let (env, ns) = namespace().await;
    // The namespace controller of the real kube-controller-manager deletes the releases.
    Workloads::global().await;
    let objs = env.namespace().await.expect("objects namespace");
    // The objects live in another namespace than the releases, so that only the releases'
    // deletions (not the namespace controller) remove them: the operator applies as itself.
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = AllowOperatorIdentity::Cluster;
    })
    .await;
    let pkg = Package::start().await;
    chain_release(&ns, &pkg, &objs.name, "db", json!({})).await;
    chain_release(
        &ns,
        &pkg,
        &objs.name,
        "app",
        json!({"dependsOn": [{"name": "db"}]}),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "db", "Ready", is_ready_rel).await;
    wait_rel(&ns.client, &ns.name, "app", "Ready", is_ready_rel).await;
    let ready_at = started.elapsed();

    // Every ConfigMap deletion in the objects' namespace, in the order the API server
    // reports them.
    let cms = Api::<ConfigMap>::namespaced(objs.client.clone(), &objs.name);
    let mut stream = watcher(cms.clone(), watcher::Config::default())
        .try_filter_map(|e| async move {
            Ok(match e {
                watcher::Event::Delete(cm) => cm.metadata.name,
                _ => None,
            })
        })
        .boxed();
    // The watch is established (its initial list done) before anything is deleted.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let deleted_at = Instant::now();
    Api::<Namespace>::all(ns.client.clone())
        .delete(&ns.name, &DeleteParams::default())
        .await
        .expect("delete the releases' namespace");
    let mut order: Vec<(String, Duration)> = Vec::new();
    let deadline = Instant::now() + WAIT;
    while order.len() < 4 {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(Ok(name))) => order.push((name, deleted_at.elapsed())),
            Ok(Some(Err(e))) => panic!("watch failed: {e}"),
            Ok(None) | Err(_) => panic!("only {order:?} deleted within {WAIT:?}"),
        }
    }
    let names: Vec<&str> = order.iter().map(|(n, _)| n.as_str()).collect();
    let last_app = names.iter().rposition(|n| n.starts_with("app-")).unwrap();
    let first_db = names.iter().position(|n| n.starts_with("db-")).unwrap();
    assert!(
        last_app < first_db,
        "the dependent's objects go first: {order:?}"
    );
    eprintln!(
        "teardown e2e: both Ready after {ready_at:?}; deletions after the namespace delete: {order:?}"
    );
    // Both releases are gone (their finalizers removed), and so is the namespace.
    let rels = Api::<Release>::namespaced(ns.client.clone(), &ns.name);
    eventually("both releases gone", || {
        let rels = rels.clone();
        async move {
            rels.list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        }
    })
    .await;
    // The dependency did wait (its attempt ended `DependentsExist`), and every attempt,
    // the listing of dependents included, replays with the core.
    assert!(
        op.traces().contains("\"DependentsExist\""),
        "db never waited for app"
    );
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

fn orphan_annotation(value: &str) -> Value {
    json!({"metadata": {"annotations": {opm_core::constants::ORPHAN_ANNOTATION: value}}})
}

fn ready_of(o: &ModuleRelease) -> (String, String, String) {
    o.status.as_ref().map(ready_triple).unwrap_or_default()
}

fn ready_triple(s: &opm_core::api::ReleaseStatus) -> (String, String, String) {
    condition(s, "Ready")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_deletion_keeps_its_objects_goes_with_its_dependent_and_the_annotation_overrides()
{
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let prune = json!({"prune": true});
    create_mr(
        &ns.client,
        &module_release(&ns.name, "db", json!({}), prune.clone()),
    )
    .await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "app",
            json!({}),
            json!({"prune": true, "dependsOn": [{"name": "db"}]}),
        ),
    )
    .await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "cache", json!({}), prune),
    )
    .await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "worker",
            json!({}),
            json!({"prune": true, "dependsOn": [{"name": "cache"}]}),
        ),
    )
    .await;
    for name in ["db", "app", "cache", "worker"] {
        wait_mr(&ns.client, &ns.name, name, "Ready", is_ready_mr).await;
    }
    let mrs = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name);
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);

    // The dependency alone is deleted: it waits, naming its dependent, objects kept.
    mrs.delete("db", &DeleteParams::default()).await.unwrap();
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "db",
        "DependentsExist",
        reason_is_mr("DependentsExist"),
    )
    .await;
    let (status, _, message) = ready_of(&got);
    assert_eq!(status, "False");
    assert!(
        message.starts_with(&format!(
            "waiting for dependents to be deleted: ModuleRelease {}/app;",
            ns.name
        )),
        "{message}"
    );
    assert!(got.metadata.deletion_timestamp.is_some());
    let cm = cms.get_opt("db-config").await.unwrap();
    assert!(
        cm.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "the blocked release's objects are kept"
    );
    let evs = events_with(&ns.client, &ns.name, "db", &["DependentsExist"]).await;
    assert!(
        reasons(&evs).contains(&"DependentsExist".to_string()),
        "{:?}",
        reasons(&evs)
    );

    // The dependent goes: the dependency follows at once, not at its 30 s re-check.
    let t = Instant::now();
    mrs.delete("app", &DeleteParams::default()).await.unwrap();
    let mrs2 = mrs.clone();
    eventually("db gone after app", || {
        let mrs = mrs2.clone();
        async move { mrs.get_opt("db").await.unwrap().is_none() }
    })
    .await;
    let followed = t.elapsed();
    assert!(
        followed < Duration::from_secs(20),
        "db went {followed:?} after app was deleted"
    );
    eprintln!("teardown e2e: the dependency went {followed:?} after its dependent was deleted");
    for name in ["app-config", "db-config"] {
        let cm = cms.get_opt(name).await.unwrap();
        assert!(
            cm.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
            "{name} pruned"
        );
    }

    // A dependency whose dependent stays: only the annotation lets it go, objects orphaned.
    mrs.delete("cache", &DeleteParams::default()).await.unwrap();
    wait_mr(
        &ns.client,
        &ns.name,
        "cache",
        "DependentsExist",
        reason_is_mr("DependentsExist"),
    )
    .await;
    // Only the exact string "true" counts.
    patch_mr(&ns.client, &ns.name, "cache", orphan_annotation("yes")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(mrs.get_opt("cache").await.unwrap().is_some());
    patch_mr(&ns.client, &ns.name, "cache", orphan_annotation("true")).await;
    let mrs2 = mrs.clone();
    eventually("cache gone with the annotation", || {
        let mrs = mrs2.clone();
        async move { mrs.get_opt("cache").await.unwrap().is_none() }
    })
    .await;
    let cm = cms.get_opt("cache-config").await.unwrap();
    assert!(
        cm.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "orphaned, not deleted"
    );
    let evs = events_with(&ns.client, &ns.name, "cache", &["OrphanedOnDeletion"]).await;
    let orphaned = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("OrphanedOnDeletion"))
        .expect("OrphanedOnDeletion event");
    assert_eq!(orphaned.type_.as_deref(), Some("Warning"));
    let note = orphaned.note.clone().unwrap_or_default();
    assert!(
        note.contains(&format!(
            "dependents still exist (ModuleRelease {}/worker)",
            ns.name
        )),
        "{note}"
    );
    // The dependent is untouched.
    let worker = mrs.get("worker").await.unwrap();
    assert!(worker.metadata.deletion_timestamp.is_none());
    assert!(
        cms.get_opt("worker-config").await.unwrap().is_some(),
        "the dependent keeps its objects"
    );
    op.stop().await;
}

/// Red team: a tenant in another namespace names this release in its `dependsOn`. Without
/// `--allow-cross-namespace-refs` the operator does not honour that dependency, so it never
/// holds this release's deletion back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_in_another_namespace_cannot_hold_a_deletion_back() {
    let (env, ns) = namespace().await;
    let other = env.namespace().await.expect("the other tenant's namespace");
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "db", json!({}), json!({"prune": true})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "db", "Ready", is_ready_mr).await;
    // The other tenant's release, reconciled by the same operator.
    let mut squatter = module_release(
        &other.name,
        "squatter",
        json!({}),
        json!({"dependsOn": [{"name": "db", "namespace": ns.name}]}),
    );
    squatter
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(TEST_LABEL.into(), ns.name.clone());
    create_mr(&ns.client, &squatter).await;
    wait_mr(
        &ns.client,
        &other.name,
        "squatter",
        "CrossNamespaceRefDenied",
        reason_is_mr("CrossNamespaceRefDenied"),
    )
    .await;
    let mrs = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name);
    mrs.delete("db", &DeleteParams::default()).await.unwrap();
    let mrs2 = mrs.clone();
    eventually("db gone despite the other tenant", || {
        let mrs = mrs2.clone();
        async move { mrs.get_opt("db").await.unwrap().is_none() }
    })
    .await;
    assert!(
        !op.traces().contains("\"DependentsExist\""),
        "the deletion waited for the other tenant"
    );
    op.stop().await;
}
