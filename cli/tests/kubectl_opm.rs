//! `kubectl opm` (SPEC §29) as a user runs it: the real binary against the real test API
//! server, with the real `cue`, the CUE registry serving the example module, an artifact
//! server for Release packages, and the operator reconciling in-process.

mod support;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::*;

fn j(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// A ready ModuleRelease: get (table, wide, yaml, json), tree, why, events, and diff of no
/// change, a values change and a version change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_module_release_seen_and_diffed() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({"message": "hello"}), json!({})),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "web Ready",
        is_ready,
    )
    .await;
    let n = [ns.name.as_str()];

    let r = opm(env, Some(&ns.name), &["get"]).await;
    assert_eq!(r.code, 0, "{r}");
    golden("get.txt", &normalise(&r.stdout, &n));
    let r = opm(env, Some(&ns.name), &["get", "mr", "-o", "wide"]).await;
    assert_eq!(r.code, 0, "{r}");
    golden("get-wide.txt", &normalise(&r.stdout, &n));
    let r = opm(env, Some(&ns.name), &["get", "mr/web", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{r}");
    let v = j(&r.stdout);
    assert_eq!(v["kind"], "ModuleRelease");
    assert_eq!(ready(&v).0, "True");
    assert!(
        v.pointer("/metadata/managedFields").is_none(),
        "managedFields are left out"
    );
    let r = opm(env, Some(&ns.name), &["get", "mr", "web", "-o", "yaml"]).await;
    assert_eq!(r.code, 0, "{r}");
    let y: Value = serde_saphyr::from_str(&r.stdout).unwrap();
    assert_eq!(y["spec"]["values"]["message"], "hello");
    // As a kubectl plugin: the real kubectl finds `kubectl-opm` on PATH.
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-opm"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tokio::process::Command::new(opm_testenv::tools::kubectl_bin().unwrap())
        .args([
            "opm",
            "get",
            "mr/web",
            "-o",
            "json",
            "-n",
            &ns.name,
            "--kubeconfig",
        ])
        .arg(env.kubeconfig_path())
        .env("PATH", path)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        j(&String::from_utf8_lossy(&out.stdout))["metadata"]["name"],
        "web"
    );
    let r = opm(env, Some(&ns.name), &["get", "mr/nope"]).await;
    assert_eq!(r.code, 2, "{r}");
    assert!(
        r.stderr
            .contains(&format!("ModuleRelease {}/nope not found", ns.name)),
        "{r}"
    );

    let r = opm(env, Some(&ns.name), &["tree", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    golden("tree.txt", &normalise(&r.stdout, &n));
    let r = opm(env, Some(&ns.name), &["tree", "mr/web", "-o", "json"]).await;
    let t = j(&r.stdout);
    let comps: Vec<&str> = t["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(comps, ["config", "identity", "web"]);
    assert_eq!(t["components"][0]["objects"][0]["kind"], "ConfigMap");
    assert_eq!(t["components"][0]["objects"][0]["health"], "Current");

    // A release depending on it: tree shows the edge with the dependency's Ready.
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "api",
            json!({}),
            json!({"dependsOn": [{"name": "web"}]}),
        ),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "api",
        "api Ready",
        is_ready,
    )
    .await;
    let r = opm(env, Some(&ns.name), &["tree", "mr/api"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.starts_with(&format!("ModuleRelease {0}/api (Ready=True ReconciliationSucceeded)\n├── dependsOn ModuleRelease {0}/web (Ready=True ReconciliationSucceeded)\n", ns.name)),
        "{r}"
    );

    // YAML is the same document as JSON, for every verb that prints one.
    for verb in [
        &["tree", "mr/web"][..],
        &["why", "mr/web"],
        &["events", "mr/web"],
        &["diff", "mr/web"],
    ] {
        let y = opm(env, Some(&ns.name), &[verb, &["-o", "yaml"]].concat()).await;
        let js = opm(env, Some(&ns.name), &[verb, &["-o", "json"]].concat()).await;
        assert_eq!((y.code, js.code), (0, 0), "{y}\n{js}");
        let y: Value = serde_saphyr::from_str(&y.stdout).unwrap();
        let mut js = j(&js.stdout);
        if verb[0] == "why" {
            // Relative times ("5s ago") may tick between the two runs.
            js["conditions"] = Value::Null;
            js["nextCheckAt"] = Value::Null;
            let mut y = y.clone();
            y["conditions"] = Value::Null;
            y["nextCheckAt"] = Value::Null;
            assert_eq!(y, js, "{verb:?}");
        } else if verb[0] != "events" {
            assert_eq!(y, js, "{verb:?}");
        } else {
            assert_eq!(
                y["items"].as_array().map(Vec::len),
                js["items"].as_array().map(Vec::len)
            );
        }
    }

    let r = opm(env, Some(&ns.name), &["why", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    golden("why-ready.txt", &normalise(&r.stdout, &n));
    let r = opm(env, Some(&ns.name), &["why", "mr/web", "-o", "json"]).await;
    assert_eq!(j(&r.stdout)["state"], "Ready", "{r}");

    let r = opm(env, Some(&ns.name), &["events", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    let header = r.stdout.lines().next().unwrap_or_default();
    assert_eq!(
        normalise(header, &n),
        "LAST SEEN   TYPE   REASON   ACTION   MESSAGE",
        "{r}"
    );
    assert!(
        r.stdout.contains("Applied") && r.stdout.contains("Applied 4 resources"),
        "{r}"
    );
    let r = opm(env, Some(&ns.name), &["events", "mr/web", "-o", "json"]).await;
    let evs = j(&r.stdout);
    assert!(
        evs["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["regarding"]["name"] == "web"),
        "{r}"
    );

    // No change: exit 0.
    let r = opm(env, Some(&ns.name), &["diff", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    eprintln!(
        "figure: `kubectl opm diff mr/web` (4 objects, cue render + 4 dry-runs) took {:?}",
        r.elapsed
    );
    assert!(
        r.stdout
            .contains("0 to create, 0 to change, 0 to prune, 0 to orphan, 0 refused, 4 unchanged"),
        "{r}"
    );

    // A values change: exit 1, the field with old → new.
    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(&values, "message: bye\nreplicas: 2\n").unwrap();
    let r = opm(
        env,
        Some(&ns.name),
        &["diff", "mr/web", "--values", values.to_str().unwrap()],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    golden("diff-values.txt", &normalise(&r.stdout, &n));
    let r = opm(
        env,
        Some(&ns.name),
        &[
            "diff",
            "mr/web",
            "--values",
            values.to_str().unwrap(),
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    let d = j(&r.stdout);
    let cm = d["changed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "ConfigMap")
        .expect("ConfigMap changed");
    assert_eq!(
        cm["fields"][0],
        json!({"path": "/data/message", "old": "hello", "new": "bye"})
    );
    let dep = d["changed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "Deployment")
        .expect("Deployment changed");
    assert_eq!(
        dep["fields"][0],
        json!({"path": "/spec/replicas", "old": 1, "new": 2})
    );
    assert_eq!(d["unchanged"], 2);

    // A version change: the example module writes the version into its ConfigMap.
    let r = opm(
        env,
        Some(&ns.name),
        &["diff", "mr/web", "--version", "v0.2.0"],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout
            .contains("/data/moduleVersion: \"v0.2.1\" → \"v0.2.0\""),
        "{r}"
    );
    // A version the registry does not have: an error, exit 2.
    let r = opm(
        env,
        Some(&ns.name),
        &["diff", "mr/web", "--version", "v0.9.9"],
    )
    .await;
    assert_eq!(r.code, 2, "{r}");
    assert!(r.stderr.contains("render failed"), "{r}");

    // Nothing was written by any of it.
    let live = wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "unchanged",
        is_ready,
    )
    .await;
    assert_eq!(live["metadata"]["generation"], 1);
    let cm: k8s_openapi::api::core::v1::ConfigMap = Api::namespaced(ns.client.clone(), &ns.name)
        .get("web-config")
        .await
        .unwrap();
    assert_eq!(cm.data.unwrap()["message"], "hello");

    // A managed object deleted behind the operator's back (drift mode Warn keeps it gone).
    Api::<k8s_openapi::api::core::v1::Service>::namespaced(ns.client.clone(), &ns.name)
        .delete("web", &Default::default())
        .await
        .unwrap();
    // An attempt now (the drift check of an unchanged release) finds it missing.
    let r = opm(
        env,
        Some(&ns.name),
        &["reconcile", "mr/web", "--wait", "--timeout", "60s"],
    )
    .await;
    assert_eq!(r.code, 0, "drift mode Warn leaves Ready alone: {r}");
    let r = opm(env, Some(&ns.name), &["tree", "mr/web"]).await;
    assert!(
        r.stdout.contains(&format!(
            "Drifted: 1 resource(s) drifted from desired state: Service/{}/web (missing)\n",
            ns.name
        )),
        "{r}"
    );
    assert!(
        r.stdout.contains(&format!(
            "Service/{}/web: Absent (in the inventory, not in the cluster), drifted\n",
            ns.name
        )),
        "{r}"
    );
    assert!(
        !r.stdout.contains("web-config: Current (applied), drifted"),
        "{r}"
    );
    op.stop().await;
}

/// `get -A` lists releases of every namespace with a NAMESPACE column; without `-A` only
/// the namespace's own. No operator: releases it has not seen show `-`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_across_namespaces() {
    let (env, a) = namespace().await;
    let b = env.namespace().await.unwrap();
    create_mr(
        &a.client,
        &module_release(&a.name, "one", json!({}), json!({})),
    )
    .await;
    create_mr(
        &b.client,
        &module_release(&b.name, "two", json!({}), json!({})),
    )
    .await;
    create_rel(&b.client, &release(&b.name, "three", "src", ".", json!({}))).await;
    let r = opm(env, None, &["get", "-A"]).await;
    assert_eq!(r.code, 0, "{r}");
    // Other tests' releases share the cluster: keep the header and our namespaces' rows.
    let mine: String = r
        .stdout
        .lines()
        .enumerate()
        .filter(|(i, l)| {
            *i == 0
                || l.starts_with(&format!("{} ", a.name))
                || l.starts_with(&format!("{} ", b.name))
        })
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    golden(
        "get-all-namespaces.txt",
        &normalise(&mine, &[&a.name, &b.name]),
    );
    let r = opm(env, Some(&b.name), &["get", "rel"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(
        normalise(&r.stdout, &[&b.name]),
        "NAME   READY   REASON   REVISION   AGE   NEXT RETRY\nthree   -   -   -   <age>   -\n"
    );
    let r = opm(env, Some(&a.name), &["get", "rel"]).await;
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r}");
    assert!(
        r.stderr
            .contains(&format!("No releases found in namespace {}", a.name)),
        "{r}"
    );
    // Nobody handles the request here: --wait gives up at --timeout with exit 1.
    let r = opm(
        env,
        Some(&a.name),
        &["reconcile", "mr/one", "--wait", "--timeout", "2s"],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout
            .contains("timed out after 2s waiting for the operator to handle the request"),
        "{r}"
    );
    let r = opm(env, Some(&a.name), &["get", "deployments"]).await;
    assert_eq!(r.code, 2, "{r}");
    assert!(r.stderr.contains("unknown kind \"deployments\""), "{r}");
}

/// suspend / resume patch spec.suspend; a reconcile request is refused while suspended,
/// and once resumed `reconcile --wait` waits for lastHandledReconcileAt and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume_and_reconcile_wait() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({})),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "Ready",
        is_ready,
    )
    .await;

    let r = opm(env, Some(&ns.name), &["suspend", "mr/web"]).await;
    assert_eq!(
        (r.code, r.stdout.clone()),
        (0, format!("ModuleRelease {}/web suspended\n", ns.name)),
        "{r}"
    );
    let o = wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "Suspended",
        |o| ready(o).1 == "Suspended",
    )
    .await;
    assert_eq!(o["spec"]["suspend"], true);
    let r = opm(env, Some(&ns.name), &["why", "mr/web", "-o", "json"]).await;
    assert_eq!(j(&r.stdout)["state"], "Suspended", "{r}");
    let r = opm(env, Some(&ns.name), &["reconcile", "mr/web", "--wait"]).await;
    assert_eq!(r.code, 1, "{r}");
    assert!(r.stdout.contains("is suspended"), "{r}");

    let r = opm(env, Some(&ns.name), &["resume", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "Ready again",
        is_ready,
    )
    .await;
    let r = opm(
        env,
        Some(&ns.name),
        &["reconcile", "mr/web", "--wait", "--timeout", "60s"],
    )
    .await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "ModuleRelease {}/web reconciled: Ready=True",
            ns.name
        )),
        "{r}"
    );
    let requested = r
        .stdout
        .lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_string();
    let o = wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "handled",
        is_ready,
    )
    .await;
    assert_eq!(o["status"]["lastHandledReconcileAt"], requested.as_str());
    assert_eq!(
        o["metadata"]["annotations"]["reconcile.opmodel.dev/requestedAt"],
        requested.as_str()
    );
    // Without --wait it only asks.
    let r = opm(env, Some(&ns.name), &["reconcile", "mr", "web"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(r.stdout.contains("reconcile requested at"), "{r}");
    op.stop().await;
}

/// A release whose values break the module's schema stalls: `reconcile --wait` exits 1 and
/// says so; `why` names the stall, the failure from history and what would re-trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_release_reconcile_fails_and_why_explains() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "bad", json!({"replicas": 99}), json!({})),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "bad",
        "stalled",
        |o| ready(o).1 == "RenderFailed",
    )
    .await;
    let r = opm(
        env,
        Some(&ns.name),
        &["reconcile", "mr/bad", "--wait", "--timeout", "60s"],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "ModuleRelease {}/bad failed: Ready=False RenderFailed (stalled)",
            ns.name
        )),
        "{r}"
    );

    let r = opm(env, Some(&ns.name), &["why", "mr/bad"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("is stalled (RenderFailed): it will not be retried on a timer until"),
        "{r}"
    );
    assert!(
        r.stdout.contains("Last failures (newest first):\n  #")
            && r.stdout.contains("during render:"),
        "{r}"
    );
    assert!(r.stdout.contains("Stalled is True (RenderFailed)"), "{r}");
    assert!(
        r.stdout
            .contains("- a change of its spec (a new generation)"),
        "{r}"
    );
    let w = j(&opm(env, Some(&ns.name), &["why", "mr/bad", "-o", "json"])
        .await
        .stdout);
    assert_eq!(w["state"], "Stalled");
    assert!(
        w["failures"][0]["message"]
            .as_str()
            .unwrap()
            .contains("replicas"),
        "{w}"
    );
    assert!(w["nextRetryAt"].as_str().unwrap().contains("(in "), "{w}");

    // diff of the stalled release: the render fails, an error (exit 2) naming the field.
    let r = opm(env, Some(&ns.name), &["diff", "mr/bad"]).await;
    assert_eq!(r.code, 2, "{r}");
    assert!(
        r.stderr.contains("render failed") && r.stderr.contains("replicas"),
        "{r}"
    );
    assert!(r.stdout.is_empty(), "{r}");

    let r = opm(env, Some(&ns.name), &["events", "mr/bad"]).await;
    // The layout is ours; cue's text (file positions, cache paths) is not.
    let cue_text = regex::Regex::new(r"(CUE evaluation failed: _m.#config.replicas:).*").unwrap();
    let table = cue_text.replace_all(&r.stdout, "$1 …").into_owned();
    golden("events-stalled.txt", &normalise(&table, &[&ns.name]));
    // events shows the Warning once (SPEC §11: no storm while stalled).
    let r = opm(env, Some(&ns.name), &["events", "mr/bad", "-o", "wide"]).await;
    assert_eq!(r.code, 0, "{r}");
    let warnings: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains(" Warning "))
        .collect();
    assert_eq!(warnings.len(), 1, "{r}");
    assert!(
        warnings[0].contains("RenderFailed") && warnings[0].contains("Render"),
        "{r}"
    );

    // get shows the stall and its retry.
    let r = opm(env, Some(&ns.name), &["get", "mr"]).await;
    let row = r.stdout.lines().nth(1).unwrap();
    assert!(
        row.contains("False") && row.contains("RenderFailed") && row.contains(" in "),
        "{r}"
    );
    op.stop().await;
}

/// A Release whose artifact server answers 500 fails transiently and backs off: `why` says
/// so, with the failure count, the next attempt, and the source's artifact as a trigger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_on_a_backing_off_release() {
    let (env, ns) = namespace().await;
    let server = opm_testenv::ArtifactServer::start().await.unwrap();
    publish(&server, &ns.client, &ns.name, "src", &package_files(&json!({"app": {"cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}}}))).await;
    // Every artifact of this namespace fails.
    let src = opm_testenv::flux::get_source(
        &ns.client,
        &ns.name,
        opm_testenv::flux::SourceKind::OciRepository,
        "src",
    )
    .await
    .unwrap();
    let url = src
        .data
        .pointer("/status/artifact/url")
        .and_then(Value::as_str)
        .unwrap()
        .to_string();
    let path = url
        .strip_prefix(&server.base_url())
        .unwrap()
        .trim_start_matches('/')
        .to_string();
    server.set_fault(&path, opm_testenv::Fault::status(500));
    let op = Operator::start(env, &ns.name).await;
    create_rel(
        &ns.client,
        &release(&ns.name, "shop", "src", ".", json!({})),
    )
    .await;
    wait_for(
        &ns.client,
        "Release",
        &ns.name,
        "shop",
        "backing off",
        |o| ready(o).1 == "FetchFailed" && o.pointer("/status/failureCounters/reconcile").is_some(),
    )
    .await;
    let r = opm(env, Some(&ns.name), &["why", "rel/shop"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("is failing (FetchFailed) and backing off after"),
        "{r}"
    );
    assert!(r.stdout.contains("failed attempt"), "{r}");
    assert!(
        r.stdout.contains(&format!(
            "- a new artifact (revision or digest) of its source OCIRepository {}/src",
            ns.name
        )),
        "{r}"
    );
    assert!(r.stdout.contains("during fetch:"), "{r}");
    let w = j(
        &opm(env, Some(&ns.name), &["why", "rel/shop", "-o", "json"])
            .await
            .stdout,
    );
    assert_eq!(w["state"], "BackingOff", "{w}");
    op.stop().await;
}

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn secret(name: &str, password: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"password": password, "user": "admin"}})
}

/// A Release from a Flux source: diff against its own artifact is no change; a local
/// package (`--path`) that drops an object, changes a Secret value and renders an object
/// someone else created shows the prune, the Secret as "changed" only (neither value ever
/// printed, in text or JSON), the refusal, and exits 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_of_a_release_prune_secret_and_ownership() {
    let (env, ns) = namespace().await;
    let server = opm_testenv::ArtifactServer::start().await.unwrap();
    let mut frozen = cm("frozen", json!({"k": "1"}));
    frozen["immutable"] = json!(true);
    let old = json!({"app": {"a": cm("a", json!({"k": "1"})), "b": cm("b", json!({"k": "2"})), "creds": secret("creds", "old-secret-value-1"), "frozen": frozen}});
    publish(&server, &ns.client, &ns.name, "src", &package_files(&old)).await;
    let op = Operator::start(env, &ns.name).await;
    create_rel(
        &ns.client,
        &release(&ns.name, "shop", "src", ".", json!({"prune": true})),
    )
    .await;
    wait_for(&ns.client, "Release", &ns.name, "shop", "Ready", is_ready).await;
    // An object nobody's release created.
    let foreign: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(cm("foreign", json!({"x": "y"}))).unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();

    let r = opm(env, Some(&ns.name), &["diff", "rel/shop"]).await;
    assert_eq!(
        r.code, 0,
        "the source's own artifact is what is applied: {r}"
    );
    assert!(r.stdout.contains("4 unchanged"), "{r}");

    let mut refrozen = cm("frozen", json!({"k": "2"}));
    refrozen["immutable"] = json!(true);
    let new = json!({"app": {"a": cm("a", json!({"k": "1"})), "creds": secret("creds", "new-secret-value-2"), "foreign": cm("foreign", json!({"x": "z"})), "frozen": refrozen.clone()}});
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path(), &new);
    let path = dir.path().to_str().unwrap();
    let r = opm(env, Some(&ns.name), &["diff", "rel/shop", "--path", path]).await;
    assert_eq!(r.code, 1, "{r}");
    golden("diff-release.txt", &normalise(&r.stdout, &[&ns.name]));
    for secret_text in [
        "old-secret-value-1",
        "new-secret-value-2",
        "b2xkLXNlY3JldC12YWx1ZS0x",
        "bmV3LXNlY3JldC12YWx1ZS0y",
    ] {
        assert!(
            !r.stdout.contains(secret_text) && !r.stderr.contains(secret_text),
            "{secret_text} printed: {r}"
        );
    }
    let r = opm(
        env,
        Some(&ns.name),
        &["diff", "rel/shop", "--path", path, "-o", "json"],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    for secret_text in [
        "old-secret-value-1",
        "new-secret-value-2",
        "b2xkLXNlY3JldC12YWx1ZS0x",
        "bmV3LXNlY3JldC12YWx1ZS0y",
    ] {
        assert!(
            !r.stdout.contains(secret_text),
            "{secret_text} printed: {r}"
        );
    }
    let d = j(&r.stdout);
    assert_eq!(
        d["pruned"],
        json!([{"kind": "ConfigMap", "namespace": ns.name, "name": "b", "version": "v1"}])
    );
    assert_eq!(d["changed"][0]["kind"], "Secret");
    assert_eq!(
        d["changed"][0]["fields"],
        json!([{"path": "/data/password", "secret": true}]),
        "only the changed key"
    );
    let refused: Vec<(&str, &str)> = d["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["name"].as_str().unwrap(), x["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        refused,
        [("foreign", "OwnershipConflict"), ("frozen", "ApplyFailed")]
    );
    assert!(
        d["refused"][1]["message"]
            .as_str()
            .unwrap()
            .contains("immutable"),
        "{d}"
    );
    assert_eq!(d["unchanged"], 1);

    // With releases.opmodel.dev/force: enabled the immutable object would be recreated.
    refrozen["metadata"]["annotations"] = json!({"releases.opmodel.dev/force": "enabled"});
    let forced = json!({"app": {"a": cm("a", json!({"k": "1"})), "b": cm("b", json!({"k": "2"})), "creds": secret("creds", "old-secret-value-1"), "frozen": refrozen}});
    let dirf = tempfile::tempdir().unwrap();
    write_package(dirf.path(), &forced);
    let r = opm(
        env,
        Some(&ns.name),
        &["diff", "rel/shop", "--path", dirf.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "~ ConfigMap/{}/frozen (would be deleted and recreated: ",
            ns.name
        )),
        "{r}"
    );

    // With prune off the dropped object would be orphaned, not deleted: still a change.
    Api::<opm_core::api::Release>::namespaced(ns.client.clone(), &ns.name)
        .patch(
            "shop",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"spec": {"prune": false}})),
        )
        .await
        .unwrap();
    let only_drop = json!({"app": {"a": cm("a", json!({"k": "1"})), "creds": secret("creds", "old-secret-value-1"), "frozen": frozen.clone()}});
    let dir2 = tempfile::tempdir().unwrap();
    write_package(dir2.path(), &only_drop);
    let r = opm(
        env,
        Some(&ns.name),
        &["diff", "rel/shop", "--path", dir2.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "? ConfigMap/{}/b (orphan) (spec.prune is false)",
            ns.name
        )),
        "{r}"
    );
    assert!(
        r.stdout.contains("3 unchanged"),
        "an unchanged Secret value is unchanged: {r}"
    );
    op.stop().await;
}

/// The dry-run under an identity that may not do it is a clear error, exit 2: a user
/// (`--as`) who may read but not patch, and `--as-release` with a ServiceAccount that has
/// no rights at all (what the operator would stall on, before anything merges).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_dry_run_is_a_clear_error() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({})),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "Ready",
        is_ready,
    )
    .await;
    op.stop().await;
    for sa in ["viewer", "deployer"] {
        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap();
        Api::namespaced(ns.client.clone(), &ns.name)
            .create(&PostParams::default(), &sa)
            .await
            .unwrap();
    }
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "read"},
        "rules": [
            {"apiGroups": ["releases.opmodel.dev"], "resources": ["modulereleases"], "verbs": ["get", "list"]},
            {"apiGroups": ["", "apps"], "resources": ["configmaps", "serviceaccounts", "services", "deployments"], "verbs": ["get", "list"]},
        ],
    }))
    .unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "read"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
        "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": ns.name}],
    }))
    .unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let viewer = format!("system:serviceaccount:{}:viewer", ns.name);
    // RBAC bindings take effect asynchronously in the authorizer cache.
    let mut r = opm(env, Some(&ns.name), &["diff", "mr/web", "--as", &viewer]).await;
    for _ in 0..20 {
        if r.stderr.contains("dry-run") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        r = opm(env, Some(&ns.name), &["diff", "mr/web", "--as", &viewer]).await;
    }
    assert_eq!(r.code, 2, "{r}");
    assert!(
        r.stderr.contains("the server-side dry-run of")
            && r.stderr.contains(&format!("is forbidden for {viewer}")),
        "{r}"
    );
    assert!(r.stdout.is_empty(), "no partial report: {r}");

    Api::<opm_core::api::ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"spec": {"serviceAccountName": "deployer"}})),
        )
        .await
        .unwrap();
    let r = opm(env, Some(&ns.name), &["diff", "mr/web", "--as-release"]).await;
    assert_eq!(r.code, 2, "{r}");
    let deployer = format!("system:serviceaccount:{}:deployer", ns.name);
    assert!(
        r.stderr.contains(&format!("is forbidden for {deployer}"))
            && r.stderr.contains("ImpersonationFailed"),
        "{r}"
    );
    // As the admin it works (exit 0: no change).
    let r = opm(env, Some(&ns.name), &["diff", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");

    // Once the ServiceAccount may apply what the release renders, --as-release passes.
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "apply"},
        "rules": [{"apiGroups": ["", "apps"], "resources": ["configmaps", "serviceaccounts", "services", "deployments"], "verbs": ["get", "list", "watch", "create", "patch", "update"]}],
    }))
    .unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "apply"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "apply"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": ns.name}],
    }))
    .unwrap();
    Api::namespaced(ns.client.clone(), &ns.name)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let mut r = opm(env, Some(&ns.name), &["diff", "mr/web", "--as-release"]).await;
    for _ in 0..20 {
        if r.code != 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        r = opm(env, Some(&ns.name), &["diff", "mr/web", "--as-release"]).await;
    }
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains(&format!("(dry-run as {deployer}): 0 to create")),
        "{r}"
    );
}

