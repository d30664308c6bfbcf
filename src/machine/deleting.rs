//! The deletion path (SPEC §12).

use crate::api::DeletionPolicy;
use crate::config::AllowOperatorIdentity;
use crate::constants::FINALIZER;
use crate::deletion::{self, Plan};
use crate::effect::{Effect, EventType};
use crate::input::{ApiError, DependencyReport};
use crate::object::ResourceId;
use crate::outcome::{Failure, Outcome};
use crate::reason::Reason;
use crate::teardown;

use super::ctx::Step;
use super::{After, Attempt, Phase};

impl Attempt {
    pub(super) fn deletion_start(&mut self) {
        self.ctx.step = Step::Deletion;
        // SPEC §31: in a remote cluster, no ServiceAccount means the kubeconfig's identity.
        let remote = self.ctx.common.kube_config.is_some();
        let allow = if remote {
            AllowOperatorIdentity::Cluster
        } else {
            self.cfg.allow_operator_identity
        };
        let count = self.ctx.persisted_entries().len();
        let plan = deletion::plan(
            deletion::deletes(self.ctx.common.deletion_policy, self.ctx.common.prune),
            count,
            self.ctx.service_account.as_deref(),
            allow,
        );
        if plan == Plan::RemoveFinalizer {
            // Nothing of ours is deleted: dependents lose nothing by our going first.
            return self.remove_finalizer();
        }
        if !self.ctx.cluster_read {
            return self.cluster_step(super::cluster::ClusterNext::Deletion);
        }
        if self.ctx.moved {
            // The objects stay where they are: nothing a dependent needs is deleted.
            return self.deletion_elsewhere();
        }
        self.phase = Phase::ListingDependents { plan };
        self.out.push(Effect::ListDependents {
            release: self.ctx.key.clone(),
        });
    }

    /// SPEC §32: the releases that still depend on this one hold its deletion back.
    pub(super) fn on_dependents(&mut self, plan: Plan, result: Result<DependencyReport, ApiError>) {
        let report = match result {
            Ok(r) => r,
            Err(e) => {
                return self.fail(Failure::transient(
                    Reason::DependentsExist,
                    format!("listing the releases that depend on this one failed: {e}"),
                ));
            }
        };
        let own_refs = crate::deps::release_keys(&self.ctx.key, &self.ctx.common.depends_on);
        let blockers = teardown::blockers(
            &self.ctx.key,
            &own_refs,
            &report,
            self.cfg.allow_cross_namespace_refs,
        );
        if blockers.is_empty() {
            return self.follow_plan(plan);
        }
        if deletion::orphan_requested(self.ctx.orphan_annotation.as_deref()) {
            let count = self.ctx.persisted_entries().len();
            let note = teardown::orphaned_message(count, &blockers);
            self.event(EventType::Warning, Reason::OrphanedOnDeletion, &note);
            let mut s = self.ctx.persisted.clone();
            s.inventory = None;
            return self.commit(s, After::RemoveFinalizer);
        }
        let message = teardown::waiting_message(&blockers);
        self.fail(Failure::soft(Reason::DependentsExist, message));
    }

    fn follow_plan(&mut self, plan: Plan) {
        match plan {
            Plan::RemoveFinalizer => self.remove_finalizer(),
            Plan::ServiceAccountMissing => self.deletion_sa_missing(),
            Plan::CheckServiceAccount(sa) => {
                self.phase = Phase::CheckingServiceAccount;
                self.out.push(Effect::CheckServiceAccount {
                    namespace: self.ctx.key.namespace.clone(),
                    name: sa,
                    cluster: self.ctx.cluster.clone(),
                });
            }
            Plan::Prune => self.prune_everything(),
        }
    }

    /// SPEC §31: the release is deleted while its kubeconfig points at another cluster
    /// than the one holding its objects. Deleting there would touch objects of the same
    /// names that are not ours; they are left, and the event says where.
    fn deletion_elsewhere(&mut self) {
        if let Some(left) = &self.ctx.left_behind {
            let from = if left.cluster.is_empty() {
                "the operator's cluster".to_string()
            } else {
                left.cluster.clone()
            };
            let note = format!(
                "release deleted while its kubeconfig points at another cluster; its {} \
                 objects in {from} were left there",
                left.count
            );
            self.event(EventType::Warning, Reason::ClusterChanged, &note);
        }
        let mut s = self.ctx.persisted.clone();
        s.inventory = None;
        self.commit(s, After::RemoveFinalizer);
    }

