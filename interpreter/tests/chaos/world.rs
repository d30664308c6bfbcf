//! The pieces every chaos case uses: the restartable cluster, the real operator binary as a
//! child process, release packages of many ConfigMaps served over HTTP, sentinels, and the
//! convergence / no-loss checks.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use opm_core::api::Release;
use opm_testenv::archive::{Entry, sha256_digest, tar_gz};
use opm_testenv::flux::{self, Artifact, SourceKind};
use opm_testenv::{ArtifactServer, RestartableApiServer};
use serde_json::json;

pub const LABEL: &str = "opm-test";
const NAME_LABEL: &str = "module-release.opmodel.dev/name";
const NS_LABEL: &str = "module-release.opmodel.dev/namespace";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// The real `opm-operator run`, SIGKILLable and restartable with the same flags.
pub struct OperatorProc {
    args: Vec<String>,
    kubeconfig: PathBuf,
    log: PathBuf,
    child: Option<tokio::process::Child>,
    _dir: tempfile::TempDir,
}

impl OperatorProc {
    /// Starts the operator for namespace `ns`; `extra` are more flags.
    pub fn start(api: &RestartableApiServer, ns: &str, extra: &[String]) -> OperatorProc {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args: Vec<String> = vec![
            "run".into(),
            "--watch-label-selector".into(),
            format!("{LABEL}={ns}"),
            "--cache-dir".into(),
            dir.path().join("cache").display().to_string(),
            // Slow enough that an apply or prune of ~100 objects takes seconds: the
            // fault lands inside the phase, not before or after it.
            "--kube-api-qps".into(),
            "20".into(),
            "--kube-api-burst".into(),
            "5".into(),
            // Its releases name no ServiceAccount: they apply as the operator, in their
            // own namespace (SPEC §15).
            "--allow-operator-identity".into(),
        ];
        if !extra.iter().any(|a| a == "--cue-binary") {
            args.push("--cue-binary".into());
            args.push(
                opm_testenv::tools::cue_bin()
                    .expect("cue")
                    .display()
                    .to_string(),
            );
        }
        args.extend(extra.iter().cloned());
        let mut op = OperatorProc {
            args,
            kubeconfig: api.kubeconfig_path().to_path_buf(),
            log: dir.path().join("operator.log"),
            child: None,
            _dir: dir,
        };
        op.spawn();
        op
    }

    fn spawn(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("operator log");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_opm-operator"))
            .args(&self.args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start opm-operator");
        self.child = Some(child);
    }

    /// SIGKILL: no graceful stop, in-flight attempts die where they are.
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn();
    }

    /// Whether the process is still running (it must ride out every fault but its own kill).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The last lines of the operator's log, for a failing case.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for OperatorProc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.start_kill();
        }
    }
}

/// One case's namespace with `n` releases `r0..`, each its own OCIRepository `src-rI`
/// serving `objects` ConfigMaps `rI-cm-J`.
pub struct Fleet {
    pub ns: String,
    pub client: Client,
    pub server: ArtifactServer,
    pub releases: Vec<String>,
    /// Per release: the artifact path currently served (for fault injection).
    pub paths: Vec<String>,
    /// Per release: the ConfigMap names it should own now.
    pub expected: Vec<BTreeSet<String>>,
    pub sentinels: Vec<String>,
}