/// `render` is `opm-operator render`; completion scripts for three shells; --help has
/// examples and exit codes; bad arguments exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_completion_and_help() {
    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("v.yaml");
    std::fs::write(&values, "message: rendered\n").unwrap();
    let r = opm_bare(&[
        "render",
        "--module",
        "example.com/modules/web@v0.2.1",
        "--values",
        values.to_str().unwrap(),
        "--name",
        "shop",
        "--namespace",
        "demo",
        "--cache-dir",
        dir.path().to_str().unwrap(),
    ])
    .await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .starts_with("# component: config, key: configmap\n"),
        "{r}"
    );
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&r.stdout).unwrap();
    assert_eq!(docs.len(), 4);
    assert_eq!(docs[0]["data"]["message"], "rendered");
    assert_eq!(docs[0]["metadata"]["name"], "shop-config");

    for shell in ["bash", "zsh", "fish"] {
        let r = opm_bare(&["completion", shell]).await;
        assert_eq!(r.code, 0, "{r}");
        for verb in ["reconcile", "diff", "why"] {
            assert!(r.stdout.contains(verb), "{shell} completion lacks {verb}");
        }
    }
    let r = opm_bare(&["--help"]).await;
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("Examples:") && r.stdout.contains("Exit codes: 0 success or no change"),
        "{r}"
    );
    let r = opm_bare(&["diff"]).await;
    assert_eq!(r.code, 2, "{r}");
    let r = opm_bare(&["why", "mr/a/b", "--kubeconfig", "/nonexistent"]).await;
    assert_eq!(r.code, 2, "{r}");
    assert!(r.stderr.contains("is not KIND/NAME"), "{r}");
    let r = opm_bare(&["why", "mr/a", "--kubeconfig", "/nonexistent"]).await;
    assert_eq!(r.code, 2, "{r}");
    assert!(r.stderr.contains("reading kubeconfig /nonexistent"), "{r}");
}

