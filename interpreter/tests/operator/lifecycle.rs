//! Happy paths: Ready with the right ledger, updates, prune, deletion, suspend, on-demand,
//! no-op, drift, Secrets.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use opm_core::api::{ModuleRelease, Release};
use opm_core::constants::{FINALIZER, REQUESTED_AT_ANNOTATION, labels};
use opm_core::{Kind, Outcome, ReleaseKey};
use opm_operator::controller::driver;
use serde_json::json;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_release_reaches_ready_with_its_ledger_and_first_success_events() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let mr = module_release(
        &ns.name,
        "web",
        json!({"replicas": 2, "message": "hi"}),
        json!({"prune": true}),
    );
    create_mr(&ns.client, &mr).await;
    let got = wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    let s = got.status.clone().unwrap();

    assert_eq!(s.observed_generation, got.metadata.generation.unwrap());
    let inv = s.inventory.clone().expect("inventory");
    assert_eq!(inv.revision, 1);
    assert_eq!(
        inv.count, 4,
        "ConfigMap, ServiceAccount, Deployment, Service"
    );
    assert!(inv.digest.starts_with("sha256:"));
    let kinds: Vec<&str> = inv.entries.iter().map(|e| e.kind.as_str()).collect();
    for k in ["ConfigMap", "ServiceAccount", "Deployment", "Service"] {
        assert!(kinds.contains(&k), "inventory lacks {k}: {kinds:?}");
    }
    assert_eq!(s.history.len(), 1);
    assert_eq!(s.history[0].action, "reconcile");
    assert_eq!(s.history[0].phase, "complete");
    assert_eq!(
        s.last_applied_source_digest,
        opm_core::digest::sha256(b"example.com/modules/web@v0@v0.2.1")
    );
    assert!(s.last_applied_config_digest.starts_with("sha256:"));
    assert!(s.last_applied_render_digest.starts_with("sha256:"));
    assert!(!s.release_uuid.is_empty());
    assert!(s.next_retry_at.is_none());
    assert_eq!(
        condition(&s, "ModuleResolved").map(|c| c.status.as_str()),
        Some("True")
    );
    assert!(
        got.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&FINALIZER.to_string())
    );

    // The objects carry the operator's labels.
    let dep = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
        .get("web")
        .await
        .expect("Deployment applied");
    let l = dep.metadata.labels.unwrap();
    assert_eq!(l[labels::MANAGED_BY], "opm-controller");
    assert_eq!(l[labels::RELEASE_UUID], s.release_uuid);
    assert_eq!(l[labels::RELEASE_NAME], "web");
    assert_eq!(l[labels::COMPONENT], "web");
    assert_eq!(dep.spec.replicas, Some(2));
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["message"], "hi");

    // The attempt's metrics were recorded for the release's series.
    let key = ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    let applied_total = op.rt.metrics.get(
        "opm_controller_reconcile_total",
        &key,
        &[("outcome", "applied")],
    );
    assert_eq!(applied_total, Some(1.0));
    // Our own finalizer and status writes start no further attempt.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for outcome in ["no_op", "applied", "failed_transient", "failed_stalled"] {
        let n = op.rt.metrics.get(
            "opm_controller_reconcile_total",
            &key,
            &[("outcome", outcome)],
        );
        let expected = if outcome == "applied" {
            Some(1.0)
        } else {
            None
        };
        assert_eq!(n, expected, "attempts with outcome {outcome}");
    }
    assert_eq!(
        op.rt
            .metrics
            .get("opm_controller_inventory_size", &key, &[]),
        Some(4.0)
    );

    // First success: Applied, then ReconciliationSucceeded.
    let evs = events_with(
        &ns.client,
        &ns.name,
        "web",
        &["Applied", "ReconciliationSucceeded"],
    )
    .await;
    let rs = reasons(&evs);
    let applied = rs
        .iter()
        .position(|r| r == "Applied")
        .expect("Applied event");
    let ok = rs
        .iter()
        .position(|r| r == "ReconciliationSucceeded")
        .expect("ReconciliationSucceeded event");
    assert!(applied < ok, "event order: {rs:?}");
    let note = evs[applied].note.clone().unwrap_or_default();
    assert!(note.contains("Applied 4 resources"), "note: {note}");
    assert!(
        evs.iter()
            .all(|e| e.reporting_controller.as_deref() == Some("opm-controller"))
    );
    // Every attempt the live operator ran replays byte for byte in the pure core.
    assert!(op.replay_traces() >= 1);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_from_a_flux_source_reaches_ready() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let dir = opm_testenv::tools::examples_dir().join("releases/web");
    let files = vec![
        (
            "cue.mod/module.cue",
            std::fs::read_to_string(dir.join("cue.mod/module.cue")).unwrap(),
        ),
        (
            "release.cue",
            std::fs::read_to_string(dir.join("release.cue")).unwrap(),
        ),
    ];
    let artifact = pkg
        .publish(&ns.client, &ns.name, "web-release", &files)
        .await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "hello",
            "web-release",
            ".",
            json!({"prune": true}),
        ),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "hello", "Ready", is_ready_rel).await;
    let s = got.status.unwrap();
    let src = s.source.clone().expect("status.source");
    assert_eq!(src.artifact_digest, artifact.digest);
    assert_eq!(src.artifact_revision, artifact.revision);
    assert_eq!(s.last_applied_source_digest, artifact.digest);
    assert_eq!(s.inventory.unwrap().count, 3);
    let dep = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
        .get("hello")
        .await
        .expect("Deployment in the release's namespace");
    assert_eq!(dep.spec.replicas, Some(2));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_values_change_reapplies_and_advances_the_inventory() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({"message": "one"}), json!({})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"spec": {"values": {"message": "two"}}}),
    )
    .await;
    let got = wait_mr(&ns.client, &ns.name, "web", "inventory revision 2", |o| {
        is_ready_mr(o)
            && o.status
                .as_ref()
                .and_then(|s| s.inventory.as_ref())
                .is_some_and(|i| i.revision == 2)
    })
    .await;
    assert_eq!(got.status.as_ref().unwrap().history.len(), 2);
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["message"], "two");
    op.stop().await;
}

