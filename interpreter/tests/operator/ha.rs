//! High availability with the real binary: two `opm-operator run --leader-elect` processes;
//! only the Lease holder reconciles; after the leader is SIGKILLed (no Lease release) the
//! standby takes over within the lease duration and reconciles a new release.

use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use opm_operator::ops::leader::LEASE_NAME;
use opm_testenv::CueRegistry;
use serde_json::json;
use tokio::process::{Child, Command};

use crate::harness::*;
use crate::metrics::{free_addr, scrape};

const LEASE: Duration = Duration::from_secs(4);

struct Replica {
    host: &'static str,
    metrics: String,
    child: Child,
    _cache: tempfile::TempDir,
}

async fn start(host: &'static str, ns: &str, kubeconfig: &std::path::Path) -> Replica {
    let registry = CueRegistry::global().await;
    let cache = tempfile::tempdir().unwrap();
    let metrics = free_addr();
    let health = free_addr();
    let child = Command::new(env!("CARGO_BIN_EXE_opm-operator"))
        .args([
            "run",
            "--allow-operator-identity",
            "--leader-elect",
            "--leader-elect-lease-duration",
            "4s",
        ])
        .args(["--watch-label-selector", &format!("{TEST_LABEL}={ns}")])
        .args(["--metrics-bind-address", &metrics])
        .args(["--health-probe-bind-address", &health])
        .args(["--cue-registry", &registry.registry()])
        .arg("--cue-binary")
        .arg(opm_testenv::tools::cue_bin().unwrap())
        .arg("--cache-dir")
        .arg(cache.path())
        .env("KUBECONFIG", kubeconfig)
        .env("POD_NAMESPACE", ns)
        // The Lease identity is `$HOSTNAME-<random>`: it tells the replicas apart.
        .env("HOSTNAME", host)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Replica {
        host,
        metrics,
        child,
        _cache: cache,
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

/// Scrapes until the endpoint answers (the process may still be starting).
async fn scrape_when_up(addr: &str) -> String {
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return scrape(addr).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{addr} never answered");
}

fn reconciles_of(text: &str, name: &str) -> f64 {
    let needle = format!(r#"name="{name}","#);
    text.lines()
        .filter(|l| l.starts_with("opm_controller_reconcile_total{") && l.contains(&needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_reconciles_and_the_standby_takes_over_after_a_kill() {
    let (env, ns) = namespace().await;
    let leases = Api::<Lease>::namespaced(ns.client.clone(), &ns.name);
    let mut a = start("replica-a", &ns.name, env.kubeconfig_path()).await;
    let start_wait = Instant::now();
    while holder(&leases).await.is_none() {
        assert!(start_wait.elapsed() < WAIT, "nobody took the Lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut b = start("replica-b", &ns.name, env.kubeconfig_path()).await;
    let first = holder(&leases).await.unwrap();
    assert!(first.starts_with("replica-a-"), "holder {first}");

    create_mr(
        &ns.client,
        &module_release(&ns.name, "one", json!({}), json!({})),
    )
    .await;
    wait_mr(&ns.client, &ns.name, "one", "one Ready", is_ready_mr).await;
    // B has been up through a whole reconcile; give it a few of its retry periods too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (text_a, text_b) = (
        scrape_when_up(&a.metrics).await,
        scrape_when_up(&b.metrics).await,
    );
    assert!(reconciles_of(&text_a, "one") >= 1.0, "leader: {text_a}");
    assert_eq!(
        reconciles_of(&text_b, "one"),
        0.0,
        "the standby must not reconcile: {text_b}"
    );
    assert!(
        !text_b.contains("opm_controller_reconcile_total{"),
        "the standby has no reconcile series"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some(first.as_str()));

    // SIGKILL: the Lease is not released, so B must wait for it to expire.
    a.child.start_kill().unwrap();
    a.child.wait().await.unwrap();
    let killed = Instant::now();
    create_mr(
        &ns.client,
        &module_release(&ns.name, "two", json!({}), json!({})),
    )
    .await;
    let taken = loop {
        let h = holder(&leases).await.unwrap_or_default();
        if h.starts_with(&format!("{}-", b.host)) {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < LEASE * 3,
            "no takeover after {:?} (holder {h})",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Lease duration plus one retry period (a third of it) plus request latency.
    assert!(
        taken <= LEASE + LEASE / 3 + Duration::from_secs(1),
        "takeover took {taken:?}"
    );
    wait_mr(&ns.client, &ns.name, "two", "two Ready", is_ready_mr).await;
    let reconciled = killed.elapsed();
    assert!(
        reconciled < LEASE + Duration::from_secs(30),
        "two Ready {reconciled:?} after the kill"
    );
    let text_b = scrape(&b.metrics).await;
    assert!(reconciles_of(&text_b, "two") >= 1.0, "new leader: {text_b}");
    eprintln!("takeover after {taken:?}; `two` Ready {reconciled:?} after the kill");
    assert_eq!(a.host, "replica-a");
    b.child.start_kill().unwrap();
    let _ = b.child.wait().await;
}