impl Fleet {
    pub async fn new(client: Client, ns: &str, n: usize) -> Fleet {
        let nsobj = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &nsobj)
            .await
            .expect("namespace");
        Fleet {
            ns: ns.into(),
            client,
            server: ArtifactServer::start().await.expect("artifact server"),
            releases: (0..n).map(|i| format!("r{i}")).collect(),
            paths: vec![String::new(); n],
            expected: vec![BTreeSet::new(); n],
            sentinels: Vec::new(),
        }
    }

    /// Serves release `i`'s package with ConfigMaps `0..objects` and points its source at it.
    pub async fn publish(&mut self, i: usize, objects: usize) {
        let name = &self.releases[i];
        let mut comps = serde_json::Map::new();
        for j in 0..objects {
            comps.insert(
                format!("k{j}"),
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{name}-cm-{j}")}, "data": {"j": j.to_string()}}),
            );
        }
        let release_cue = format!(
            "package release\n\nkind: \"ModuleRelease\"\nmetadata: {{name: \"{name}\", namespace: \"default\"}}\ncomponents: {}\n",
            serde_json::to_string_pretty(&json!({"c": comps})).unwrap()
        );
        let bytes = tar_gz(&[
            Entry::new(
                "cue.mod/module.cue",
                "module: \"example.com/chaos@v0\"\nlanguage: version: \"v0.17.0\"\n",
            ),
            Entry::new("release.cue", release_cue),
        ])
        .expect("tar.gz");
        let path = format!("{}/src-{name}/{}.tar.gz", self.ns, sha256_digest(&bytes));
        let url = self.server.put(&path, bytes.clone());
        let artifact = Artifact::for_bytes(url, &bytes);
        let source = format!("src-{name}");
        if flux::get_source(&self.client, &self.ns, SourceKind::OciRepository, &source)
            .await
            .is_err()
        {
            flux::create_source(&self.client, &self.ns, SourceKind::OciRepository, &source)
                .await
                .expect("create source");
        }
        flux::set_artifact(
            &self.client,
            &self.ns,
            SourceKind::OciRepository,
            &source,
            &artifact,
        )
        .await
        .expect("set artifact");
        self.paths[i] = path;
        self.expected[i] = (0..objects).map(|j| format!("{name}-cm-{j}")).collect();
    }

    pub async fn publish_all(&mut self, objects: usize) {
        for i in 0..self.releases.len() {
            self.publish(i, objects).await;
        }
    }

    /// Creates every Release (prune on).
    pub async fn create_releases(&self) {
        let api = Api::<Release>::namespaced(self.client.clone(), &self.ns);
        for name in &self.releases {
            let rel: Release = serde_json::from_value(json!({
                "apiVersion": "releases.opmodel.dev/v1alpha1",
                "kind": "Release",
                "metadata": {"name": name, "namespace": self.ns, "labels": {LABEL: self.ns}},
                "spec": {
                    "sourceRef": {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository", "name": format!("src-{name}")},
                    "path": ".",
                    "prune": true,
                },
            }))
            .expect("Release");
            api.create(&PostParams::default(), &rel)
                .await
                .expect("create Release");
        }
    }

    /// ConfigMaps no release may touch: one plain, and per release one carrying that
    /// release's owner labels (a look-alike that was never in an inventory).
    pub async fn create_sentinels(&mut self) {
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns);
        let mut all = vec![("sentinel-plain".to_string(), json!({}))];
        for name in &self.releases {
            all.push((
                format!("{name}-cm-lookalike"),
                json!({MANAGED_BY: "opm-controller", NAME_LABEL: name, NS_LABEL: self.ns}),
            ));
        }
        for (name, labels) in all {
            let cm: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels}, "data": {"sentinel": "yes"}
            }))
            .unwrap();
            api.create(&PostParams::default(), &cm)
                .await
                .expect("sentinel");
            self.sentinels.push(name);
        }
    }

    /// Release `i`'s owner-labelled ConfigMaps present now (sentinels excluded); `None` when
    /// the API server does not answer.
    pub async fn owned(&self, i: usize) -> Option<BTreeSet<String>> {
        let sel = format!("{NAME_LABEL}={},{NS_LABEL}={}", self.releases[i], self.ns);
        let list = Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns)
            .list(&ListParams::default().labels(&sel))
            .await
            .ok()?;
        Some(
            list.items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .filter(|n| !self.sentinels.contains(n))
                .collect(),
        )
    }

    /// Owner-labelled ConfigMaps of all releases; `None` when the API server does not answer.
    pub async fn owned_total(&self) -> Option<usize> {
        let mut n = 0;
        for i in 0..self.releases.len() {
            n += self.owned(i).await?.len();
        }
        Some(n)
    }

    /// Polls every 20ms until `pred(total owned)`; returns the count seen.
    pub async fn wait_owned(
        &self,
        what: &str,
        limit: Duration,
        pred: impl Fn(usize) -> bool,
    ) -> usize {
        let start = Instant::now();
        loop {
            if let Some(n) = self.owned_total().await
                && pred(n)
            {
                return n;
            }
            assert!(start.elapsed() < limit, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether release `i` is Ready for its generation with exactly the expected inventory.
    async fn converged(&self, i: usize) -> Result<(), String> {
        let api = Api::<Release>::namespaced(self.client.clone(), &self.ns);
        let rel = api
            .get(&self.releases[i])
            .await
            .map_err(|e| format!("get: {e}"))?;
        let s = rel.status.clone().unwrap_or_default();
        let ready = s.conditions.iter().find(|c| c.type_ == "Ready");
        let ok = ready.is_some_and(|c| c.status == "True")
            && s.observed_generation == rel.metadata.generation.unwrap_or(0);
        if !ok {
            return Err(format!(
                "{} not Ready: {:?}",
                self.releases[i],
                ready.map(|c| (&c.reason, &c.message))
            ));
        }
        let inv: BTreeSet<String> = s
            .inventory
            .unwrap_or_default()
            .entries
            .into_iter()
            .map(|e| e.name)
            .collect();
        if inv != self.expected[i] {
            return Err(format!(
                "{}: inventory has {} entries, expected {}",
                self.releases[i],
                inv.len(),
                self.expected[i].len()
            ));
        }
        Ok(())
    }

    /// Waits until every release converged; the time it took, or the last problem.
    pub async fn wait_converged(&self, limit: Duration) -> Result<Duration, String> {
        let start = Instant::now();
        loop {
            let mut problem = None;
            for i in 0..self.releases.len() {
                if let Err(e) = self.converged(i).await {
                    problem = Some(e);
                    break;
                }
            }
            match problem {
                None => return Ok(start.elapsed()),
                Some(p) if start.elapsed() > limit => return Err(p),
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// After convergence: every inventory equals the owner-labelled objects present, and no
    /// sentinel or desired object is missing. Returns (wrong deletions, problems).
    pub async fn audit(&self) -> (usize, Vec<String>) {
        let mut wrong = 0;
        let mut problems = Vec::new();
        let api = Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns);
        for s in &self.sentinels {
            if api.get_opt(s).await.expect("get sentinel").is_none() {
                wrong += 1;
                problems.push(format!("sentinel {s} was deleted"));
            }
        }
        for i in 0..self.releases.len() {
            let owned = self.owned(i).await.expect("list");
            let missing = self.expected[i].difference(&owned).count();
            wrong += missing;
            if owned != self.expected[i] {
                problems.push(format!(
                    "{}: {} owned objects present, {} in the inventory ({missing} missing)",
                    self.releases[i],
                    owned.len(),
                    self.expected[i].len()
                ));
            }
        }
        (wrong, problems)
    }

    /// Deletes release `i`; it must disappear (finalizer removed) with its objects pruned
    /// and its look-alike sentinel kept.
    pub async fn delete_and_check(&mut self, i: usize, limit: Duration) -> Result<(), String> {
        let api = Api::<Release>::namespaced(self.client.clone(), &self.ns);
        api.delete(&self.releases[i], &DeleteParams::default())
            .await
            .map_err(|e| format!("delete: {e}"))?;
        let start = Instant::now();
        loop {
            match api.get_opt(&self.releases[i]).await {
                Ok(None) => break,
                Ok(Some(r)) if start.elapsed() > limit => {
                    return Err(format!(
                        "{} still present after deletion, finalizers {:?}",
                        self.releases[i], r.metadata.finalizers
                    ));
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let left = self.owned(i).await.unwrap_or_default();
        self.expected[i].clear();
        if !left.is_empty() {
            return Err(format!(
                "{} objects of the deleted release remain",
                left.len()
            ));
        }
        Ok(())
    }
}
