//! Red team (issue 13 items 5, 6, 8): a tenant's CPU-bomb package must not starve another
//! namespace; a status write that keeps failing backs off instead of retrying (and
//! re-applying) every 5s; `/healthz` fails when the work queue stops making progress.
//!
//! Every release here runs as a ServiceAccount bound to a namespaced Role.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use opm_core::constants::REQUESTED_AT_ANNOTATION;
use opm_core::trace::TraceRecord;
use opm_core::{InputKind, Kind, ReleaseKey};
use opm_testenv::rbac;
use serde_json::{Value, json};

use crate::harness::*;

/// A real `cue` program that burns CPU far past any render deadline: 216 million
/// comprehension steps (nine million took about 7 s here). Distinct releases of it share
/// one render-cache key, so a bomb that ever finished would turn the rest into cache hits.
const BOMB_CUE: &str = r#"package release

import "list"

kind: "ModuleRelease"
metadata: {name: "bomb", namespace: "default"}
_r: list.Range(0, 600, 1)
_burn: len([for a in _r for b in _r for c in _r if a*b*c < 0 {a}])
components: c: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "bomb", data: x: "\(_burn)"}
"#;

const MODULE_CUE: &str = "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n";

async fn deployer(client: &Client, ns: &str) {
    rbac::service_account_with_role(client, ns, "deployer", rbac::all_rules())
        .await
        .unwrap();
}

/// A Release of `source` in `ns`, watched by the operator of `owner` (the label).
fn tenant_release(
    owner: &str,
    ns: &str,
    name: &str,
    source: &str,
    extra: Value,
) -> opm_core::api::Release {
    let mut r = release(ns, name, source, ".", extra);
    r.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(TEST_LABEL.into(), owner.into());
    r
}

async fn time_to_ready(client: &Client, ns: &str, name: &str) -> Duration {
    let start = Instant::now();
    wait_rel(client, ns, name, "healthy tenant Ready", is_ready_rel).await;
    start.elapsed()
}

/// Tenant A fills the queue with CPU-bomb releases (each runs `cue` until the render
/// deadline, then retries); tenant B's release must still converge quickly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_bomb_tenant_does_not_starve_another_namespace() {
    const BOMBS: usize = 6;
    const RENDER_TIMEOUT: Duration = Duration::from_secs(12);
    let (env, a) = namespace().await;
    let b = env.namespace().await.unwrap();
    deployer(&a.client, &a.name).await;
    deployer(&b.client, &b.name).await;
    let pkg = Package::start().await;
    pkg.publish(
        &a.client,
        &a.name,
        "bomb",
        &[
            ("cue.mod/module.cue", MODULE_CUE.into()),
            ("release.cue", BOMB_CUE.into()),
        ],
    )
    .await;
    let healthy = release_package(
        "ok",
        &json!({"c": {"cm": configmap("ok", json!({"k": "v"}))}}),
    );
    pkg.publish(&b.client, &b.name, "ok", &healthy).await;
    // The second healthy release renders its own ConfigMap: one object has one owner
    // (SPEC §25), so reusing "ok" would be an OwnershipConflict, not a fairness figure.
    let healthy2 = release_package(
        "ok2",
        &json!({"c": {"cm": configmap("ok2", json!({"k": "v"}))}}),
    );
    pkg.publish(&b.client, &b.name, "ok2", &healthy2).await;
    // Default flags but a short render deadline: --concurrency 4, and (after the fix)
    // --max-concurrent-per-namespace defaults to 2.
    let op = Operator::start(env, &a.name, |args| args.render_timeout = RENDER_TIMEOUT).await;
    let sa = json!({"serviceAccountName": "deployer", "timeout": "30s"});

    let alone = {
        create_rel(
            &b.client,
            &tenant_release(&a.name, &b.name, "first", "ok", sa.clone()),
        )
        .await;
        time_to_ready(&b.client, &b.name, "first").await
    };

    for i in 0..BOMBS {
        let r = tenant_release(&a.name, &a.name, &format!("bomb-{i}"), "bomb", sa.clone());
        create_rel(&a.client, &r).await;
    }
    // Let the bombs take their slots and start burning.
    tokio::time::sleep(Duration::from_secs(3)).await;
    create_rel(
        &b.client,
        &tenant_release(&a.name, &b.name, "second", "ok2", sa.clone()),
    )
    .await;
    let with_bombs = time_to_ready(&b.client, &b.name, "second").await;
    println!(
        "FAIRNESS: tenant B time to Ready: alone {:.1}s, next to {BOMBS} CPU-bomb releases in A \
         (render timeout {}s, concurrency 4) {:.1}s",
        alone.as_secs_f64(),
        RENDER_TIMEOUT.as_secs(),
        with_bombs.as_secs_f64()
    );
    // The bombs really are running and failing on the render deadline.
    wait_rel(
        &a.client,
        &a.name,
        "bomb-0",
        "the bomb times out",
        reason_is_rel("RenderFailed"),
    )
    .await;
    // Before the fix B waited for the first bomb to hit its render deadline (9.4s here:
    // the bombs held every worker); now it runs at once on a worker A may not take.
    assert!(
        with_bombs < RENDER_TIMEOUT / 2,
        "B waited {with_bombs:?} behind tenant A's bombs (alone: {alone:?})"
    );
    op.stop().await;
}