    /// SPEC §32: `pre-delete` hooks first, then the prune of the whole inventory.
    fn prune_everything(&mut self) {
        self.hooks_start(crate::hooks::HookPhase::PreDelete, None);
    }

    pub(super) fn prune_all_now(&mut self) {
        let all = self.ctx.persisted_entries().to_vec();
        self.start_prune(&all);
    }

    pub(super) fn on_deletion_service_account(&mut self, result: Result<bool, ApiError>) {
        let sa = self.ctx.service_account.clone().unwrap_or_default();
        let ns = self.ctx.key.namespace.clone();
        match result {
            Ok(true) => self.prune_everything(),
            Ok(false) => self.deletion_sa_missing(),
            Err(e) => self.fail(Failure::transient(
                Reason::ImpersonationFailed,
                format!("reading ServiceAccount {ns}/{sa} failed: {e}"),
            )),
        }
    }

    /// SPEC §12 step 2: the ServiceAccount is missing, or there is none and the operator
    /// may not use its own identity.
    fn deletion_sa_missing(&mut self) {
        let sa = self.ctx.service_account.clone();
        let ns = self.ctx.key.namespace.clone();
        let count = self.ctx.persisted_entries().len();
        if deletion::orphan_requested(self.ctx.orphan_annotation.as_deref()) {
            return self.orphan_on_deletion();
        }
        self.fail(Failure::stalled(
            Reason::DeletionSAMissing,
            deletion::sa_missing_message(&ns, sa.as_deref(), count),
        ));
    }

    /// SPEC §12: the orphan annotation lets the release go, its objects left in place.
    pub(super) fn orphan_on_deletion(&mut self) {
        let count = self.ctx.persisted_entries().len();
        let note = deletion::orphaned_message(count, self.ctx.service_account.as_deref());
        self.event(EventType::Warning, Reason::OrphanedOnDeletion, &note);
        let mut s = self.ctx.persisted.clone();
        s.inventory = None;
        self.commit(s, After::RemoveFinalizer)
    }

    /// Everything owned is deleted: with `WaitForTermination`, wait until it is gone (held
    /// by its own finalizers as long as they last) before letting the release go.
    pub(super) fn deletion_done(&mut self) {
        let waiting: Vec<_> = self
            .ctx
            .deletions
            .iter()
            .filter(|d| !d.orphan)
            .cloned()
            .collect();
        if self.ctx.common.deletion_policy == Some(DeletionPolicy::WaitForTermination)
            && !waiting.is_empty()
        {
            self.phase = Phase::AwaitingTermination;
            self.out.push(Effect::AwaitTermination {
                targets: waiting,
                identity: self.ctx.identity.clone(),
                cluster: self.ctx.cluster.clone(),
                until: self.deadline,
            });
            return;
        }
        self.deletion_finished();
    }

    pub(super) fn on_terminated(&mut self, remaining: Vec<ResourceId>, error: Option<ApiError>) {
        if remaining.is_empty() && error.is_none() {
            return self.deletion_finished();
        }
        self.ctx.prune_ok = Some(false);
        let msg = deletion::termination_message(&remaining, error.as_ref(), self.ctx.timeout);
        self.fail(Failure::transient(Reason::PruneFailed, msg));
    }

    fn deletion_finished(&mut self) {
        if self.ctx.pruned > 0 {
            let note = format!("Pruned {} stale resources", self.ctx.pruned);
            self.event(EventType::Normal, Reason::Pruned, &note);
        }
        self.remove_finalizer();
    }

    pub(super) fn remove_finalizer(&mut self) {
        self.phase = Phase::RemovingFinalizer;
        self.out.push(Effect::RemoveFinalizer {
            finalizer: FINALIZER.to_string(),
        });
    }

    pub(super) fn on_finalizer_removed(&mut self, result: Result<(), ApiError>) {
        match result {
            Ok(()) => self.done_now(Outcome::NoOp, Reason::Deleted, None),
            Err(e) => self.finalizer_failed(&e),
        }
    }
}
