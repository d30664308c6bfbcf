//! Security checks (issue 7): cross-namespace references, the impersonated identity on
//! apply, drift check and prune, and Secret values kept out of status, events and the
//! operator's logs in both log formats.

use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, Patch, PatchParams};
use opm_core::constants::REQUESTED_AT_ANNOTATION;
use opm_testenv::rbac;
use serde_json::{Value, json};

use crate::harness::*;

fn cms(names: &[&str]) -> Value {
    let mut c = serde_json::Map::new();
    for n in names {
        c.insert(n.to_string(), configmap(n, json!({"k": *n})));
    }
    json!({ "c": c })
}

fn ready_message(o: &opm_core::api::Release) -> String {
    condition(o.status.as_ref().unwrap(), "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_in_another_namespace_is_denied_by_default_and_allowed_by_the_flag() {
    let (env, ns) = namespace().await;
    let other = env.namespace().await.unwrap();
    let pkg = Package::start().await;
    pkg.publish(
        &ns.client,
        &other.name,
        "shared",
        &release_package("x", &cms(&["x-one"])),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "x",
            "shared",
            ".",
            json!({"sourceRef": {"apiVersion": "source.toolkit.fluxcd.io/v1",
                "kind": "OCIRepository", "name": "shared", "namespace": other.name}}),
        ),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "x",
        "CrossNamespaceRefDenied",
        reason_is_rel("CrossNamespaceRefDenied"),
    )
    .await;
    assert_eq!(
        condition(got.status.as_ref().unwrap(), "Stalled").map(|c| c.status.as_str()),
        Some("True")
    );
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    assert!(
        cm.get_opt("x-one").await.unwrap().is_none(),
        "nothing applied"
    );
    op.stop().await;
    // The same release under an operator that allows it: its start-up pass picks it up.
    let op = Operator::start(env, &ns.name, |a| a.allow_cross_namespace_refs = true).await;
    wait_rel(
        &ns.client,
        &ns.name,
        "x",
        "Ready with the flag",
        is_ready_rel,
    )
    .await;
    assert!(cm.get_opt("x-one").await.unwrap().is_some());
    op.stop().await;
}

/// The ServiceAccount may apply ConfigMaps but not delete them: the first apply works (as
/// the SA), a prune is refused as `ImpersonationFailed` naming the SA, and nothing is
/// deleted although the operator itself could.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_runs_as_the_service_account_and_a_forbidden_delete_deletes_nothing() {
    let (env, ns) = namespace().await;
    rbac::service_account_with_role(
        &ns.client,
        &ns.name,
        "no-delete",
        vec![rbac::rule(
            "",
            &["configmaps"],
            &["get", "list", "watch", "create", "patch", "update"],
        )],
    )
    .await
    .unwrap();
    let pkg = Package::start().await;
    pkg.publish(
        &ns.client,
        &ns.name,
        "src",
        &release_package("p", &cms(&["p-keep", "p-stale"])),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "p",
            "src",
            ".",
            json!({"prune": true, "serviceAccountName": "no-delete"}),
        ),
    )
    .await;
    let got = wait_rel(&ns.client, &ns.name, "p", "Ready", is_ready_rel).await;
    assert_eq!(got.status.unwrap().inventory.unwrap().count, 2);
    pkg.publish(
        &ns.client,
        &ns.name,
        "src",
        &release_package("p", &cms(&["p-keep"])),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "p",
        "ImpersonationFailed on prune",
        reason_is_rel("ImpersonationFailed"),
    )
    .await;
    let msg = ready_message(&got);
    assert!(msg.contains("prune"), "{msg}");
    assert!(
        msg.contains("system:serviceaccount:") && msg.contains("no-delete"),
        "the message names the ServiceAccount: {msg}"
    );
    let cm = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    let stale = cm.get("p-stale").await.unwrap();
    assert!(
        stale.metadata.deletion_timestamp.is_none(),
        "nothing deleted"
    );
    assert!(cm.get_opt("p-keep").await.unwrap().is_some());
    op.stop().await;
}