/// `get --watch` prints the table, then a row when a release changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_changes() {
    use tokio::io::AsyncBufReadExt;
    let (env, ns) = namespace().await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "web", json!({}), json!({})),
    )
    .await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-opm"))
        .args([
            "get",
            "mr",
            "--watch",
            "-o",
            "wide",
            "-n",
            &ns.name,
            "--kubeconfig",
        ])
        .arg(env.kubeconfig_path())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || {
        tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("a line in time")
            .unwrap()
            .expect("a line")
    };
    assert!(next().await.starts_with("NAME "));
    let row = next().await;
    assert!(row.starts_with("web ") && row.contains(" false "), "{row}");
    let r = opm(env, Some(&ns.name), &["suspend", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    // No operator: the row changes with the spec (a new resourceVersion), still not Ready.
    let row = next().await;
    assert!(row.starts_with("web ") && row.contains(" true "), "{row}");
    child.kill().await.unwrap();
}

/// Values from a Secret (`valuesFrom`) that land in a ConfigMap: when the Secret changes,
/// diff says the field changed and prints neither the old nor the new string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_never_prints_strings_from_a_values_secret() {
    use k8s_openapi::api::core::v1::Secret;
    let (env, ns) = namespace().await;
    let secret = |text: &str| -> Secret {
        serde_json::from_value(
            json!({"metadata": {"name": "vals"}, "stringData": {"values.yaml": text}}),
        )
        .unwrap()
    };
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    secrets
        .create(
            &PostParams::default(),
            &secret("message: first-secret-message\n"),
        )
        .await
        .unwrap();
    let op = Operator::start(env, &ns.name).await;
    let mr = module_release(
        &ns.name,
        "web",
        json!(null),
        json!({"valuesFrom": [{"kind": "Secret", "name": "vals"}]}),
    );
    create_mr(&ns.client, &mr).await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "Ready",
        is_ready,
    )
    .await;
    op.stop().await;
    let r = opm(env, Some(&ns.name), &["diff", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");

    secrets
        .replace(
            "vals",
            &PostParams::default(),
            &secret("message: second-secret-message\n"),
        )
        .await
        .unwrap();
    for format in ["table", "json"] {
        let r = opm(env, Some(&ns.name), &["diff", "mr/web", "-o", format]).await;
        assert_eq!(r.code, 1, "{r}");
        for text in ["first-secret-message", "second-secret-message"] {
            assert!(
                !r.stdout.contains(text) && !r.stderr.contains(text),
                "{text} printed: {r}"
            );
        }
        if format == "table" {
            assert!(
                r.stdout
                    .contains("/data/message: changed (Secret value not shown)"),
                "{r}"
            );
        } else {
            let d = j(&r.stdout);
            assert_eq!(
                d["changed"][0]["fields"],
                json!([{"path": "/data/message", "secret": true}]),
                "{d}"
            );
        }
    }
}

/// SPEC §29/§30: `kubectl opm diff` of an OPM release renders through the cluster's Platform
/// (read by default): nothing to change once applied; a values change shows the Deployment's
/// field change (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_of_an_opm_release_with_a_values_change() {
    use opm_testenv::opm::{self as fx, OpmFixtures};
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    ensure_platform(&ns.client).await;
    let op = Operator::start(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "web",
            json!({"replicas": 1}),
            json!({"module": {"path": fx::WEB, "version": fx::WEB_VERSIONS[0]}}),
        ),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "web",
        "Ready",
        is_ready,
    )
    .await;
    let r = opm(env, Some(&ns.name), &["diff", "mr/web"]).await;
    assert_eq!(r.code, 0, "{r}");
    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(&values, "replicas: 3\n").unwrap();
    let r = opm(
        env,
        Some(&ns.name),
        &[
            "diff",
            "mr/web",
            "--values",
            values.to_str().unwrap(),
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 1, "{r}");
    let d = j(&r.stdout);
    let changed = d["changed"].as_array().unwrap();
    assert!(
        changed.iter().any(
            |c| c["kind"] == "Deployment" && c["fields"].to_string().contains("/spec/replicas")
        ),
        "{r}"
    );
    op.stop().await;
}

