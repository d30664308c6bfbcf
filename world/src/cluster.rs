//! The simulated cluster: everything an effect executor reads or writes, apart from the
//! schedule that drives it ([`crate::schedule`]) and the operator's own bookkeeping (the
//! work queue, logs and memos in [`crate::World`]).

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::catalog::Catalog;
use crate::clusters::Clusters;
use crate::health::SimRollout;
use crate::rbac::Rbac;
use crate::releases::Releases;
use crate::store::{FixedHashMap, Store};

/// The cluster the executors act on, as the interpreter's executors act on a real one.
#[derive(Clone, Debug)]
pub(crate) struct Cluster {
    /// Objects, their fields and managers, server-side apply's rules.
    pub(crate) store: Store,
    /// The release objects: finalizers, generation, status subresource (SPEC §12).
    pub(crate) releases: Releases,
    /// Flux sources, artifacts and modules (SPEC §16-18).
    pub(crate) catalog: Catalog,
    /// ServiceAccounts and what they may do (SPEC §15).
    pub(crate) rbac: Rbac,
    /// Remote clusters and the kubeconfig Secrets naming them (SPEC §31).
    pub(crate) clusters: Clusters,
    /// Simulated rollouts by object name (SPEC §26); absent = healthy once applied.
    pub(crate) rollouts: BTreeMap<String, SimRollout>,
    /// Last apply of each object: its rollout's start (looked up, never walked).
    pub(crate) applied_at: FixedHashMap<(String, String, String, String), Timestamp>,
    /// The Platform `cluster` (SPEC §30) as the operator's controller left it, if any.
    pub(crate) platform: Option<opm_core::api::platform::Platform>,
}

impl Cluster {
    /// An empty cluster whose object uids are drawn from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            store: Store::new(seed),
            releases: Releases::default(),
            catalog: Catalog::default(),
            rbac: Rbac::default(),
            clusters: Clusters::default(),
            rollouts: BTreeMap::new(),
            applied_at: Default::default(),
            platform: None,
        }
    }
}