/// A ValidatingAdmissionPolicy that denies every status write of the ModuleReleases in
/// `ns`, and its binding.
async fn deny_status_writes(
    client: &Client,
    ns: &str,
) -> impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + use<> {
    let gvk = |kind: &str| GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let policy_ar = ApiResource::from_gvk(&gvk("ValidatingAdmissionPolicy"));
    let binding_ar = ApiResource::from_gvk(&gvk("ValidatingAdmissionPolicyBinding"));
    let name = format!("deny-status-{ns}");
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["releases.opmodel.dev"], "apiVersions": ["*"],
                "operations": ["UPDATE"], "resources": ["modulereleases/status"],
            }]},
            "matchConditions": [{"name": "this-namespace", "expression": format!("request.namespace == '{ns}'")}],
            "validations": [{"expression": "false", "message": "red team: status writes are blocked"}],
        },
    }))
    .unwrap();
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }))
    .unwrap();
    let policies = Api::<DynamicObject>::all_with(client.clone(), &policy_ar);
    let bindings = Api::<DynamicObject>::all_with(client.clone(), &binding_ar);
    policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    move || {
        let (policies, bindings, name) = (policies.clone(), bindings.clone(), name.clone());
        Box::pin(async move {
            let _ = bindings.delete(&name, &DeleteParams::default()).await;
            let _ = policies.delete(&name, &DeleteParams::default()).await;
        })
    }
}

/// The times at which an attempt's status write failed, and the number of Apply effects,
/// from the operator's traces.
fn failed_status_writes(traces: &str) -> (Vec<jiff::Timestamp>, usize) {
    let mut failed = Vec::new();
    let mut applies = 0;
    for line in traces.lines() {
        match serde_json::from_str::<TraceRecord>(line) {
            Ok(TraceRecord::In { input, .. }) => {
                if let InputKind::StatusPatched { result: Err(_) } = input.kind {
                    failed.push(input.now);
                }
            }
            Ok(TraceRecord::Out { out, .. }) => {
                if matches!(out, opm_core::Effect::Apply { .. }) {
                    applies += 1;
                }
            }
            Err(_) => {}
        }
    }
    failed.sort();
    (failed, applies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_status_write_backs_off_and_recovers() {
    const WATCH: Duration = Duration::from_secs(50);
    let (env, ns) = namespace().await;
    deployer(&ns.client, &ns.name).await;
    let undo = deny_status_writes(&ns.client, &ns.name).await;
    // The API server's policy informer picks the new policy up within a second or so.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let before = op.rt.clients.counts();
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "web",
            json!({}),
            json!({"serviceAccountName": "deployer"}),
        ),
    )
    .await;
    tokio::time::sleep(WATCH).await;
    let counts = op.rt.clients.counts().since(&before);
    let (failed, applies) = failed_status_writes(&op.traces());
    let intervals: Vec<f64> = failed
        .windows(2)
        .map(|w| (w[1].as_millisecond() - w[0].as_millisecond()) as f64 / 1000.0)
        .collect();
    println!(
        "STATUS BACKOFF: {} failed status writes in {}s; retry intervals (s): {:?}; \
         {} Apply effects; requests: {} writes, {} reads/dry-runs, {} events",
        failed.len(),
        WATCH.as_secs(),
        intervals
            .iter()
            .map(|s| format!("{s:.1}"))
            .collect::<Vec<_>>(),
        applies,
        counts.writes(),
        counts.get,
        counts.events,
    );
    assert!(
        failed.len() >= 3,
        "the policy blocks the status writes: {failed:?}"
    );
    // 5, 10, 20 … (a 5s loop would show ten attempts here).
    assert!(
        failed.len() <= 5,
        "status writes retried too often: {intervals:?}"
    );
    for w in intervals.windows(2) {
        assert!(
            w[1] > w[0] * 1.5,
            "the retry intervals must grow: {intervals:?}"
        );
    }
    let key = ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: ns.name.clone(),
        name: "web".into(),
    };
    assert_eq!(
        op.rt.unpersisted.get(&key),
        Some(failed.len() as i64),
        "the failures are counted in memory until they can be persisted"
    );

    // The policy goes; an on-demand reconcile converges and persists a clean counter.
    undo().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    patch_mr(
        &ns.client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "now"}}}),
    )
    .await;
    let done = wait_mr(
        &ns.client,
        &ns.name,
        "web",
        "Ready after the policy is gone",
        is_ready_mr,
    )
    .await;
    assert_eq!(done.status.unwrap().failure_counters.reconcile, 0);
    assert_eq!(op.rt.unpersisted.get(&key), None);
    // The core replays every attempt: the counter it saw is in the recorded input.
    assert!(op.replay_traces() >= 1);
    op.stop().await;
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out
}

