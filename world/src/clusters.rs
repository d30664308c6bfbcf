//! Remote clusters in the simulated world (SPEC §31): each has its own object store, a
//! kubeconfig Secret names one by its server URL, and a partition makes one unreachable.
//!
//! An effect aimed at a remote cluster runs exactly as a local one does, against that
//! cluster's store (swapped in for the duration of the effect), so every rule of the store
//! (SSA, ownership, deletion) holds there too.

use std::collections::BTreeMap;

use opm_core::ApiError;
use opm_core::input::InputKind;
use opm_core::remote::RemoteCluster;

use super::World;
use super::store::Store;

/// One remote cluster.
#[derive(Clone, Debug)]
pub(crate) struct SimCluster {
    pub store: Store,
    /// Cut off from the operator: every request fails as unreachable.
    pub partitioned: bool,
}

/// The remote clusters and the kubeconfig Secrets pointing at them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clusters {
    /// By server URL.
    pub by_server: BTreeMap<String, SimCluster>,
    /// `(namespace, name)` of a kubeconfig Secret → the server it points at.
    pub kubeconfigs: BTreeMap<(String, String), String>,
}

impl World {
    /// A kubeconfig Secret `namespace/name` pointing at `server` (created, or changed);
    /// the cluster is created empty when it is new.
    pub(super) fn set_kubeconfig(&mut self, namespace: String, name: String, server: String) {
        let seed = self.cluster.clusters.by_server.len() as u64 + 1;
        let cluster = self
            .cluster
            .clusters
            .by_server
            .entry(server.clone())
            .or_insert_with(|| SimCluster {
                store: Store::new(seed),
                partitioned: false,
            });
        // The releases' namespace exists there too (a cluster made ready for them).
        cluster.store.ensure_namespace(&namespace);
        self.cluster
            .clusters
            .kubeconfigs
            .insert((namespace.clone(), name.clone()), server);
        // A Secret's creation or change re-triggers the releases naming it (SPEC §31).
        let keys: Vec<_> = self
            .cluster
            .releases
            .keys()
            .filter(|k| {
                k.namespace == namespace
                    && self.cluster.releases.get(k).is_some_and(|o| {
                        o.common()
                            .kube_config
                            .as_ref()
                            .is_some_and(|kc| kc.secret_ref.name == name)
                    })
            })
            .cloned()
            .collect();
        for k in keys {
            self.trigger(&k, "kubeconfig Secret changed");
        }
    }

    /// Cuts `server` off (`true`) or heals it.
    pub(super) fn set_partition(&mut self, server: &str, partitioned: bool) {
        if let Some(c) = self.cluster.clusters.by_server.get_mut(server) {
            c.partitioned = partitioned;
        }
    }

    /// Runs `perform` against the store of `cluster`; a partitioned (or unknown) cluster
    /// answers with `Unreachable` through `unreachable`.
    pub(super) fn in_cluster(
        &mut self,
        cluster: &RemoteCluster,
        perform: impl FnOnce(&mut World, Option<ApiError>) -> InputKind,
    ) -> InputKind {
        let reachable = self
            .cluster
            .clusters
            .by_server
            .get(&cluster.server)
            .is_some_and(|c| !c.partitioned);
        if !reachable {
            let e = ApiError::Unreachable {
                message: "no route to host (the cluster is partitioned)".to_string(),
            };
            return perform(self, Some(e));
        }
        let mut remote = match self.cluster.clusters.by_server.get_mut(&cluster.server) {
            Some(c) => std::mem::replace(&mut c.store, Store::new(0)),
            None => return perform(self, None),
        };
        std::mem::swap(&mut self.cluster.store, &mut remote);
        let answer = perform(self, None);
        std::mem::swap(&mut self.cluster.store, &mut remote);
        if let Some(c) = self.cluster.clusters.by_server.get_mut(&cluster.server) {
            c.store = remote;
        }
        answer
    }

    /// The objects of the remote cluster `server` but its Namespaces (for scenarios and tests).
    pub fn cluster_objects(&self, server: &str) -> Vec<opm_core::ResourceId> {
        self.cluster
            .clusters
            .by_server
            .get(server)
            .map(|c| {
                c.store
                    .objects()
                    .filter(|o| o.id.kind != "Namespace")
                    .map(|o| o.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}