/// The drift check is a dry-run apply as the SA: once the SA loses `patch` on ConfigMaps,
/// a re-reconcile of the unchanged release stalls naming the drift check and the SA (the
/// operator itself could still patch). With the check disabled the same attempt is a
/// no-op and Ready, so it was the check, run as the SA, that was refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drift_check_runs_as_the_service_account() {
    let (env, ns) = namespace().await;
    let all = ["get", "list", "watch", "create", "patch", "update"];
    rbac::service_account_with_role(
        &ns.client,
        &ns.name,
        "blind",
        vec![rbac::rule("", &["configmaps"], &all)],
    )
    .await
    .unwrap();
    let pkg = Package::start().await;
    pkg.publish(
        &ns.client,
        &ns.name,
        "src",
        &release_package("d", &cms(&["d-one"])),
    )
    .await;
    let op = Operator::start(env, &ns.name, |_| {}).await;
    create_rel(
        &ns.client,
        &release(
            &ns.name,
            "d",
            "src",
            ".",
            json!({"serviceAccountName": "blind", "driftDetection": {"mode": "Warn"}}),
        ),
    )
    .await;
    wait_rel(&ns.client, &ns.name, "d", "Ready", is_ready_rel).await;
    // Revoke `patch`, and wait until the authorizer has seen it.
    let roles = Api::<Role>::namespaced(ns.client.clone(), &ns.name);
    roles
        .patch(
            "blind",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": [rbac::rule("", &["configmaps"], &["get", "list", "watch", "create", "update"])]})),
        )
        .await
        .unwrap();
    let as_sa = env.impersonating_client("blind", &ns.name).unwrap();
    let sa_cms = Api::<ConfigMap>::namespaced(as_sa, &ns.name);
    eventually("patch revoked for the SA", || {
        let sa_cms = sa_cms.clone();
        async move {
            let params = PatchParams::apply("probe").dry_run();
            let probe =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d-one"}});
            matches!(
                sa_cms.patch("d-one", &params, &Patch::Apply(&probe)).await,
                Err(kube::Error::Api(e)) if e.code == 403
            )
        }
    })
    .await;
    patch_rel(
        &ns.client,
        &ns.name,
        "d",
        json!({"metadata": {"annotations": {REQUESTED_AT_ANNOTATION: "after-revoke"}}}),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "d",
        "ImpersonationFailed on the drift check",
        reason_is_rel("ImpersonationFailed"),
    )
    .await;
    let msg = ready_message(&got);
    assert!(msg.contains("drift check"), "{msg}");
    assert!(msg.contains("blind"), "names the ServiceAccount: {msg}");
    patch_rel(
        &ns.client,
        &ns.name,
        "d",
        json!({"spec": {"driftDetection": {"mode": "Disabled"}}}),
    )
    .await;
    wait_rel(
        &ns.client,
        &ns.name,
        "d",
        "Ready without the check",
        is_ready_rel,
    )
    .await;
    op.stop().await;
}