/// SPEC §24: a status message quoting what a tenant wrote reaches the terminal without
/// control characters. A tenant who may write its release's status (or an old operator
/// that did not filter) puts an ESC sequence, a BEL and a carriage return in `Ready`'s
/// message and a history entry; `why`, `get -o wide` and `get -o yaml` print none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_messages_never_reach_the_terminal() {
    let (env, ns) = namespace().await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "esc", json!({}), json!({})),
    )
    .await;
    let hostile = "render failed: \u{1b}[2J\u{1b}]0;owned\u{7}cleared\rover \u{9b}31mred";
    let api: Api<opm_core::api::ModuleRelease> = Api::namespaced(ns.client.clone(), &ns.name);
    api.patch_status(
        "esc",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "RenderFailed",
                "message": hostile, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "history": [{"sequence": 1, "action": "reconcile", "phase": "render",
                "message": hostile}],
        }})),
    )
    .await
    .expect("status written");
    for args in [
        vec!["why", "mr/esc"],
        vec!["get", "mr", "-o", "wide"],
        vec!["get", "mr/esc", "-o", "yaml"],
        vec!["get", "mr/esc", "-o", "json"],
    ] {
        let r = opm(env, Some(&ns.name), &args).await;
        assert_eq!(r.code, 0, "{args:?}: {r}");
        let bad: Vec<char> = r
            .stdout
            .chars()
            .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
            .collect();
        assert!(bad.is_empty(), "{args:?} printed {bad:?}:\n{}", r.stdout);
        if args[0] == "why" {
            assert!(
                r.stdout
                    .contains("render failed: [2J]0;ownedclearedover 31mred"),
                "{}",
                r.stdout
            );
        }
    }
}