/// The measured figures of the report: a first apply and a no-op of the example, run
/// through the driver directly (no controller running, so every request is the attempt's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_op_reconcile_sends_no_write() {
    let (env, ns) = namespace().await;
    let (rt, _dirs) = Operator::runtime_only(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({"replicas": 1}), json!({})),
    )
    .await;
    let key = ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: ns.name.clone(),
        name: "web".into(),
    };

    let before = rt.clients.counts();
    let t = Instant::now();
    let first = driver::run_attempt(&rt, &key).await.expect("first attempt");
    let first_time = t.elapsed();
    let first_counts = rt.clients.counts().since(&before);
    assert_eq!(first.outcome, Outcome::Applied, "{first:?}");

    let before = rt.clients.counts();
    let t = Instant::now();
    let second = driver::run_attempt(&rt, &key)
        .await
        .expect("second attempt");
    let noop_time = t.elapsed();
    let noop_counts = rt.clients.counts().since(&before);
    assert_eq!(second.outcome, Outcome::NoOp, "{second:?}");
    assert_eq!(noop_counts.writes(), 0, "a no-op wrote: {noop_counts:?}");
    assert!(
        first_counts.writes() >= 6,
        "first apply writes: {first_counts:?}"
    );
    println!(
        "MEASURE first apply: {:?}, {} requests ({} writes) {first_counts:?}; no-op: {:?}, {} requests ({} writes) {noop_counts:?}",
        first_time,
        first_counts.total(),
        first_counts.writes(),
        noop_time,
        noop_counts.total(),
        noop_counts.writes()
    );
    drop(rt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_on_demand_annotation_triggers_an_attempt_and_is_recorded() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "now-1"}}}),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "lastHandledReconcileAt", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.last_handled_reconcile_at == "now-1")
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_stops_reconciling_and_resume_continues() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({"message": "a"}), json!({})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"spec": {"suspend": true, "values": {"message": "b"}}}),
    )
    .await;
    wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "Suspended",
        reason_is_mr("Suspended"),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert_eq!(
        cms.get("web-config").await.unwrap().data.unwrap()["message"],
        "a"
    );
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"spec": {"suspend": false}}),
    )
    .await;
    wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "Ready after resume",
        is_ready_mr,
    )
    .await;
    assert_eq!(
        cms.get("web-config").await.unwrap().data.unwrap()["message"],
        "b"
    );
    let rs = reasons(&events_with(&ns.client, &ns.name, "web", &["Suspended", "Resumed"]).await);
    assert!(
        rs.contains(&"Suspended".to_string()) && rs.contains(&"Resumed".to_string()),
        "{rs:?}"
    );
    op.stop().await;
}

