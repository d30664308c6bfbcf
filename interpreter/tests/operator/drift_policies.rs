//! Drift that tolerates other writers and corrects what it must (SPEC §20, §28), per-object
//! policies, and deletion policies (SPEC §12), on the real API server. The "other writers"
//! are field managers this test writes as: a `kubectl edit`-style merge patch, another
//! server-side apply manager, an HPA-like manager owning `spec.replicas`.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use opm_core::constants::REQUESTED_AT_ANNOTATION;
use serde_json::json;

use crate::harness::*;

/// Requests a reconcile and waits until it was handled; returns the release then.
async fn reconcile_mr(
    client: &kube::Client,
    ns: &str,
    name: &str,
    value: &str,
) -> opm_core::api::ModuleRelease {
    patch_mr(
        client,
        ns,
        name,
        json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: value}}}),
    )
    .await;
    wait_mr(client, ns, name, "handled", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.last_handled_reconcile_at == value)
    })
    .await
}

/// The bug of issue 15: a merge patch (what `kubectl edit` sends) moves the field's
/// ownership to the editor, and `Correct` without `rollout.forceConflicts` stalled on the
/// conflict. Correct forces its re-apply, so both a merge-patch edit and another SSA
/// manager's edit are taken back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_takes_back_a_kubectl_edit_and_another_managers_apply_without_force_conflicts() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "corr",
            json!({"message": "desired"}),
            json!({"driftDetection": {"mode": "Correct"}}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "corr", "Ready", is_ready_mr).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);

    // kubectl edit: an Update (merge patch) by its own field manager.
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cms.patch(
        "corr-config",
        &edit,
        &Patch::Merge(json!({"data": {"message": "edited by hand"}})),
    )
    .await
    .unwrap();
    let got = reconcile_mr(&ns.client, &ns.name, "corr", "edit-1").await;
    let s = got.status.as_ref().unwrap();
    assert_eq!(
        ready(s),
        ("True".to_string(), "ReconciliationSucceeded".to_string()),
        "Correct re-applied: {s:?}"
    );
    assert!(condition(s, "Drifted").is_none(), "{s:?}");
    assert_eq!(
        cms.get("corr-config").await.unwrap().data.unwrap()["message"],
        "desired",
        "the merge-patch edit was taken back"
    );
    let evs = events(&ns.client, &ns.name, "corr").await;
    let drift = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("DriftDetected"))
        .expect("a DriftDetected event");
    let note = drift.note.clone().unwrap_or_default();
    // SPEC §20: the message names the object, the drifted field and who changed it.
    assert!(
        note.contains("ConfigMap") && note.contains("corr-config"),
        "{note}"
    );
    assert!(
        note.contains("/data/message") && note.contains("kubectl-edit"),
        "{note}"
    );

    // Another server-side apply manager forcing its own value.
    let other = PatchParams::apply("other-ssa").force();
    cms.patch(
        "corr-config",
        &other,
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "corr-config"},
            "data": {"message": "applied by another manager"}
        })),
    )
    .await
    .unwrap();
    let got = reconcile_mr(&ns.client, &ns.name, "corr", "edit-2").await;
    let s = got.status.as_ref().unwrap();
    assert_eq!(ready(s).0, "True", "{s:?}");
    assert_eq!(
        cms.get("corr-config").await.unwrap().data.unwrap()["message"],
        "desired",
        "the other manager's apply was taken back"
    );
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

