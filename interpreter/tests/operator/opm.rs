//! OPM modules and the Platform (SPEC §30, issue 32) on the real API server, `cue` and
//! registry, with the project's own core v2, catalog (two builds) and modules published by
//! `opm_testenv::opm`. The Platform is a cluster-wide singleton, so these tests take one
//! lock and run one at a time.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use opm_core::api::ModuleRelease;
use opm_core::api::platform::Platform;
use opm_testenv::opm::{self as fx, OpmFixtures};
use serde_json::{Value, json};

use crate::harness::*;

/// One test at a time owns the Platform `cluster`.
static PLATFORM: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn platforms(client: &Client) -> Api<Platform> {
    Api::all(client.clone())
}

/// Deletes the Platform and waits until it is gone.
async fn delete_platform(client: &Client) {
    let api = platforms(client);
    let _ = api.delete("cluster", &DeleteParams::default()).await;
    let start = Instant::now();
    while api
        .get_opt("cluster")
        .await
        .expect("get Platform")
        .is_some()
    {
        assert!(start.elapsed() < WAIT, "Platform not deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Applies the Platform `cluster` with `catalogs` (path, version).
async fn apply_platform(client: &Client, catalogs: &[(&str, &str)]) {
    let registry: serde_json::Map<String, Value> = catalogs
        .iter()
        .map(|(p, v)| ((*p).to_owned(), json!({"version": v})))
        .collect();
    let p = json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": registry},
    });
    platforms(client)
        .patch(
            "cluster",
            &PatchParams::apply("opm-test").force(),
            &Patch::Apply(&p),
        )
        .await
        .expect("apply Platform");
}

/// Waits until the Platform's status describes its current generation and is Ready.
async fn wait_platform_ready(client: &Client) -> Platform {
    let api = platforms(client);
    let start = Instant::now();
    loop {
        let p = api.get("cluster").await.expect("get Platform");
        let ok = p.status.as_ref().is_some_and(|s| {
            s.observed_generation == p.metadata.generation.unwrap_or_default()
                && s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if ok {
            return p;
        }
        assert!(start.elapsed() < WAIT, "Platform not Ready: {:?}", p.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn opm_mr(ns: &str, name: &str, module: &str, version: &str, values: Value) -> ModuleRelease {
    module_release(
        ns,
        name,
        values,
        json!({"module": {"path": module, "version": version}}),
    )
}

fn reason_is(m: &ModuleRelease, reason: &str) -> bool {
    m.status.as_ref().is_some_and(|s| ready(s).1 == reason)
}

fn is_ready(m: &ModuleRelease) -> bool {
    m.status
        .as_ref()
        .is_some_and(|s| ready(s) == ("True".into(), "ReconciliationSucceeded".into()))
}

fn annotation(d: &Deployment, key: &str) -> Option<String> {
    d.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key).cloned())
}

/// No Platform → `PlatformNotReady` (soft, Normal event); creating it makes the release
/// Ready within seconds, with the objects of the Platform's catalog version applied (the web
/// module was built against the older build: the Platform's pin wins); a Platform version
/// change re-renders and applies the other build's output, changing the render digest.
#[tokio::test(flavor = "multi_thread")]
async fn opm_module_release_waits_for_the_platform_renders_and_follows_its_version() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    delete_platform(&client).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    // Values from a ConfigMap (SPEC §27) and spec.values both reach the OPM module.
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "web-values"},
        "data": {"values.yaml": "message: from-a-configmap\n"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), &ns.name)
        .create(&Default::default(), &cm)
        .await
        .expect("values ConfigMap");
    let mut mr = opm_mr(
        &ns.name,
        "web",
        fx::WEB,
        fx::WEB_VERSIONS[0],
        json!({"replicas": 2}),
    );
    mr.spec.values_from =
        serde_json::from_value(json!([{"kind": "ConfigMap", "name": "web-values"}])).unwrap();
    create_mr(&client, &mr).await;
    // Before the Platform watch's first list the operator says it has not read one yet
    // (a busy machine may reconcile first); then that none exists.
    let waiting = wait_mr(
        &client,
        &ns.name,
        "web",
        "PlatformNotReady (none exists)",
        |m| {
            reason_is(m, "PlatformNotReady")
                && m.status
                    .as_ref()
                    .and_then(|s| condition(s, "Ready"))
                    .is_some_and(|c| c.message.contains("no Platform cluster exists"))
        },
    )
    .await;
    let msg = &condition(waiting.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(
        msg.starts_with("waiting for Platform cluster: no Platform cluster exists"),
        "{msg}"
    );
    let evs = events_with(&client, &ns.name, "web", &["PlatformNotReady"]).await;
    assert!(
        evs.iter()
            .any(|e| e.reason.as_deref() == Some("PlatformNotReady")
                && e.type_.as_deref() == Some("Normal")
                && e.action.as_deref() == Some("Render"))
    );

    let created = Instant::now();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    let mr = wait_mr(&client, &ns.name, "web", "Ready", is_ready).await;
    let took = created.elapsed();
    eprintln!("Platform created -> OPM release Ready in {took:?}");
    assert!(
        took < Duration::from_secs(15),
        "re-triggered by the Platform turning Ready, not by the 30s requeue: {took:?}"
    );
    let plat = wait_platform_ready(&client).await;
    let s = plat.status.as_ref().unwrap();
    assert_eq!(s.catalogs.len(), 1);
    assert_eq!(s.catalogs[0].path, fx::CATALOG);
    assert_eq!(s.catalogs[0].version, fx::CATALOG_NEW);
    assert_eq!(s.catalogs[0].transformers, 6);
    assert_eq!(
        s.digest,
        opm_core::opm::platform::digest(&plat.spec),
        "status.digest is the digest of the normalised spec"
    );

    let status = mr.status.clone().unwrap();
    let inv = status.inventory.clone().unwrap();
    let mut comps: Vec<_> = inv.entries.iter().map(|e| e.component.clone()).collect();
    comps.sort();
    comps.dedup();
    assert_eq!(comps, ["config", "identity", "server"]);
    let deploys = Api::<Deployment>::namespaced(client.clone(), &ns.name);
    let d = deploys.get("web-server").await.expect("Deployment applied");
    let labels = d.metadata.labels.clone().unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "opm-controller");
    assert_eq!(labels["module-instance.opmodel.dev/name"], "web");
    assert!(labels.contains_key("module-instance.opmodel.dev/uuid"));
    assert_eq!(labels["component.opmodel.dev/name"], "server");
    assert_eq!(labels["module-release.opmodel.dev/name"], "web");
    let new_bare = fx::CATALOG_NEW.trim_start_matches('v');
    assert_eq!(
        annotation(&d, fx::CATALOG_VERSION_ANNOTATION).as_deref(),
        Some(new_bare),
        "the Platform's catalog build rendered it, not the module's older one"
    );
    let cms = Api::<ConfigMap>::namespaced(client.clone(), &ns.name);
    assert!(
        cms.list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|c| c
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("web-config")))
    );

    // A Platform version change: re-rendered with the other build, applied.
    let before = status.last_applied_render_digest.clone();
    let config_before = status.last_applied_config_digest.clone();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_OLD)]).await;
    let mr = wait_mr(&client, &ns.name, "web", "re-rendered", |m| {
        is_ready(m)
            && m.status
                .as_ref()
                .is_some_and(|s| s.last_applied_render_digest != before)
    })
    .await;
    let s = mr.status.unwrap();
    assert_ne!(s.last_applied_config_digest, config_before);
    let d = deploys.get("web-server").await.unwrap();
    assert_eq!(
        annotation(&d, fx::CATALOG_VERSION_ANNOTATION).as_deref(),
        Some(fx::CATALOG_OLD.trim_start_matches('v'))
    );

    // A NoOp of an OPM release runs no `cue` (the module's facts and its render are cached).
    let runs = op
        .rt
        .local
        .renderer
        .stats()
        .runs
        .load(std::sync::atomic::Ordering::SeqCst);
    patch_mr(
        &client,
        &ns.name,
        "web",
        json!({"metadata": {"annotations": {"reconcile.opmodel.dev/requestedAt": "noop-1"}}}),
    )
    .await;
    wait_mr(&client, &ns.name, "web", "handled", |m| {
        m.status
            .as_ref()
            .is_some_and(|s| s.last_handled_reconcile_at == "noop-1")
    })
    .await;
    let noop = events_with(&client, &ns.name, "web", &["NoOp"]).await;
    assert!(!noop.is_empty());
    assert_eq!(
        op.rt
            .local
            .renderer
            .stats()
            .runs
            .load(std::sync::atomic::Ordering::SeqCst),
        runs,
        "a NoOp ran cue"
    );
    // The attempts, OPM renders and Platform digests included, replay in the core.
    assert!(op.replay_traces() > 0);
    op.stop().await;
}

