//! Workload controllers for the test cluster (SPEC §26 tests): the real
//! `kube-controller-manager` and `kube-scheduler` of the pinned Kubernetes version, and
//! `kwok` with a few fake nodes, so Deployments, ReplicaSets, Pods and Jobs move through
//! their real status transitions without a kubelet.
//!
//! Started once per test binary, on demand: tests that need only the API server never pay
//! for them. Pods are scheduled onto the fake nodes by the real scheduler; kwok's "fast"
//! stages then make them Running and Ready (and Job pods Succeeded). A pod that can be
//! scheduled nowhere (a `nodeSelector` no fake node has) stays Pending, which is how tests
//! make a rollout stick.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::env::TestEnv;
use crate::error::{Error, Result};
use crate::process;
use crate::tools;

/// Fake nodes kwok manages.
pub const NODES: usize = 3;
/// The annotation kwok selects its nodes by.
const KWOK_NODE: (&str, &str) = ("kwok.x-k8s.io/node", "fake");

static WORKLOADS: OnceCell<Workloads> = OnceCell::const_new();

/// The running controllers.
#[derive(Debug)]
pub struct Workloads {
    logs: PathBuf,
}

impl Workloads {
    /// Starts the controllers against the shared [`TestEnv`] (once per process).
    pub async fn global() -> &'static Workloads {
        match WORKLOADS.get_or_try_init(start).await {
            Ok(w) => w,
            Err(e) => panic!("opm-testenv: cannot start the workload controllers: {e}"),
        }
    }

    /// Where the controllers' logs are (one file per process).
    pub fn log_dir(&self) -> &std::path::Path {
        &self.logs
    }
}

fn spawn(
    name: &'static str,
    bin: PathBuf,
    args: Vec<String>,
    logs: &std::path::Path,
) -> Result<()> {
    let out = File::create(logs.join(format!("{name}.log")))
        .map_err(|e| Error::io(format!("create the {name} log"), e))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::io(format!("clone the {name} log"), e))?;
    let mut cmd = Command::new(&bin);
    cmd.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    process::spawn_managed(name, cmd, Duration::from_secs(5), None)
        .map_err(|e| Error::io(format!("start {}", bin.display()), e))?;
    Ok(())
}

async fn start() -> Result<Workloads> {
    let env = TestEnv::global().await;
    let kcm = tools::controller_manager_bin()?;
    let scheduler = tools::scheduler_bin()?;
    let kwok = tools::kwok_bin()?;
    let stages = tools::kwok_stages()?;
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let logs = env
        .log_path()
        .parent()
        .map(|p| p.join("workloads"))
        .unwrap_or_else(|| std::env::temp_dir().join("opm-testenv-workloads"));
    std::fs::create_dir_all(&logs).map_err(|e| Error::io("create the workloads log dir", e))?;
    spawn(
        "kube-controller-manager",
        kcm,
        vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            // The token controller needs the signing key and nothing here reads pod tokens.
            "--controllers=*,-serviceaccount-token".into(),
            "--use-service-account-credentials=false".into(),
            "--node-monitor-grace-period=1h".into(),
        ],
        &logs,
    )?;
    spawn(
        "kube-scheduler",
        scheduler,
        vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
        ],
        &logs,
    )?;
    spawn(
        "kwok",
        kwok,
        vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--config={}", stages.display()),
            "--manage-all-nodes=false".into(),
            format!(
                "--manage-nodes-with-annotation-selector={}={}",
                KWOK_NODE.0, KWOK_NODE.1
            ),
            "--cidr=10.244.0.0/16".into(),
            "--node-ip=10.250.0.1".into(),
        ],
        &logs,
    )?;
    let nodes: Api<Node> = Api::all(env.client()?);
    for i in 0..NODES {
        let name = format!("kwok-node-{i}");
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                "annotations": {KWOK_NODE.0: KWOK_NODE.1, "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                           "kubernetes.io/arch": "amd64", "type": "kwok"}},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}
        }))?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Ready once kwok has taken the nodes over (it sets their Ready condition).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let ready = nodes
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= NODES {
            break;
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!(
                    "{ready} of {NODES} kwok nodes Ready (logs in {})",
                    logs.display()
                ),
                secs: 120,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(Workloads { logs })
}