/// Correct takes an edit back in an attempt that also applies a change of the release: with
/// changed digests no drift check runs first, so the apply itself must force, or it stalls
/// `ApplyFailed` on the field the editor now owns. The release is suspended while the edit
/// is made, so the next attempt is exactly that one (a drift check cannot take the edit
/// back first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_takes_back_an_edit_in_an_attempt_that_also_applies_a_change() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "corrchg",
            json!({"message": "desired"}),
            json!({"driftDetection": {"mode": "Correct"}}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "corrchg", "Ready", is_ready_mr).await;
    patch_mr(
        &ns.client,
        &ns.name,
        "corrchg",
        json!({"spec": {"suspend": true}}),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "corrchg", "suspended", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == o.metadata.generation.unwrap_or(0))
    })
    .await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cms.patch(
        "corrchg-config",
        &edit,
        &Patch::Merge(json!({"data": {"message": "edited by hand"}})),
    )
    .await
    .unwrap();
    patch_mr(
        &ns.client,
        &ns.name,
        "corrchg",
        json!({"spec": {"suspend": false, "values": {"message": "changed"}}}),
    )
    .await;
    let got = wait_mr(
        &ns.client,
        &ns.name,
        "corrchg",
        "Ready at the change",
        |o| {
            is_ready_mr(o)
                || o.status.as_ref().is_some_and(|s| {
                    s.observed_generation == o.metadata.generation.unwrap_or(0)
                        && ready(s).1 == "ApplyFailed"
                })
        },
    )
    .await;
    let s = got.status.as_ref().unwrap();
    assert_eq!(
        ready(s),
        ("True".to_string(), "ReconciliationSucceeded".to_string()),
        "the changed release applied over the edit: {s:?}"
    );
    assert_eq!(
        cms.get("corrchg-config").await.unwrap().data.unwrap()["message"],
        "changed",
        "the edited field holds the release's new value"
    );
    op.stop().await;
}

/// Warn mode names the drifted fields and the manager that changed them in the `Drifted`
/// condition, and leaves the edit alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_names_the_drifted_field_and_the_manager_that_changed_it() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "wfield",
            json!({"message": "desired"}),
            json!({"driftDetection": {"mode": "Warn"}}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "wfield", "Ready", is_ready_mr).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    cms.patch(
        "wfield-config",
        &PatchParams::apply("tweaker").force(),
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "wfield-config", "labels": {"extra": "x"}},
            "data": {"message": "tweaked"}
        })),
    )
    .await
    .unwrap();
    let got = reconcile_mr(&ns.client, &ns.name, "wfield", "w-1").await;
    let s = got.status.as_ref().unwrap();
    let d = condition(s, "Drifted").expect("Drifted condition");
    assert_eq!(d.status, "True");
    assert_eq!(d.reason, "DriftDetected");
    assert!(
        d.message
            .starts_with("1 resource(s) drifted from desired state: ConfigMap/"),
        "{}",
        d.message
    );
    assert!(
        d.message.contains("/data/message changed by tweaker"),
        "{}",
        d.message
    );
    assert_eq!(ready(s).0, "True", "Warn leaves Ready alone");
    assert_eq!(
        cms.get("wfield-config").await.unwrap().data.unwrap()["message"],
        "tweaked"
    );
    op.stop().await;
}

async fn rels_history(client: &kube::Client, ns: &str, name: &str) -> usize {
    Api::<opm_core::api::Release>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .status
        .map_or(0, |s| s.history.len())
}

fn deployment(name: &str, replicas: i64, image: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]}
            }
        }
    })
}