/// Each verdict is a `RenderFailed` stall naming the component and what is missing or
/// doubled; a core v0 module stalls saying it must move to core v2.
#[tokio::test(flavor = "multi_thread")]
async fn each_opm_verdict_is_a_stall_naming_it() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    wait_platform_ready(&client).await;
    let cases = [
        (
            "unmatched",
            fx::UNMATCHED,
            fx::VERDICT_VERSION,
            "component \"nightly\" is matched by no transformer",
        ),
        (
            "unhandled",
            fx::UNHANDLED,
            fx::VERDICT_VERSION,
            fx::UNHANDLED_TRAIT,
        ),
        (
            "incomplete",
            fx::INCOMPLETE,
            fx::VERDICT_VERSION,
            "component \"server\": the output of transformer",
        ),
        (
            "legacy",
            fx::LEGACY,
            fx::LEGACY_VERSION,
            "core v0 modules must move to core v2",
        ),
    ];
    for (name, module, version, _) in &cases {
        create_mr(&client, &opm_mr(&ns.name, name, module, version, json!({}))).await;
    }
    for (name, _, _, want) in &cases {
        let mr = wait_mr(&client, &ns.name, name, "RenderFailed stall", |m| {
            m.status.as_ref().is_some_and(|s| {
                condition(s, "Stalled").is_some_and(|c| c.reason == "RenderFailed")
            })
        })
        .await;
        let msg = &condition(mr.status.as_ref().unwrap(), "Ready")
            .unwrap()
            .message;
        assert!(msg.contains(want), "{name}: {msg}");
    }
    let unhandled = wait_mr(&client, &ns.name, "unhandled", "", |_| true).await;
    let msg = &condition(unhandled.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(
        msg.contains("component \"server\"") && msg.contains("trait"),
        "{msg}"
    );

    // A transformer two enabled catalogs provide.
    create_mr(
        &client,
        &opm_mr(&ns.name, "web", fx::WEB, fx::WEB_VERSIONS[0], json!({})),
    )
    .await;
    wait_mr(&client, &ns.name, "web", "Ready", is_ready).await;
    apply_platform(
        &client,
        &[
            (fx::CATALOG, fx::CATALOG_NEW),
            (fx::EXTRA_CATALOG, fx::EXTRA_CATALOG_VERSION),
        ],
    )
    .await;
    let mr = wait_mr(&client, &ns.name, "web", "duplicate stall", |m| {
        m.status
            .as_ref()
            .is_some_and(|s| condition(s, "Stalled").is_some_and(|c| c.reason == "RenderFailed"))
    })
    .await;
    let msg = &condition(mr.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(
        msg.contains("\"deployment-transformer\" is provided by more than one catalog")
            && msg.contains(fx::CATALOG)
            && msg.contains(fx::EXTRA_CATALOG),
        "{msg}"
    );
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    op.stop().await;
}

/// A Release whose path holds `instance.cue` (kind ModuleInstance) renders through the
/// Platform.
#[tokio::test(flavor = "multi_thread")]
async fn release_with_an_instance_package_renders_through_the_platform() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    wait_platform_ready(&client).await;
    let dir = fx::instance_dir();
    let mut files: Vec<(String, String)> = Vec::new();
    for rel in ["cue.mod/module.cue", "instance.cue", "values.cue"] {
        let text = std::fs::read_to_string(dir.join(rel)).expect("instance fixture");
        // The fixture deploys to `demo`; this test's namespace instead.
        files.push((
            rel.to_owned(),
            text.replace("\"demo\"", &format!("{:?}", ns.name)),
        ));
    }
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let pkg = Package::start().await;
    pkg.publish(&client, &ns.name, "inst", &refs).await;
    create_rel(&client, &release(&ns.name, "inst", "inst", ".", json!({}))).await;
    let rel = wait_rel(&client, &ns.name, "inst", "Ready", |r| {
        r.status
            .as_ref()
            .is_some_and(|s| ready(s) == ("True".into(), "ReconciliationSucceeded".into()))
    })
    .await;
    let inv = rel.status.unwrap().inventory.unwrap();
    assert!(
        inv.entries
            .iter()
            .any(|e| e.kind == "Deployment" && e.component == "server")
    );
    let d = Api::<Deployment>::namespaced(client.clone(), &ns.name)
        .get("web-server")
        .await
        .expect("Deployment applied");
    assert_eq!(
        d.metadata.labels.unwrap()["module-instance.opmodel.dev/name"],
        "web"
    );
    op.stop().await;
}

