//! Remote clusters (SPEC §31): one connection per distinct kubeconfig digest, shared by
//! every release whose kubeconfig has that digest, built on its first use, closed when no
//! release uses it any more, and replaced when a release's kubeconfig changes.
//!
//! A connection is everything the executors use for the operator's own cluster, once more
//! for that cluster: the clients (and their impersonating ones), discovery, the live-version
//! cache, the health-read cache and the managed-object watch. Changes its watch sees
//! re-trigger releases exactly as the local watch's do.
//!
//! The kubeconfig bytes are kept from its read (`ReadKubeConfig`) under their digest; the
//! connection is built only when an effect the core sent for that digest runs, that is,
//! after the core accepted the kubeconfig's facts (a refused kubeconfig never reaches the
//! client library, which would read its files or run its command).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use opm_core::ReleaseKey;
use opm_core::remote::RemoteCluster;

use crate::kube::discovery::Resolver;
use crate::kube::impersonate::{Clients, RateLimit};
use crate::kube::live_cache::LiveCache;
use crate::kube::object_watch::ObjectWatch;
use crate::ops::metrics::ClusterGauges;
use crate::steps::health_read::HealthCache;

/// One remote cluster as one kubeconfig reaches it.
pub struct ClusterConn {
    /// Its server URL without credentials.
    pub server: String,
    /// The kubeconfig's identity and the ServiceAccounts impersonated there.
    pub clients: Clients,
    /// Discovery of that cluster.
    pub resolver: Resolver,
    /// Live object versions seen there.
    pub live: LiveCache,
    /// The managed-object watch of that cluster.
    pub watch: ObjectWatch,
    /// Objects read there for their health.
    pub health_reads: HealthCache,
    /// The last request failed before any HTTP answer (connection refused, reset, TLS):
    /// what the executors report as `Unreachable`.
    transport_failed: Arc<AtomicBool>,
}

impl ClusterConn {
    /// Whether the last request to this cluster got no HTTP answer.
    pub fn transport_failed(&self) -> bool {
        self.transport_failed.load(Ordering::Relaxed)
    }
}

#[derive(Default)]
struct State {
    /// Which digest each release last read.
    users: HashMap<ReleaseKey, String>,
    /// Kubeconfig bytes by digest, for connections not built yet.
    bytes: HashMap<String, Arc<Vec<u8>>>,
    conns: HashMap<String, Arc<ClusterConn>>,
}

/// See the module documentation.
pub struct Clusters {
    state: Mutex<State>,
    /// The `resourceVersion` of each kubeconfig Secret `(namespace, name)` as last read:
    /// a watch that opens after a change compares its first listing with it.
    read_versions: Mutex<HashMap<(String, String), String>>,
    limit: Option<RateLimit>,
    /// The local watch whose change channel the remote watches share.
    gauges: Arc<ClusterGauges>,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// No kubeconfig bytes for the digest (the operator restarted mid-attempt): transient.
    #[error("the kubeconfig of cluster {0} is not loaded; it is read again on the next attempt")]
    NotLoaded(String),
    /// The client library refused the configuration.
    #[error("building the client for cluster {server}: {message}")]
    Config {
        /// The cluster.
        server: String,
        /// Why.
        message: String,
    },
}