/// Issue 31 item 9: a `valuesFrom` Secret string the module *transforms* (upper case,
/// base64) lands in a ConfigMap without containing the Secret's text, so scrubbing by
/// the text missed it and `kubectl opm diff` printed both the old and the new derived
/// values. The diff now renders a second time with each Secret value changed and hides
/// every field that moves with it: "changed (Secret value not shown)", nothing derived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_never_prints_values_transformed_from_a_values_secret() {
    use k8s_openapi::api::core::v1::Secret;
    let (env, ns) = namespace().await;
    let module = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(module.path().join("cue.mod")).unwrap();
    std::fs::write(
        module.path().join("cue.mod/module.cue"),
        "module: \"example.com/modules/shout@v0\"\nlanguage: version: \"v0.17.0\"\nsource: kind: \"self\"\n",
    )
    .unwrap();
    std::fs::write(
        module.path().join("shout.cue"),
        "package shout\n\nimport (\n\t\"strings\"\n\t\"encoding/base64\"\n)\n\n#config: {token: string | *\"none\"}\n#release: {name: string, namespace: string}\n\
         components: c: cm: {apiVersion: \"v1\", kind: \"ConfigMap\", metadata: {name: \"\\(#release.name)-shout\", namespace: #release.namespace}, \
         data: {loud: strings.ToUpper(#config.token), b64: base64.Encode(null, #config.token), plain: \"unrelated\"}}\n",
    )
    .unwrap();
    opm_testenv::CueRegistry::global()
        .await
        .publish(module.path(), "v0.1.0")
        .await
        .expect("publish the module");
    let secret = |text: &str| -> Secret {
        serde_json::from_value(
            json!({"metadata": {"name": "tok"}, "stringData": {"values.yaml": format!("token: {text}\n")}}),
        )
        .unwrap()
    };
    let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), &ns.name);
    secrets
        .create(&PostParams::default(), &secret("first-token"))
        .await
        .unwrap();
    let op = Operator::start(env, &ns.name).await;
    let mr = module_release(
        &ns.name,
        "loud",
        json!(null),
        json!({
            "module": {"path": "example.com/modules/shout@v0", "version": "v0.1.0"},
            "valuesFrom": [{"kind": "Secret", "name": "tok"}],
        }),
    );
    create_mr(&ns.client, &mr).await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "loud",
        "Ready",
        is_ready,
    )
    .await;
    op.stop().await;
    secrets
        .replace("tok", &PostParams::default(), &secret("second-token"))
        .await
        .unwrap();
    let b64 = |s: &str| {
        serde_json::to_value(k8s_openapi::ByteString(s.as_bytes().to_vec()))
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    };
    let leaks = [
        "first-token".to_string(),
        "second-token".to_string(),
        "FIRST-TOKEN".to_string(),
        "SECOND-TOKEN".to_string(),
        b64("first-token"),
        b64("second-token"),
    ];
    for format in ["table", "json"] {
        let r = opm(env, Some(&ns.name), &["diff", "mr/loud", "-o", format]).await;
        assert_eq!(r.code, 1, "{r}");
        for text in &leaks {
            assert!(
                !r.stdout.contains(text.as_str()) && !r.stderr.contains(text.as_str()),
                "{text} printed: {r}"
            );
        }
        if format == "json" {
            let d = j(&r.stdout);
            let mut fields = d["changed"][0]["fields"].as_array().unwrap().clone();
            fields.sort_by_key(|f| f["path"].as_str().unwrap_or_default().to_owned());
            assert_eq!(
                fields,
                vec![
                    json!({"path": "/data/b64", "secret": true}),
                    json!({"path": "/data/loud", "secret": true}),
                ],
                "{d}"
            );
        }
    }
}