/// An HPA-like manager owns `spec.replicas` (it scales through the scale subresource, as
/// the HPA does) and a webhook-like one injects an annotation. With ignore rules neither
/// is drift, nothing is written back through many reconciles, and an apply caused by a
/// render change leaves both alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_fields_of_other_managers_are_never_drift_nor_fought_over() {
    use k8s_openapi::api::apps::v1::Deployment;
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let objects = |msg: &str| {
        json!({"app": {
            "d": deployment("scaled", 2, "registry.example/app:1"),
            "c": configmap("scaled-cfg", json!({"m": msg})),
        }})
    };
    pkg.publish(
        &ns.client,
        &ns.name,
        "hpa",
        &release_package("hpa", &objects("one")),
    )
    .await;
    let spec = json!({"driftDetection": {"mode": "Correct", "ignore": [
        {"paths": ["/spec/replicas"], "target": {"group": "apps", "kind": "Deployment"}},
        {"paths": ["/metadata/annotations/injected.example~1sidecar"]}
    ]}});
    create_rel(&ns.client, &release(&ns.name, "hpa", "hpa", ".", spec)).await;
    wait_rel(&ns.client, &ns.name, "hpa", "Ready", is_ready_rel).await;
    let deps = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    deps.patch_scale(
        "scaled",
        &PatchParams {
            field_manager: Some("hpa-like".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    deps.patch(
        "scaled",
        &PatchParams {
            field_manager: Some("webhook-like".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"metadata": {"annotations": {"injected.example/sidecar": "yes"}}})),
    )
    .await
    .unwrap();
    // What our writes would change: the generation (spec) and our managedFields entry
    // (its time moves on every write that changes anything). The controller-manager may
    // write status meanwhile, so the resourceVersion is not the measure.
    let ours = |d: &Deployment| {
        let entry = d
            .metadata
            .managed_fields
            .clone()
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.manager.as_deref() == Some("opm-controller"))
            .map(|m| (m.time, m.fields_v1));
        (d.metadata.generation, entry)
    };
    let before = ours(&deps.get("scaled").await.unwrap());
    let history_before = rels_history(&ns.client, &ns.name, "hpa").await;
    let rels = Api::<opm_core::api::Release>::namespaced(ns.client.clone(), &ns.name);
    // Ten reconciles of the unchanged release: no drift, no write.
    for i in 0..10 {
        let value = format!("hpa-{i}");
        rels.patch(
            "hpa",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: value}}})),
        )
        .await
        .unwrap();
        let got = wait_rel(&ns.client, &ns.name, "hpa", "handled", |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.last_handled_reconcile_at == value)
        })
        .await;
        let s = got.status.as_ref().unwrap();
        assert!(condition(s, "Drifted").is_none(), "round {i}: {s:?}");
        assert_eq!(ready(s).1, "ReconciliationSucceeded", "round {i}");
    }
    let after = ours(&deps.get("scaled").await.unwrap());
    assert_eq!(
        after, before,
        "the Deployment was written during the reconciles"
    );
    assert_eq!(
        rels_history(&ns.client, &ns.name, "hpa").await,
        history_before,
        "every reconcile was a NoOp (no apply, no history entry)"
    );
    let no_op = events(&ns.client, &ns.name, "hpa")
        .await
        .iter()
        .filter(|e| e.reason.as_deref() == Some("DriftDetected"))
        .count();
    assert_eq!(no_op, 0, "no DriftDetected event");

    // A render change applies the objects again: the ignored fields stay as their owners
    // set them, and we do not take them.
    pkg.publish(
        &ns.client,
        &ns.name,
        "hpa",
        &release_package("hpa", &objects("two")),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "hpa", "applied two", |o| {
        is_ready_rel(o)
            && o.status
                .as_ref()
                .is_some_and(|s| s.history.first().is_some_and(|h| h.sequence >= 2))
    })
    .await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert_eq!(
        cms.get("scaled-cfg").await.unwrap().data.unwrap()["m"],
        "two"
    );
    let d = deps.get("scaled").await.unwrap();
    assert_eq!(d.spec.replicas, Some(5), "replicas kept");
    assert_eq!(
        d.metadata
            .annotations
            .unwrap_or_default()
            .get("injected.example/sidecar")
            .map(String::as_str),
        Some("yes")
    );
    let ours_owns_replicas = d
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .filter(|m| m.manager.as_deref() == Some("opm-controller"))
        .any(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.pointer("/f:spec/f:replicas").is_some())
        });
    assert!(!ours_owns_replicas, "opm-controller took spec.replicas");
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

fn annotated(cm: serde_json::Value, key: &str, value: &str) -> serde_json::Value {
    let mut cm = cm;
    cm["metadata"]["annotations"] = json!({ key: value });
    cm
}