impl Clusters {
    /// An empty pool; clients get `limit`, gauges go to `gauges`.
    pub fn new(limit: Option<RateLimit>, gauges: Arc<ClusterGauges>) -> Self {
        Self {
            state: Mutex::default(),
            read_versions: Mutex::default(),
            limit,
            gauges,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `key` read a kubeconfig with `digest`: keep its bytes; a release that moved to
    /// another digest lets go of its old connection.
    pub fn loaded(&self, key: &ReleaseKey, digest: &str, bytes: Vec<u8>) {
        let mut s = self.lock();
        if !s.conns.contains_key(digest) {
            s.bytes
                .entry(digest.to_string())
                .or_insert_with(|| Arc::new(bytes));
        }
        s.users.insert(key.clone(), digest.to_string());
        self.collect(&mut s);
    }

    /// Secret `namespace/name` was read at `version`.
    pub fn read_at(&self, namespace: &str, name: &str, version: Option<String>) {
        let mut v = self.read_versions.lock().unwrap_or_else(|p| p.into_inner());
        let key = (namespace.to_string(), name.to_string());
        match version {
            Some(version) => v.insert(key, version),
            None => v.remove(&key),
        };
    }

    /// The version Secret `namespace/name` had when last read (`None`: never read, or
    /// missing then).
    pub fn read_version(&self, namespace: &str, name: &str) -> Option<String> {
        self.read_versions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// `key` no longer uses a remote cluster (gone, or its spec dropped `kubeConfig`).
    pub fn released(&self, key: &ReleaseKey) {
        let mut s = self.lock();
        if s.users.remove(key).is_some() {
            self.collect(&mut s);
        }
        self.gauges.set_release(key, None);
    }

    /// Drops connections and bytes no release uses (their watches stop with them).
    fn collect(&self, s: &mut State) {
        let used: std::collections::HashSet<String> = s.users.values().cloned().collect();
        s.conns.retain(|d, _| used.contains(d));
        s.bytes.retain(|d, _| used.contains(d));
        self.publish(s);
    }

    fn publish(&self, s: &State) {
        let watches: usize = s.conns.values().map(|c| c.watch.kinds()).sum();
        self.gauges.set_open(s.conns.len() as u64, watches as u64);
    }

    /// Refreshes the open-watch gauge (a first apply of a kind opens a watch).
    pub fn refresh_gauges(&self) {
        let s = self.lock();
        self.publish(&s);
    }

    /// The connection for `cluster`, built on first use; `key` is the release using it.
    pub async fn connect(
        &self,
        key: &ReleaseKey,
        cluster: &RemoteCluster,
        local_watch: &ObjectWatch,
    ) -> Result<Arc<ClusterConn>, ConnectError> {
        self.gauges.set_release(key, Some(&cluster.server));
        let bytes = {
            let s = self.lock();
            if let Some(c) = s.conns.get(&cluster.digest) {
                return Ok(c.clone());
            }
            s.bytes
                .get(&cluster.digest)
                .cloned()
                .ok_or_else(|| ConnectError::NotLoaded(cluster.server.clone()))?
        };
        let config_err = |message: String| ConnectError::Config {
            server: cluster.server.clone(),
            message,
        };
        let config = crate::kube::kubeconfig::config(&bytes)
            .await
            .map_err(config_err)?;
        let transport_failed = Arc::new(AtomicBool::new(false));
        let clients = Clients::with_transport_flag(config, self.limit, transport_failed.clone())
            .map_err(|e| config_err(e.to_string()))?;
        let operator = clients.operator();
        let conn = Arc::new(ClusterConn {
            server: cluster.server.clone(),
            resolver: Resolver::new(operator.clone()),
            watch: local_watch.sibling(operator),
            live: LiveCache::default(),
            health_reads: HealthCache::default(),
            clients,
            transport_failed,
        });
        let mut s = self.lock();
        // Another attempt may have built it meanwhile; the first one stays.
        let conn = s
            .conns
            .entry(cluster.digest.clone())
            .or_insert(conn)
            .clone();
        s.bytes.remove(&cluster.digest);
        // Still used? A release may have moved away while it was being built.
        if !s.users.values().any(|d| d == &cluster.digest) {
            s.users.insert(key.clone(), cluster.digest.clone());
        }
        self.publish(&s);
        Ok(conn)
    }

    /// Open connections (for tests and the bench).
    pub fn open(&self) -> usize {
        self.lock().conns.len()
    }

    /// Watched kinds over every open connection.
    pub fn watches(&self) -> usize {
        self.lock().conns.values().map(|c| c.watch.kinds()).sum()
    }
}