/// SPEC §30: `kubectl opm render` of an OPM module reads the cluster's Platform by default
/// (with `--kubeconfig`), and without a cluster to read it from asks for `--platform FILE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_of_an_opm_module_reads_the_clusters_platform() {
    use opm_testenv::opm::{self as fx, OpmFixtures};
    OpmFixtures::global().await;
    let (env, ns) = namespace().await;
    ensure_platform(&ns.client).await;
    let dir = tempfile::tempdir().unwrap();
    let module = format!("{}@{}", fx::WEB, fx::WEB_VERSIONS[0]);
    let kubeconfig = env.kubeconfig_path();
    let render = |kubeconfig: String| {
        let module = module.clone();
        let cache = dir.path().to_str().unwrap().to_owned();
        async move {
            opm_bare(&[
                "render",
                "--module",
                &module,
                "--name",
                "shop",
                "--namespace",
                "demo",
                "--cache-dir",
                &cache,
                "--kubeconfig",
                &kubeconfig,
            ])
            .await
        }
    };
    let r = render(kubeconfig.to_str().unwrap().to_owned()).await;
    assert_eq!(r.code, 0, "{r}");
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&r.stdout).unwrap();
    assert!(
        docs.iter()
            .any(|d| d["kind"] == "Deployment" && d["metadata"]["namespace"] == "demo"),
        "{r}"
    );
    // No cluster to read a Platform from: the render says what to give.
    let r = render("/nonexistent/kubeconfig".into()).await;
    assert_ne!(r.code, 0, "{r}");
    assert!(r.stderr.contains("--platform"), "{r}");
}