async fn prune_case(prune: bool) {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let both = json!({"c": {"a": configmap("keep", json!({"k": "1"})), "b": configmap("stale", json!({"k": "2"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &both))
        .await;
    create_rel(
        &ns.client,
        &release(&ns.name, "r", "src", ".", json!({"prune": prune})),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    let one = json!({"c": {"a": configmap("keep", json!({"k": "1"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &one))
        .await;
    let got = wait_rel(&ns.client, &ns.name, "r", "inventory revision 2", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.inventory.as_ref())
            .is_some_and(|i| i.revision == 2)
    })
    .await;
    assert_eq!(got.status.unwrap().inventory.unwrap().count, 1);
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(cms.get_opt("keep").await.unwrap().is_some());
    assert_eq!(cms.get_opt("stale").await.unwrap().is_some(), !prune);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_object_is_pruned_with_prune_true() {
    prune_case(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_object_is_kept_with_prune_false() {
    prune_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_foreign_owned_objects_are_never_pruned() {
    let (env, ns) = namespace().await;
    // A Namespace is cluster-scoped: only `cluster` lets the operator's identity write it.
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = opm_core::AllowOperatorIdentity::Cluster
    })
    .await;
    let pkg = Package::start().await;
    let extra_ns = format!("{}-extra", ns.name);
    let first = json!({"c": {
        "n": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": extra_ns}},
        "a": configmap("mine", json!({"k": "1"})),
        "b": configmap("taken", json!({"k": "2"})),
    }});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &first))
        .await;
    create_rel(
        &ns.client,
        &release(&ns.name, "r", "src", ".", json!({"prune": true})),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    // Someone else takes over "taken".
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    cms.patch(
        "taken",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {labels::MANAGED_BY: "someone-else"}}})),
    )
    .await
    .unwrap();
    let next = json!({"c": {"a": configmap("mine", json!({"k": "1"}))}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &next))
        .await;
    wait_rel(&ns.client, &ns.name, "r", "inventory revision 2", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.inventory.as_ref())
            .is_some_and(|i| i.revision == 2)
    })
    .await;
    assert!(
        cms.get_opt("taken").await.unwrap().is_some(),
        "foreign-owned object pruned"
    );
    let nss = Api::<Namespace>::all(ns.client.clone());
    let n = nss.get_opt(&extra_ns).await.unwrap();
    assert!(
        n.is_some_and(|n| n.metadata.deletion_timestamp.is_none()),
        "Namespace pruned"
    );
    let rs = reasons(&events_with(&ns.client, &ns.name, "r", &["PruneSkipped"]).await);
    assert!(rs.contains(&"PruneSkipped".to_string()), "{rs:?}");
    op.stop().await;
}

async fn deletion_case(prune: bool) {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({"prune": prune})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "web", "Ready", is_ready_mr).await;
    let mrs = Api::<ModuleRelease>::namespaced(ns.client.clone(), &ns.name);
    mrs.delete("web", &DeleteParams::default()).await.unwrap();
    let mrs2 = mrs.clone();
    eventually("release gone", || {
        let mrs = mrs2.clone();
        async move { mrs.get_opt("web").await.unwrap().is_none() }
    })
    .await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let cm = cms.get_opt("web-config").await.unwrap();
    if prune {
        // Deleted (or being deleted: no garbage collector runs on the test cluster).
        assert!(
            cm.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
            "object kept"
        );
    } else {
        assert!(
            cm.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
            "object not orphaned"
        );
    }
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_prunes_what_the_release_owns() {
    deletion_case(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_with_prune_false_orphans_the_objects() {
    deletion_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_is_reported_in_warn_mode_and_corrected_in_correct_mode() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "warn",
            json!({"message": "desired"}),
            json!({"driftDetection": {"mode": "Warn"}}),
        ),
    )
    .await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "fix",
            json!({"message": "desired"}),
            // A hand edit (an Update) takes the field's ownership: taking it back needs force.
            json!({"driftDetection": {"mode": "Correct"}, "rollout": {"forceConflicts": true}}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "warn", "Ready", is_ready_mr).await;
    wait_mr(&ns.client, &ns.name, "fix", "Ready", is_ready_mr).await;
    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    for name in ["warn-config", "fix-config"] {
        cms.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"message": "edited by hand"}})),
        )
        .await
        .unwrap();
    }
    // A deleted managed object is drift too.
    let svcs = Api::<k8s_openapi::api::core::v1::Service>::namespaced(ns.client.clone(), &ns.name);
    svcs.delete("fix", &DeleteParams::default()).await.unwrap();
    for name in ["warn", "fix"] {
        patch_mr(
            &ns.client,
            &ns.name,
            name,
            json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "drift"}}}),
        )
        .await;
    }
    let warned = wait_mr(&ns.client, &ns.name, "warn", "Drifted", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| condition(s, "Drifted").is_some_and(|c| c.status == "True"))
    })
    .await;
    let msg = condition(warned.status.as_ref().unwrap(), "Drifted")
        .unwrap()
        .message
        .clone();
    assert!(msg.contains("ConfigMap"), "{msg}");
    assert_eq!(
        cms.get("warn-config").await.unwrap().data.unwrap()["message"],
        "edited by hand"
    );
    wait_mr(&ns.client, &ns.name, "fix", "corrected", |o| {
        o.status.as_ref().is_some_and(|s| {
            s.last_handled_reconcile_at == "drift" && condition(s, "Drifted").is_none()
        })
    })
    .await;
    assert_eq!(
        cms.get("fix-config").await.unwrap().data.unwrap()["message"],
        "desired"
    );
    assert!(
        svcs.get_opt("fix").await.unwrap().is_some(),
        "deleted Service re-created"
    );
    op.stop().await;
}

