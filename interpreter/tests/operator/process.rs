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
    let (env, _ns) = namespace().await;
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
        .args(["--health-probe-bind-address", &probe])
        .env("KUBECONFIG", env.kubeconfig_path())
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