/// The Platform `cluster` pinning the OPM fixtures' newer catalog, created unless a test
/// of this binary (one API server) already did; tests run at once, so a create that
/// finds it made meanwhile (409) is fine.
async fn ensure_platform(client: &kube::Client) {
    use opm_testenv::opm as fx;
    let platform: opm_core::api::platform::Platform = serde_json::from_value(json!({
        "apiVersion": "releases.opmodel.dev/v1alpha1",
        "kind": "Platform",
        "metadata": {"name": "cluster"},
        "spec": {"type": "kubernetes", "registry": {fx::CATALOG: {"version": fx::CATALOG_NEW}}},
    }))
    .unwrap();
    let api = Api::<opm_core::api::platform::Platform>::all(client.clone());
    match api.create(&PostParams::default(), &platform).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating the Platform: {e}"),
    }
}

/// A deletion that waits for a release depending on it (ordered teardown): `why` says so and
/// what would let it go, `tree` names the dependent; the dependent's `tree` shows the
/// edge to a dependency on an object that is not a release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_and_tree_show_the_dependents_a_deletion_waits_for() {
    let (env, ns) = namespace().await;
    let op = Operator::start(env, &ns.name).await;
    create_mr(
        &ns.client,
        &module_release(&ns.name, "db", json!({}), json!({"prune": true})),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "db",
        "db Ready",
        is_ready,
    )
    .await;
    create_mr(
        &ns.client,
        &module_release(
            &ns.name,
            "app",
            json!({}),
            json!({"prune": true, "dependsOn": [
                {"name": "db"},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "db-config",
                 "readyExpr": "has(self.data)"}]}),
        ),
    )
    .await;
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "app",
        "app Ready",
        is_ready,
    )
    .await;
    let r = opm(env, Some(&ns.name), &["tree", "mr/app"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout
            .contains("dependsOn v1 ConfigMap db-config (ready when has(self.data))"),
        "{r}"
    );

    Api::<opm_core::api::ModuleRelease>::namespaced(ns.client.clone(), &ns.name)
        .delete("db", &Default::default())
        .await
        .unwrap();
    wait_for(
        &ns.client,
        "ModuleRelease",
        &ns.name,
        "db",
        "db waiting for app",
        |o| ready(o).1 == "DependentsExist",
    )
    .await;
    let r = opm(env, Some(&ns.name), &["why", "mr/db"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "is being deleted and keeps its objects until the releases that depend on it are gone (DependentsExist): waiting for dependents to be deleted: ModuleRelease {}/app;",
            ns.name
        )),
        "{r}"
    );
    assert!(
        r.stdout
            .contains("- each release that depends on it going away (deleted, its finalizer gone)"),
        "{r}"
    );
    assert!(
        r.stdout.contains("opm.dev/force-delete-orphan: \"true\""),
        "{r}"
    );
    let w = j(&opm(env, Some(&ns.name), &["why", "mr/db", "-o", "json"])
        .await
        .stdout);
    assert_eq!(w["state"], "Deleting");
    let r = opm(env, Some(&ns.name), &["tree", "mr/db"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "Deletion waits for dependent ModuleRelease {}/app\n",
            ns.name
        )),
        "{r}"
    );
    let t = j(&opm(env, Some(&ns.name), &["tree", "mr/db", "-o", "json"])
        .await
        .stdout);
    assert_eq!(t["waitingFor"][0]["deleting"], false);
    op.stop().await;
}