/// `ssa: IfNotPresent` creates but never updates, `Ignore` never writes, `Merge` leaves
/// fields other managers own; `prune: disabled` survives removal from the render and the
/// release's deletion. The annotations never reach the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssa_and_prune_annotations_act_per_object() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let ssa = "releases.opmodel.dev/ssa";
    let prune = "releases.opmodel.dev/prune";
    let objects = |with_kept: bool| {
        let mut c = json!({
            "ifnp": annotated(configmap("p-ifnp", json!({"k": "ours"})), ssa, "IfNotPresent"),
            "ign": annotated(configmap("p-ign", json!({"k": "ours"})), ssa, "Ignore"),
            "mrg": annotated(configmap("p-mrg", json!({"k": "ours", "j": "ours"})), ssa, "Merge"),
            "keep2": annotated(configmap("p-keep2", json!({"k": "ours"})), prune, "disabled"),
            "plain": configmap("p-plain", json!({"k": "ours"})),
        });
        if with_kept {
            c["kept"] = annotated(configmap("p-kept", json!({"k": "ours"})), prune, "disabled");
        }
        json!({"app": c})
    };
    pkg.publish(
        &ns.client,
        &ns.name,
        "pol",
        &release_package("pol", &objects(true)),
    )
    .await;
    let spec = json!({"prune": true, "driftDetection": {"mode": "Correct"}});
    create_rel(&ns.client, &release(&ns.name, "pol", "pol", ".", spec)).await;
    wait_rel(&ns.client, &ns.name, "pol", "Ready", is_ready_rel).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        cms.get_opt("p-ign").await.unwrap().is_none(),
        "Ignore never writes"
    );
    for name in ["p-ifnp", "p-mrg", "p-keep2", "p-kept", "p-plain"] {
        let cm = cms.get(name).await.unwrap();
        let ann = cm.metadata.annotations.unwrap_or_default();
        assert!(
            !ann.keys().any(|k| k.starts_with("releases.opmodel.dev/")),
            "{name} carries our policy annotation: {ann:?}"
        );
    }
    // Other writers edit the IfNotPresent and the Merge objects.
    let edit = PatchParams {
        field_manager: Some("someone".into()),
        ..Default::default()
    };
    for name in ["p-ifnp", "p-mrg"] {
        cms.patch(name, &edit, &Patch::Merge(json!({"data": {"k": "theirs"}})))
            .await
            .unwrap();
    }
    let rels = Api::<opm_core::api::Release>::namespaced(ns.client.clone(), &ns.name);
    rels.patch(
        "pol",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "again"}}})),
    )
    .await
    .unwrap();
    let got = wait_rel(&ns.client, &ns.name, "pol", "handled", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.last_handled_reconcile_at == "again")
    })
    .await;
    let s = got.status.as_ref().unwrap();
    assert!(condition(s, "Drifted").is_none(), "{s:?}");
    assert_eq!(
        cms.get("p-ifnp").await.unwrap().data.unwrap()["k"],
        "theirs"
    );
    assert_eq!(cms.get("p-mrg").await.unwrap().data.unwrap()["k"], "theirs");

    // `kept` leaves the render: orphaned (labels removed), not deleted.
    pkg.publish(
        &ns.client,
        &ns.name,
        "pol",
        &release_package("pol", &objects(false)),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "pol", "kept removed", |o| {
        is_ready_rel(o)
            && o.status
                .as_ref()
                .and_then(|s| s.inventory.as_ref())
                .is_some_and(|i| !i.entries.iter().any(|e| e.name == "p-kept"))
    })
    .await;
    let kept = cms.get("p-kept").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none());
    let labels = kept.metadata.labels.unwrap_or_default();
    assert!(
        !labels.contains_key(opm_core::constants::labels::RELEASE_UUID),
        "{labels:?}"
    );

    // Deleting the release (prune: true) deletes the plain object, orphans keep2.
    rels.delete("pol", &Default::default()).await.unwrap();
    let rels2 = rels.clone();
    eventually("release gone", || {
        let r = rels2.clone();
        async move { r.get_opt("pol").await.unwrap().is_none() }
    })
    .await;
    assert!(
        cms.get_opt("p-plain")
            .await
            .unwrap()
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "plain object deleted"
    );
    let keep2 = cms.get("p-keep2").await.unwrap();
    assert!(
        keep2.metadata.deletion_timestamp.is_none(),
        "keep2 survives"
    );
    assert!(
        !keep2
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(opm_core::constants::labels::RELEASE_UUID)
    );
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

fn job(name: &str, image: &str, force: bool) -> serde_json::Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "run", "image": image}]
        }}}
    });
    if force {
        j["metadata"]["annotations"] = json!({"releases.opmodel.dev/force": "enabled"});
    }
    j
}