/// The Platform's CRD refuses every name but `cluster`, the seed's `filter` form (saying to
/// pin `version`), a catalog key without its major, a version that is not exact, and more
/// catalogs than the bound; nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn the_platform_crd_refuses_bad_platforms_with_a_reason() {
    let (env, _ns) = namespace().await;
    let client = env.client().unwrap();
    let api = platforms(&client);
    let create = |name: &str, registry: Value| {
        let api = api.clone();
        let body: Platform = serde_json::from_value(json!({
            "apiVersion": "releases.opmodel.dev/v1alpha1",
            "kind": "Platform",
            "metadata": {"name": name},
            "spec": {"type": "kubernetes", "registry": registry},
        }))
        .unwrap();
        async move { api.create(&Default::default(), &body).await }
    };
    let refused = |r: Result<Platform, kube::Error>| match r {
        Err(kube::Error::Api(s)) => s.message.to_string(),
        other => panic!("accepted: {other:?}"),
    };
    let msg = refused(
        create(
            "other",
            json!({"opmodel.dev/catalogs/opm@v2": {"version": "v2.0.0"}}),
        )
        .await,
    );
    assert!(msg.contains("must be named cluster"), "{msg}");
    let msg = refused(
        create(
            "cluster",
            json!({"opmodel.dev/catalogs/opm@v2": {"filter": {"range": ">=0.5.0"}}}),
        )
        .await,
    );
    assert!(msg.contains("pin the catalog's exact version"), "{msg}");
    let msg = refused(
        create(
            "cluster",
            json!({"opmodel.dev/catalogs/opm": {"version": "v0.5.1"}}),
        )
        .await,
    );
    assert!(msg.contains("with its major version"), "{msg}");
    let msg = refused(
        create(
            "cluster",
            json!({"opmodel.dev/catalogs/opm@v2": {"version": ">=2.0.0"}}),
        )
        .await,
    );
    assert!(msg.contains("version"), "{msg}");
    let many: serde_json::Map<String, Value> = (0..40)
        .map(|i| (format!("x.dev/c{i}@v1"), json!({"version": "v1.0.0"})))
        .collect();
    let msg = refused(create("cluster", Value::Object(many)).await);
    assert!(msg.contains("32"), "{msg}");
}

