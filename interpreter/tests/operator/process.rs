//! The built binary, as deployed: `crds` prints both CRDs; `run` exits 0 on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use crate::harness::namespace;

#[test]
fn crds_prints_both_definitions() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .arg("crds")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("modulereleases.releases.opmodel.dev"));
    assert!(text.contains("releases.releases.opmodel.dev"));
    assert!(text.contains("shortNames"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_exits_zero_on_sigterm() {
    let (env, ns) = namespace().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let probe = format!("127.0.0.1:{port}");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args([
            "run",
            "--watch-label-selector",
            "opm-test=none",
            "--concurrency",
            "2",
        ])
        .args(["--health-probe-bind-address", &probe, "--leader-elect"])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("POD_NAMESPACE", &ns.name)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the operator should still be running"
    );
    assert!(
        http_get(&probe, "/healthz")
            .await
            .starts_with("HTTP/1.1 200")
    );
    let leases = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        ns.client.clone(),
        &ns.name,
    );
    let held = leases
        .get(opm_operator::ops::leader::LEASE_NAME)
        .await
        .unwrap();
    assert!(
        held.spec.unwrap().holder_identity.is_some(),
        "the leader holds the Lease"
    );
    let pid = child.id().unwrap().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let released = leases
        .get(opm_operator::ops::leader::LEASE_NAME)
        .await
        .unwrap();
    assert!(
        released.spec.unwrap().holder_identity.is_none(),
        "released on exit"
    );
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// The deployed binary reconciles a release with a Secret; its debug logs name the release
/// on the attempt's lines and never contain the Secret's value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reconciles_and_its_logs_never_hold_a_secret_value() {
    use crate::harness::*;
    use serde_json::json;

    let (env, ns) = namespace().await;
    let pkg = Package::start().await;
    let plain = "b1nary-Secret-7a6b5c";
    let comps = json!({"db": {"s": {"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds"}, "stringData": {"password": plain}}}});
    pkg.publish(&ns.client, &ns.name, "src", &release_package("r", &comps))
        .await;
    let cache = tempfile::tempdir().unwrap();
    let log_path = cache.path().join("operator.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let selector = format!("{TEST_LABEL}={}", ns.name);
    let cue = opm_testenv::tools::cue_bin().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args([
            "run",
            "--allow-operator-identity",
            "--watch-label-selector",
            &selector,
        ])
        .arg("--cue-binary")
        .arg(&cue)
        .arg("--cache-dir")
        .arg(cache.path().join("cache"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    create_rel(&ns.client, &release(&ns.name, "r", "src", ".", json!({}))).await;
    wait_rel(&ns.client, &ns.name, "r", "Ready", is_ready_rel).await;
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    let text = std::fs::read_to_string(&log_path).unwrap();
    let tail: Vec<&str> = text.lines().rev().take(40).collect();
    let status = waited
        .unwrap_or_else(|_| panic!("no exit after SIGTERM; log tail: {tail:#?}"))
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(text.contains("attempt finished"), "logs: {text}");
    let finished: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("attempt finished"))
        .collect();
    assert!(
        finished
            .iter()
            .all(|l| l.contains(&ns.name) && l.contains("Release"))
    );
    assert!(
        !text.contains(plain),
        "the Secret value leaked into the logs"
    );
    assert!(
        !text.contains("YjFuYXJ5LVNlY3JldC03YTZiNWM"),
        "base64 value in the logs"
    );
}