/// One worker, held by a render that runs to its deadline, while another release waits:
/// past the stall bound `/healthz` answers 503 naming the stuck queue, and 200 again once
/// the queue moves. `/readyz` stays ok throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_while_the_work_queue_is_stuck() {
    let (env, ns) = namespace().await;
    deployer(&ns.client, &ns.name).await;
    let pkg = Package::start().await;
    pkg.publish(
        &ns.client,
        &ns.name,
        "bomb",
        &[
            ("cue.mod/module.cue", MODULE_CUE.into()),
            ("release.cue", BOMB_CUE.into()),
        ],
    )
    .await;
    let healthy = release_package(
        "ok",
        &json!({"c": {"cm": configmap("ok", json!({"k": "v"}))}}),
    );
    pkg.publish(&ns.client, &ns.name, "ok", &healthy).await;
    let op = Operator::start(env, &ns.name, |args| {
        args.concurrency = 1;
        args.render_timeout = Duration::from_secs(12);
        args.health_stall_timeout = Duration::from_secs(3);
    })
    .await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let server = tokio::spawn(opm_operator::ops::endpoints::serve(
        addr.parse().unwrap(),
        op.rt.clone(),
    ));
    let sa = json!({"serviceAccountName": "deployer", "timeout": "30s"});
    let ok = release(&ns.name, "ok", "ok", ".", sa.clone());
    create_rel(
        &ns.client,
        &release(&ns.name, "bomb", "bomb", ".", sa.clone()),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_rel(&ns.client, &ok).await;
    let start = Instant::now();
    let mut stuck_body = None;
    while start.elapsed() < Duration::from_secs(30) {
        let r = http_get(&addr, "/healthz").await;
        if r.starts_with("HTTP/1.1 503") {
            stuck_body = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let stuck_body = stuck_body.expect("/healthz never failed while the queue was stuck");
    println!(
        "HEALTHZ: 503 after {:.1}s: {}",
        start.elapsed().as_secs_f64(),
        stuck_body.lines().last().unwrap_or_default()
    );
    assert!(
        stuck_body.contains("queued and none has made progress"),
        "{stuck_body}"
    );
    assert!(http_get(&addr, "/readyz").await.starts_with("HTTP/1.1 200"));
    // The bomb hits its render deadline, the waiting release runs: healthy again.
    wait_rel(
        &ns.client,
        &ns.name,
        "ok",
        "the waiting release converges",
        is_ready_rel,
    )
    .await;
    assert!(
        http_get(&addr, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    server.abort();
    op.stop().await;
}

/// Issue 13 item 3: `interval: "5124095576030431h"` parsed, and the success requeue's jitter
/// (`Duration::mul_f64`) panicked, ending the controllers. Now the CRD may refuse it (over
/// 24h); if it is accepted, the release converges, its requeue is clamped, and the
/// operator keeps reconciling others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_interval_never_crashes_the_operator() {
    let (env, ns) = namespace().await;
    deployer(&ns.client, &ns.name).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let huge = module_release(
        &ns.name,
        "huge",
        json!({}),
        json!({"serviceAccountName": "deployer", "interval": "5124095576030431h"}),
    );
    let created = Api::<opm_core::api::ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &huge)
        .await;
    match created {
        Err(kube::Error::Api(s)) if s.code == 422 => {
            println!("HUGE INTERVAL: refused by the CRD: {}", s.message);
        }
        Err(e) => panic!("unexpected error creating the release: {e}"),
        Ok(_) => {
            wait_mr(
                &ns.client,
                &ns.name,
                "huge",
                "the huge-interval release Ready",
                is_ready_mr,
            )
            .await;
            println!("HUGE INTERVAL: accepted by the CRD; the release went Ready");
            // Each successful attempt draws a fresh jitter (the old code panicked on about
            // half of them): a few on-demand reconciles.
            for i in 0..3 {
                patch_mr(
                    &ns.client,
                    &ns.name,
                    "huge",
                    json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: format!("{i}")}}}),
                )
                .await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    // The operator is alive: another release still converges.
    let next = module_release(
        &ns.name,
        "next",
        json!({}),
        json!({"serviceAccountName": "deployer"}),
    );
    create_mr(&ns.client, &next).await;
    wait_mr(
        &ns.client,
        &ns.name,
        "next",
        "a release after the huge one",
        is_ready_mr,
    )
    .await;
    op.stop().await;
}