/// A Platform pinning a catalog version the registry does not have: the Platform is
/// `Ready=False/ResolutionFailed` (stalled, `cue`'s message), and an OPM release waits with
/// `PlatformNotReady` quoting why, instead of failing with a CUE error of its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_platform_that_cannot_resolve_is_not_ready_and_releases_wait() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    apply_platform(&client, &[(fx::CATALOG, "v2.0.0-test.99")]).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let api = platforms(&client);
    let start = Instant::now();
    let status = loop {
        let p = api.get("cluster").await.unwrap();
        let done = p.status.as_ref().filter(|s| {
            s.observed_generation == p.metadata.generation.unwrap_or_default()
                && s.conditions.iter().any(|c| c.type_ == "Stalled")
        });
        if let Some(s) = done {
            break s.clone();
        }
        assert!(
            start.elapsed() < WAIT,
            "Platform not evaluated: {:?}",
            p.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "ResolutionFailed")
    );
    assert!(
        ready.message.contains("v2.0.0-test.99"),
        "{}",
        ready.message
    );
    create_mr(
        &client,
        &opm_mr(&ns.name, "web", fx::WEB, fx::WEB_VERSIONS[0], json!({})),
    )
    .await;
    let mr = wait_mr(&client, &ns.name, "web", "PlatformNotReady", |m| {
        reason_is(m, "PlatformNotReady")
    })
    .await;
    let msg = &condition(mr.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(msg.contains("ResolutionFailed"), "{msg}");
    // Fixing the pin makes the Platform Ready and the release follows.
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    wait_mr(&client, &ns.name, "web", "Ready", is_ready).await;
    op.stop().await;
}

