//! The remote cluster of SPEC §31: reading the kubeconfig before the first object read
//! or write of an attempt, and what a move to another server does to the inventory.

use crate::effect::{Effect, EventType};
use crate::remote::{self, KubeConfigError, KubeConfigFacts};

use super::ctx::Step;
use super::{Attempt, Phase};

/// Where an attempt goes once it knows its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClusterNext {
    /// SPEC §3 step 12 on: impersonation, drift, apply, prune, health.
    Reconcile,
    /// The deletion path (SPEC §12).
    Deletion,
}

impl Attempt {
    /// Reads the kubeconfig when the release names one, then goes on to `next`.
    pub(super) fn cluster_step(&mut self, next: ClusterNext) {
        let Some(kc) = self.ctx.common.kube_config.clone() else {
            self.ctx.cluster_read = true;
            return self.cluster_known(next);
        };
        self.ctx.step = Step::KubeConfig;
        let key = kc.secret_ref.key.clone().filter(|k| !k.is_empty());
        self.phase = Phase::ReadingKubeConfig { next };
        self.out.push(Effect::ReadKubeConfig {
            namespace: self.ctx.key.namespace.clone(),
            name: kc.secret_ref.name,
            key,
            max_bytes: self.cfg.max_kubeconfig_bytes,
        });
    }

    pub(super) fn on_kube_config(
        &mut self,
        next: ClusterNext,
        result: Result<KubeConfigFacts, KubeConfigError>,
    ) {
        let kc = self.ctx.common.kube_config.clone().unwrap_or_default();
        let ns = self.ctx.key.namespace.clone();
        let name = kc.secret_ref.name;
        let key = kc.secret_ref.key.filter(|k| !k.is_empty());
        let checked = result
            .map_err(|e| {
                remote::read_failure(
                    &e,
                    &ns,
                    &name,
                    key.as_deref(),
                    self.cfg.max_kubeconfig_bytes,
                )
            })
            .and_then(|facts| {
                remote::check(&facts, &ns, &name, self.cfg.allow_insecure_kubeconfig)
            });
        match checked {
            // A release that cannot reach its cluster can still be let go (SPEC §12).
            Err(_)
                if next == ClusterNext::Deletion
                    && crate::deletion::orphan_requested(self.ctx.orphan_annotation.as_deref()) =>
            {
                self.orphan_on_deletion()
            }
            Err(f) => self.fail(f),
            Ok(cluster) => {
                self.ctx.cluster = Some(cluster);
                self.ctx.cluster_read = true;
                // A ServiceAccount found in this cluster (for `valuesFrom`) says nothing of
                // the remote one: it is checked there.
                self.ctx.sa_checked = false;
                self.cluster_known(next);
            }
        }
    }

    fn cluster_known(&mut self, next: ClusterNext) {
        let inventory = self.ctx.persisted.inventory.as_ref();
        if remote::moved(inventory, self.ctx.cluster.as_ref())
            && let Some(inv) = inventory
        {
            let left = remote::left_behind(inv, self.now);
            let note = remote::moved_message(&left, self.ctx.cluster.as_ref());
            self.event(
                EventType::Warning,
                crate::reason::Reason::ClusterChanged,
                &note,
            );
            self.ctx.left_behind = Some(left);
            self.ctx.moved = true;
            // Nothing of the old inventory is in this cluster: nothing stale to prune here.
            self.ctx.stale = Vec::new();
        }
        match next {
            ClusterNext::Reconcile => self.impersonation_step(),
            ClusterNext::Deletion => self.deletion_start(),
        }
    }
}