/// A Job's pod template is immutable. With `force: enabled` a changed template recreates
/// the Job (a new UID) with a Normal `Recreated` event; without it the apply stalls
/// `ApplyFailed` and the Job is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_enabled_recreates_on_an_immutable_field_and_only_then() {
    use k8s_openapi::api::batch::v1::Job;
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let objects = |image: &str| {
        json!({"jobs": {
            "f": job("forced", image, true),
            "n": job("plain-job", image, false),
        }})
    };
    pkg.publish(
        &ns.client,
        &ns.name,
        "jobs",
        &release_package("jobs", &objects("img:1")),
    )
    .await;
    create_rel(
        &ns.client,
        &release(&ns.name, "jobs", "jobs", ".", json!({})),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "jobs", "Ready", is_ready_rel).await;
    let jobs = Api::<Job>::namespaced(ns.client.clone(), &ns.name);
    let forced_uid = jobs.get("forced").await.unwrap().metadata.uid;
    let plain_uid = jobs.get("plain-job").await.unwrap().metadata.uid;

    // Only the forced one changes first: it is recreated.
    let mixed = json!({"jobs": {
        "f": job("forced", "img:2", true),
        "n": job("plain-job", "img:1", false),
    }});
    pkg.publish(
        &ns.client,
        &ns.name,
        "jobs",
        &release_package("jobs", &mixed),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "jobs", "recreated", |o| {
        is_ready_rel(o)
            && o.status
                .as_ref()
                .is_some_and(|s| s.history.first().is_some_and(|h| h.sequence >= 2))
    })
    .await;
    let forced = jobs.get("forced").await.unwrap();
    assert_ne!(forced.metadata.uid, forced_uid, "recreated with a new UID");
    let image = forced.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("img:2"));
    let evs = events(&ns.client, &ns.name, "jobs").await;
    let rec = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("Recreated"))
        .expect("a Recreated event");
    assert_eq!(rec.type_.as_deref(), Some("Normal"));
    assert!(
        rec.note.as_deref().unwrap_or("").contains("Job/"),
        "{rec:?}"
    );

    // The unannotated Job's template changes: refused, never recreated.
    pkg.publish(
        &ns.client,
        &ns.name,
        "jobs",
        &release_package("jobs", &objects("img:2")),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "jobs",
        "ApplyFailed",
        reason_is_rel("ApplyFailed"),
    )
    .await;
    let msg = &condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(
        msg.contains("plain-job") && msg.contains("immutable"),
        "{msg}"
    );
    assert_eq!(jobs.get("plain-job").await.unwrap().metadata.uid, plain_uid);
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

/// Issue 31 item 6 (SPEC §28): `force: enabled` recreated on any 422 whose message said
/// "immutable", whatever the kind, so a release could delete its CRD (and every resource
/// of it in the cluster) or its PVC (and the data) by changing an immutable field. Now a
/// CustomResourceDefinition whose `scope` changes and a PersistentVolumeClaim whose
/// `accessModes` change, both annotated `force: enabled`, end in `ApplyFailed` and each
/// is still there with its UID, never deleted, and no `Recreated` event is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_never_deletes_a_crd_or_a_pvc() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = opm_core::AllowOperatorIdentity::Cluster
    })
    .await;
    let pkg = Package::start().await;
    let force = json!({"releases.opmodel.dev/force": "enabled"});
    let group = format!("{}.force.opmodel.dev", ns.name);
    let crd_name = format!("gadgets.{group}");
    let crd = |scope: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name, "annotations": force},
            "spec": {"group": group, "scope": scope,
                "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
    };
    let pvc = |mode: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "annotations": force},
            "spec": {"accessModes": [mode], "storageClassName": "none",
                "resources": {"requests": {"storage": "1Gi"}}}})
    };
    for (name, first) in [
        ("crd", json!({"c": {"crd": crd("Namespaced")}})),
        ("pvc", json!({"c": {"pvc": pvc("ReadWriteOnce")}})),
    ] {
        pkg.publish(&ns.client, &ns.name, name, &release_package(name, &first))
            .await;
        // No controller binds the claim here: do not wait for it to be healthy.
        create_rel(
            &ns.client,
            &release(&ns.name, name, name, ".", json!({"wait": false})),
        )
        .await;
        wait_rel(&ns.client, &ns.name, name, "Ready", is_ready_rel).await;
    }
    let crds = Api::<CustomResourceDefinition>::all(ns.client.clone());
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(ns.client.clone(), &ns.name);
    let crd_uid = crds.get(&crd_name).await.unwrap().metadata.uid;
    let pvc_uid = pvcs.get("data").await.unwrap().metadata.uid;
    for (name, changed) in [
        ("crd", json!({"c": {"crd": crd("Cluster")}})),
        ("pvc", json!({"c": {"pvc": pvc("ReadOnlyMany")}})),
    ] {
        pkg.publish(&ns.client, &ns.name, name, &release_package(name, &changed))
            .await;
        let got = wait_rel(
            &ns.client,
            &ns.name,
            name,
            "ApplyFailed",
            reason_is_rel("ApplyFailed"),
        )
        .await;
        let msg = &condition(got.status.as_ref().unwrap(), "Ready")
            .unwrap()
            .message;
        assert!(msg.contains("immutable"), "{name}: {msg}");
        let evs = events(&ns.client, &ns.name, name).await;
        assert!(
            !evs.iter().any(|e| e.reason.as_deref() == Some("Recreated")),
            "{name}: recreated"
        );
    }
    let crd_now = crds.get(&crd_name).await.unwrap();
    assert_eq!(crd_now.metadata.uid, crd_uid, "the CRD was recreated");
    assert!(
        crd_now.metadata.deletion_timestamp.is_none(),
        "the CRD is being deleted"
    );
    let pvc_now = pvcs.get("data").await.unwrap();
    assert_eq!(pvc_now.metadata.uid, pvc_uid, "the PVC was recreated");
    assert!(
        pvc_now.metadata.deletion_timestamp.is_none(),
        "the PVC is being deleted"
    );
    op.stop().await;
    let _ = crds.delete(&crd_name, &Default::default()).await;
}