/// Waits for every release of `names` to be Ready, and checks each got its own Deployment
/// (`<name>-server`, labelled with its instance, `replicas` = its index mod 3, as the
/// batching tests create them).
async fn own_deployments_ready(client: &Client, ns: &str, names: &[String]) -> Vec<Deployment> {
    for n in names {
        wait_mr(client, ns, n, "Ready", is_ready).await;
    }
    let deploys = Api::<Deployment>::namespaced(client.clone(), ns);
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let d = deploys
            .get(&format!("{n}-server"))
            .await
            .expect("own Deployment");
        assert_eq!(d.spec.replicas, Some((i % 3) as i32), "{n}");
        let labels = d.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels["module-instance.opmodel.dev/name"], *n);
        out.push(d);
    }
    out
}

/// OPM releases of one module version through one Platform share `cue` runs (SPEC §30
/// batching: attempts in flight, and releases rendered ahead of their attempts), and each
/// still gets exactly its own objects.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_opm_releases_of_one_module_version_are_batched() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    let op = Operator::start(env, &ns.name, |a| {
        a.concurrency = 8;
        a.max_concurrent_renders = 1;
    })
    .await;
    wait_platform_ready(&client).await;
    let names: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        create_mr(
            &client,
            &opm_mr(
                &ns.name,
                n,
                fx::WEB,
                fx::WEB_VERSIONS[1],
                json!({"replicas": i % 3}),
            ),
        )
        .await;
    }
    own_deployments_ready(&client, &ns.name, &names).await;
    let s = op.rt.local.renderer.stats();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::SeqCst);
    let (batches, batched, ahead) = (load(&s.batch_runs), load(&s.batched), load(&s.ahead));
    eprintln!(
        "8 OPM releases: {batches} batch runs holding {batched} attempts and {ahead} rendered ahead, {} cue runs",
        load(&s.runs)
    );
    assert!(
        batches >= 1 && batched + ahead >= 2,
        "no batch: {batches} / {batched} / {ahead}"
    );
    op.stop().await;
}

/// A fleet of OPM releases created at once is rendered ahead in the background (the
/// read-ahead): with one worker and batches of two, the batch of the first attempt finds
/// more releases waiting than it has room for, so further batches run with no attempt
/// waiting on them, and each release still gets exactly its own objects.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_created_at_once_is_rendered_ahead_in_the_background() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    // Created before the operator starts: its first list holds them all.
    let names: Vec<String> = (0..10).map(|i| format!("r{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        let values = json!({"replicas": i % 3, "message": format!("hello {n}")});
        create_mr(
            &client,
            &opm_mr(&ns.name, n, fx::WEB, fx::WEB_VERSIONS[1], values),
        )
        .await;
    }
    let op = Operator::start(env, &ns.name, |a| {
        a.concurrency = 1;
        a.max_render_batch = 2;
    })
    .await;
    let deploys = own_deployments_ready(&client, &ns.name, &names).await;
    for (n, d) in names.iter().zip(deploys) {
        let d = serde_json::to_value(&d).unwrap();
        let env = d
            .pointer("/spec/template/spec/containers/0/env")
            .and_then(|e| e.as_array());
        let message = env.and_then(|e| e.iter().find(|v| v["name"] == "MESSAGE"));
        assert_eq!(
            message.and_then(|v| v["value"].as_str()),
            Some(format!("hello {n}").as_str()),
            "{n} got another release's values"
        );
    }
    let s = op.rt.local.renderer.stats();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::SeqCst);
    let (read_ahead, ahead, runs) = (load(&s.read_ahead_runs), load(&s.ahead), load(&s.runs));
    eprintln!(
        "10 OPM releases, one worker: {runs} cue runs, {read_ahead} read-ahead runs, {ahead} rendered ahead"
    );
    assert!(
        read_ahead >= 1,
        "no batch ran in the background: {read_ahead}"
    );
    assert!(ahead >= 2, "nothing rendered ahead: {ahead}");
    op.stop().await;
}