/// Without impersonation, an unchanged object's drift check is answered by the managed-object
/// watch (its version is the one already verified) instead of a dry-run; a hand edit changes
/// the version, so the next check dry-runs and reports the drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_objects_skip_their_dry_run_until_someone_edits_them() {
    use std::sync::atomic::Ordering::Relaxed;
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "w",
            json!({"message": "desired"}),
            json!({"driftDetection": {"mode": "Warn"}}),
        ),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "w", "Ready", is_ready_mr).await;
    let stats = &op.rt.drift_stats;
    let again = |value: String| {
        let client = ns.client.clone();
        let ns = ns.name.clone();
        async move {
            patch_mr(
                &client,
                &ns,
                "w",
                json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: value.clone()}}}),
            )
            .await;
            wait_mr(&client, &ns, "w", "handled", |o| {
                o.status
                    .as_ref()
                    .is_some_and(|s| s.last_handled_reconcile_at == value)
            })
            .await
        }
    };
    // The watch starts with the first apply; once it has listed the kinds and seen our
    // writes, a re-reconcile answers all four checks without a dry-run.
    let mut skipped_all = false;
    for i in 0..20 {
        let (d0, u0) = (stats.dry_runs.load(Relaxed), stats.unchanged.load(Relaxed));
        let got = again(format!("again-{i}")).await;
        let (d1, u1) = (stats.dry_runs.load(Relaxed), stats.unchanged.load(Relaxed));
        assert!(is_ready_mr(&got), "still Ready");
        if d1 == d0 && u1 == u0 + 4 {
            skipped_all = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        skipped_all,
        "four unchanged objects never skipped their dry-runs"
    );

    let cms = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    cms.patch(
        "w-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"message": "edited by hand"}})),
    )
    .await
    .unwrap();
    let before = stats.dry_runs.load(Relaxed);
    // The edit reaches the watch a moment later; a check that ran before it sees no drift
    // yet, the next one does.
    let mut drifted = None;
    for i in 0..20 {
        let got = again(format!("edited-{i}")).await;
        if got
            .status
            .as_ref()
            .and_then(|s| condition(s, "Drifted"))
            .is_some_and(|c| c.status == "True")
        {
            drifted = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let got = drifted.expect("the hand edit was never reported as drift");
    let msg = condition(got.status.as_ref().unwrap(), "Drifted")
        .unwrap()
        .message
        .clone();
    assert!(
        msg.contains("ConfigMap") && msg.contains("w-config"),
        "{msg}"
    );
    assert!(
        stats.dry_runs.load(Relaxed) > before,
        "the edited object was checked by a dry-run"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_is_applied_but_its_value_never_shows_in_status_events_or_traces() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let pkg = Package::start().await;
    let plain = "s3cr3t-Value-9f8e7d";
    let b64 = "czNjcjN0LVZhbHVlLTlmOGU3ZA==";
    let comps = json!({"db": {
        "s": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"password": plain}},
        "t": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "data": {"token": b64}},
    }});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &comps))
        .await;
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    let got = wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    let secrets = Api::<Secret>::namespaced(ns.client.clone(), &ns.name);
    let s = secrets.get("creds").await.unwrap();
    assert_eq!(s.data.unwrap()["password"].0, plain.as_bytes());
    let t = secrets.get("token").await.unwrap();
    assert_eq!(t.data.unwrap()["token"].0, plain.as_bytes());
    let status = serde_json::to_string(&got.status).unwrap();
    let evs =
        serde_json::to_string(&events_with(&ns.client, &ns.name, "r", &["Applied"]).await).unwrap();
    let traces = op.traces();
    assert!(!traces.is_empty(), "traces were written");
    for (what, text) in [("status", &status), ("events", &evs), ("traces", &traces)] {
        assert!(
            !text.contains(plain) && !text.contains(b64),
            "secret value in {what}"
        );
    }
    // A second attempt is a no-op: the digests stand in for the values consistently.
    patch_rel(
        &ns.client,
        &ns.name,
        "r",
        json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "again"}}}),
    )
    .await;
    let again = wait_rel(&ns.client, &ns.name, "r", "handled", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.last_handled_reconcile_at == "again")
    })
    .await;
    assert_eq!(again.status.unwrap().inventory.unwrap().revision, 1);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crd_and_its_custom_resource_apply_in_one_attempt() {
    let (env, ns) = namespace().await;
    // A CRD is cluster-scoped: only `cluster` lets the operator's identity write it.
    let op = Operator::start(env, &ns.name, |a| {
        a.allow_operator_identity = opm_core::AllowOperatorIdentity::Cluster
    })
    .await;
    let pkg = Package::start().await;
    let group = format!("{}.test.opmodel.dev", ns.name);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
    let cr = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}});
    pkg.publish(
        &ns.client,
        &ns.name,
        "src",
        &release_package("r", &json!({"api": {"crd": crd}, "app": {"widget": cr}})),
    )
    .await;
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    let got = wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    let s = got.status.unwrap();
    assert_eq!(s.inventory.unwrap().count, 2);
    assert_eq!(
        s.history.len(),
        1,
        "one attempt, no failure before success: {:?}",
        s.history
    );
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let w = Api::<kube::api::DynamicObject>::namespaced_with(ns.client.clone(), &ns.name, &ar)
        .get("w1")
        .await
        .expect("custom resource applied");
    assert_eq!(w.data["spec"]["size"], 3);
    op.stop().await;
}

/// Release objects in the namespace, for debugging output.
#[allow(dead_code)]
pub async fn dump(client: &kube::Client, ns: &str) -> String {
    let rels = Api::<Release>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap();
    serde_json::to_string_pretty(&rels.items).unwrap()
}