/// `deletionPolicy: Delete` deletes the objects even with `prune: false`; `Orphan` keeps
/// them even with `prune: true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_policy_delete_and_orphan_override_prune() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    for (name, spec) in [
        ("del", json!({"prune": false, "deletionPolicy": "Delete"})),
        ("orph", json!({"prune": true, "deletionPolicy": "Orphan"})),
        (
            "mirror",
            json!({"prune": true, "deletionPolicy": "MirrorPrune"}),
        ),
    ] {
        let objs = json!({"c": {"a": configmap(&format!("{name}-cm"), json!({"k": "v"}))}});
        pkg.publish(&ns.client, &ns.name, name, &release_package(name, &objs))
            .await;
        create_rel(&ns.client, &release(&ns.name, name, name, ".", spec)).await;
    }
    for name in ["del", "orph", "mirror"] {
        wait_rel(&ns.client, &ns.name, name, "Ready", is_ready_rel).await;
    }
    let rels = Api::<opm_core::api::Release>::namespaced(ns.client.clone(), &ns.name);
    for name in ["del", "orph", "mirror"] {
        rels.delete(name, &Default::default()).await.unwrap();
    }
    for name in ["del", "orph", "mirror"] {
        let r = rels.clone();
        eventually("release gone", || {
            let r = r.clone();
            async move { r.get_opt(name).await.unwrap().is_none() }
        })
        .await;
    }
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let gone = |c: Option<ConfigMap>| c.is_none_or(|c| c.metadata.deletion_timestamp.is_some());
    assert!(gone(cms.get_opt("del-cm").await.unwrap()), "Delete deletes");
    assert!(
        gone(cms.get_opt("mirror-cm").await.unwrap()),
        "MirrorPrune with prune deletes"
    );
    assert!(!gone(cms.get_opt("orph-cm").await.unwrap()), "Orphan keeps");
    op.stop().await;
    let _ = Duration::ZERO;
}