/// Not a pass/fail test: N OPM ModuleReleases of one module converge, then N plain ones of
/// the same objects, in one operator (defaults: `--concurrency 4`, two `cue` turns), and
/// the times are printed side by side (issue 32's benchmark at a small N; `OPM_BENCH_N`,
/// default 50). Run with `-- --ignored opm::converge_side_by_side --nocapture`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement, run by hand"]
async fn converge_side_by_side() {
    let _only = PLATFORM.lock().await;
    OpmFixtures::global().await;
    let n: usize = std::env::var("OPM_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    apply_platform(&client, &[(fx::CATALOG, fx::CATALOG_NEW)]).await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    wait_platform_ready(&client).await;
    let mut times = Vec::new();
    for (kind, module, version) in [
        ("opm", fx::WEB, fx::WEB_VERSIONS[0]),
        ("plain", "example.com/modules/web@v0", "v0.2.1"),
    ] {
        let stats = op.rt.local.renderer.stats();
        let runs0 = stats.runs.load(std::sync::atomic::Ordering::SeqCst);
        let start = Instant::now();
        for i in 0..n {
            let name = format!("{kind}-{i}");
            create_mr(
                &client,
                &opm_mr(&ns.name, &name, module, version, json!({"replicas": i % 4})),
            )
            .await;
        }
        for i in 0..n {
            wait_mr(&client, &ns.name, &format!("{kind}-{i}"), "Ready", is_ready).await;
        }
        let took = start.elapsed();
        let runs = stats.runs.load(std::sync::atomic::Ordering::SeqCst) - runs0;
        times.push(took);
        eprintln!("{n} {kind} ModuleReleases Ready in {took:?} ({runs} cue runs)");
    }
    eprintln!(
        "OPM / plain = {:.2}",
        times[0].as_secs_f64() / times[1].as_secs_f64()
    );
    op.stop().await;
}

/// A `Release` package of the retired core v0 (its module file depends on
/// `opmodel.dev/core@v0`, the seed's kernel era) stalls `RenderFailed` saying core v0
/// modules must move to core v2, before any `cue` run (no Platform needed).
#[tokio::test(flavor = "multi_thread")]
async fn a_core_v0_release_package_stalls_saying_to_move_to_v2() {
    let (env, ns) = namespace().await;
    let client = env.client().unwrap();
    let op = Operator::start(env, &ns.name, |_| {}).await;
    let files = vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/releases/old@v0\"\nlanguage: version: \"v0.17.0\"\ndeps: \"opmodel.dev/core@v0\": v: \"v0.4.0\"\n".to_string(),
        ),
        (
            "release.cue",
            "package release\n\nimport core \"opmodel.dev/core/v1alpha1/modulerelease@v1\"\n\ncore.#ModuleRelease\n".to_string(),
        ),
    ];
    let pkg = Package::start().await;
    pkg.publish(&client, &ns.name, "old", &files).await;
    create_rel(&client, &release(&ns.name, "old", "old", ".", json!({}))).await;
    let rel = wait_rel(&client, &ns.name, "old", "stall", |r| {
        r.status
            .as_ref()
            .is_some_and(|s| condition(s, "Stalled").is_some_and(|c| c.reason == "RenderFailed"))
    })
    .await;
    let msg = &condition(rel.status.as_ref().unwrap(), "Ready")
        .unwrap()
        .message;
    assert!(
        msg.contains("core v0 modules must move to core v2"),
        "{msg}"
    );
    op.stop().await;
}