/// Hooks (SPEC §32) in `tree` and `diff`: the phase is shown, and a release whose hooks ran
/// diffs clean (the diff stamps hooks with the render digest exactly as the operator does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_and_diff_show_the_hook_phase() {
    let (env, ns) = namespace().await;
    let server = opm_testenv::ArtifactServer::start().await.unwrap();
    let hook = |name: &str, phase: &str, v: &str| {
        let mut c = cm(name, json!({"k": v}));
        c["metadata"]["annotations"] = json!({"releases.opmodel.dev/hook": phase});
        c
    };
    let pkg = |v: &str| {
        json!({"app": {"a": cm("a", json!({"k": "1"})),
            "migrate": hook("migrate", "pre-apply", v),
            "smoke": hook("smoke", "post-apply", "1")}})
    };
    publish(
        &server,
        &ns.client,
        &ns.name,
        "src",
        &package_files(&pkg("1")),
    )
    .await;
    let op = Operator::start(env, &ns.name).await;
    create_rel(
        &ns.client,
        &release(&ns.name, "hooks", "src", ".", json!({"prune": true})),
    )
    .await;
    wait_for(&ns.client, "Release", &ns.name, "hooks", "Ready", is_ready).await;

    let r = opm(env, Some(&ns.name), &["tree", "rel/hooks"]).await;
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.contains(&format!(
            "ConfigMap/{}/migrate [pre-apply hook]: Current",
            ns.name
        )),
        "{r}"
    );
    assert!(
        r.stdout.contains(&format!(
            "ConfigMap/{}/smoke [post-apply hook]: Current",
            ns.name
        )),
        "{r}"
    );
    assert!(
        r.stdout
            .contains(&format!("ConfigMap/{}/a: Current", ns.name)),
        "{r}"
    );
    let r = opm(env, Some(&ns.name), &["tree", "rel/hooks", "-o", "json"]).await;
    assert!(r.stdout.contains("\"hook\": \"pre-apply\""), "{r}");

    // The hooks ran for this render: nothing to change.
    let r = opm(env, Some(&ns.name), &["diff", "rel/hooks"]).await;
    assert_eq!(r.code, 0, "a release whose hooks ran diffs clean: {r}");
    assert!(r.stdout.contains("3 unchanged"), "{r}");

    // A new render: the hooks would run again, and say so.
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path(), &pkg("2"));
    let path = dir.path().to_str().unwrap();
    let r = opm(env, Some(&ns.name), &["diff", "rel/hooks", "--path", path]).await;
    assert_eq!(r.code, 1, "{r}");
    assert!(
        r.stdout
            .contains(&format!("~ ConfigMap/{}/migrate [pre-apply hook]", ns.name)),
        "{r}"
    );
    assert!(r.stdout.contains("/data/k: \"1\" → \"2\""), "{r}");
    op.stop().await;
}