/// `deletionPolicy: WaitForTermination` keeps the release (and its finalizer) until every
/// deleted object is gone. An object held by a finalizer past the release's `timeout` is
/// named in `Ready=False/PruneFailed`; once the test removes the finalizer, the release goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_termination_waits_for_an_object_held_by_a_finalizer() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let objs = json!({"c": {"a": configmap("held-cm", json!({"k": "v"})), "b": configmap("free-cm", json!({"k": "v"}))}});
    pkg.publish(&ns.client, &ns.name, "wft", &release_package("wft", &objs))
        .await;
    let spec = json!({"deletionPolicy": "WaitForTermination", "timeout": "10s"});
    create_rel(&ns.client, &release(&ns.name, "wft", "wft", ".", spec)).await;
    wait_rel(&ns.client, &ns.name, "wft", "Ready", is_ready_rel).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    cms.patch(
        "held-cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    let rels = Api::<opm_core::api::Release>::namespaced(ns.client.clone(), &ns.name);
    rels.delete("wft", &Default::default()).await.unwrap();
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "wft",
        "PruneFailed",
        reason_is_rel("PruneFailed"),
    )
    .await;
    let msg = &condition(got.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(
        msg.contains("ConfigMap/") && msg.contains("held-cm") && msg.contains("WaitForTermination"),
        "{msg}"
    );
    assert!(!msg.contains("free-cm"), "the free object is gone: {msg}");
    assert!(got.metadata.deletion_timestamp.is_some());
    assert!(
        got.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&opm_core::constants::FINALIZER.to_string()),
        "finalizer kept while an object is terminating"
    );
    let held = cms.get("held-cm").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some(), "deleted, held");
    // Let it go: the release follows.
    cms.patch(
        "held-cm",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let r = rels.clone();
    eventually("release gone", || {
        let r = r.clone();
        async move { r.get_opt("wft").await.unwrap().is_none() }
    })
    .await;
    assert!(cms.get_opt("held-cm").await.unwrap().is_none());
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

/// `data` of each ConfigMap the policy test below renders, `null` when it does not exist.
async fn policy_cluster(cms: &Api<ConfigMap>) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for name in ["p-ifnp", "p-mrg", "p-ign", "p-plain"] {
        let data = cms
            .get_opt(name)
            .await
            .unwrap()
            .map_or(serde_json::Value::Null, |c| {
                json!(c.data.unwrap_or_default())
            });
        out.insert(name.into(), data);
    }
    serde_json::Value::Object(out)
}

/// The simulated world predicts this cluster: the same release, the same edits and the same
/// new revision as the world's `policies_give_the_cluster_the_operator_gives`
/// (world/tests/world_policies.rs), and the same `data` in every object at the end.
/// IfNotPresent keeps what it had (the edit included), Merge leaves `k` to its new owner
/// and updates `j`, Ignore never writes, the plain object is corrected and updated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_give_the_cluster_the_world_predicts() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let ssa = "releases.opmodel.dev/ssa";
    let objects = |revision: &str| {
        let cm = |name: &str| configmap(name, json!({"k": revision, "j": revision}));
        json!({"app": {
            "ifnp": annotated(cm("p-ifnp"), ssa, "IfNotPresent"),
            "mrg": annotated(cm("p-mrg"), ssa, "Merge"),
            "ign": annotated(cm("p-ign"), ssa, "Ignore"),
            "plain": cm("p-plain"),
        }})
    };
    pkg.publish(
        &ns.client,
        &ns.name,
        "pol",
        &release_package("pol", &objects("ours")),
    )
    .await;
    let spec = json!({"prune": true, "driftDetection": {"mode": "Correct"}});
    create_rel(&ns.client, &release(&ns.name, "pol", "pol", ".", spec)).await;
    wait_rel(&ns.client, &ns.name, "pol", "Ready", is_ready_rel).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert_eq!(
        policy_cluster(&cms).await,
        json!({
            "p-ifnp": {"j": "ours", "k": "ours"},
            "p-mrg": {"j": "ours", "k": "ours"},
            "p-ign": null,
            "p-plain": {"j": "ours", "k": "ours"},
        })
    );

    // Another writer (a `kubectl edit`) changes `data.k` of three of them.
    let edit = PatchParams {
        field_manager: Some("someone".into()),
        ..Default::default()
    };
    for name in ["p-ifnp", "p-mrg", "p-plain"] {
        cms.patch(name, &edit, &Patch::Merge(json!({"data": {"k": "theirs"}})))
            .await
            .unwrap();
    }
    // A new revision changes every value.
    let v2 = pkg
        .publish(
            &ns.client,
            &ns.name,
            "pol",
            &release_package("pol", &objects("v2")),
        )
        .await;
    wait_rel(&ns.client, &ns.name, "pol", "revision v2 applied", |o| {
        is_ready_rel(o)
            && o.status
                .as_ref()
                .is_some_and(|s| s.last_applied_source_digest == v2.digest)
    })
    .await;
    assert_eq!(
        policy_cluster(&cms).await,
        json!({
            "p-ifnp": {"j": "ours", "k": "theirs"},
            "p-mrg": {"j": "v2", "k": "theirs"},
            "p-ign": null,
            "p-plain": {"j": "v2", "k": "v2"},
        })
    );
    assert!(op.replay_traces() > 0);
    op.stop().await;
}