/// The binary with `--log-format json` at debug level: a Release rendering Secrets (by
/// `stringData` and `data`) reaches Ready, and neither value nor its base64 form appears in
/// the logs, the status or the events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_stay_out_of_json_logs_status_and_events() {
    let (env, ns) = namespace().await;
    let pkg = Package::start().await;
    let plain = "js0n-Secret-c4f1e2";
    let b64_plain = "anMwbi1TZWNyZXQtYzRmMWUy";
    let other = "raw-bytes-9d8e7f";
    let b64_other = "cmF3LWJ5dGVzLTlkOGU3Zg==";
    let comps = json!({"db": {
        "s": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"password": plain}},
        "t": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "data": {"token": b64_other}},
    }});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("s", &comps))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("operator.json.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["run", "--allow-operator-identity"])
        .args(["--log-format", "json", "--watch-label-selector"])
        .arg(format!("{TEST_LABEL}={}", ns.name))
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    create_rel(&ns.client, &release(&ns.name, "s", "src", ".", json!({}))).await;
    let got = wait_rel(&ns.client, &ns.name, "s", "Ready", is_ready_rel).await;
    let secrets =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(ns.client.clone(), &ns.name);
    let applied = secrets.get("creds").await.unwrap().data.unwrap();
    assert_eq!(
        applied["password"].0,
        plain.as_bytes(),
        "the real value was applied"
    );
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let logs = std::fs::read_to_string(&log_path).unwrap();
    let first = logs.lines().next().unwrap_or_default();
    assert!(
        serde_json::from_str::<Value>(first).is_ok(),
        "json log lines: {first}"
    );
    assert!(
        logs.contains("attempt finished"),
        "debug logs were captured"
    );
    let status = serde_json::to_string(&got.status).unwrap();
    let evs =
        serde_json::to_string(&events_with(&ns.client, &ns.name, "s", &["Applied"]).await).unwrap();
    for (what, text) in [("logs", &logs), ("status", &status), ("events", &evs)] {
        for needle in [plain, b64_plain, other, b64_other] {
            assert!(!text.contains(needle), "{needle} appears in the {what}");
        }
    }
}

/// Issue 13 item 7, the operator's own logs: a `cue` error that quotes a Secret's value,
/// rendered by the real binary with debug JSON logs and traces on. The value must appear in
/// no log line, no trace, no status and no event; the condition shows `<redacted>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cue_error_quoting_a_secret_value_stays_out_of_the_binarys_logs() {
    const SECRET: &str = "hunter3-Lg7Qp";
    let (env, ns) = namespace().await;
    let pkg = Package::start().await;
    let release_cue = format!(
        "package release\n\nkind: \"ModuleRelease\"\nmetadata: {{name: \"leak\", namespace: \"default\"}}\n\
         components: db: s: {{\n\tapiVersion: \"v1\", kind: \"Secret\", metadata: name: \"db\"\n\
         \tstringData: password: \"{SECRET}\" & =~\"^[0-9]+$\"\n}}\n"
    );
    let files = vec![
        (
            "cue.mod/module.cue",
            "module: \"example.com/test@v0\"\nlanguage: version: \"v0.17.0\"\n".to_string(),
        ),
        ("release.cue", release_cue),
    ];
    pkg.publish(&ns.client, &ns.name, "leak", &files).await;
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("operator.json.log");
    let trace_dir = dir.path().join("traces");
    let log = std::fs::File::create(&log_path).unwrap();
    // The default identity policy (off): the render fails before any ServiceAccount matters.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args(["run", "--log-format", "json", "--watch-label-selector"])
        .arg(format!("{TEST_LABEL}={}", ns.name))
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .arg("--trace-dir")
        .arg(&trace_dir)
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    create_rel(
        &ns.client,
        &release(&ns.name, "leak", "leak", ".", json!({})),
    )
    .await;
    let got = wait_rel(
        &ns.client,
        &ns.name,
        "leak",
        "RenderFailed",
        reason_is_rel("RenderFailed"),
    )
    .await;
    let evs =
        serde_json::to_string(&events_with(&ns.client, &ns.name, "leak", &["RenderFailed"]).await)
            .unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().unwrap().to_string()])
        .status()
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        logs.contains("attempt finished"),
        "debug logs were captured"
    );
    let mut traces = String::new();
    for e in std::fs::read_dir(&trace_dir).unwrap().flatten() {
        traces.push_str(&std::fs::read_to_string(e.path()).unwrap());
    }
    assert!(traces.contains("RenderFailed"), "the attempt was traced");
    let status = serde_json::to_string(&got.status).unwrap();
    assert!(status.contains("<redacted>"), "{status}");
    assert!(
        status.contains("stringData.password"),
        "the field is still named: {status}"
    );
    for (what, text) in [
        ("logs", &logs),
        ("traces", &traces),
        ("status", &status),
        ("events", &evs),
    ] {
        assert!(
            !text.contains(SECRET),
            "the secret value appears in the {what}"
        );
    }
}
