//! The second half of SPEC §3: drift check, no-op, ownership, apply and prune (steps
//! 13-16). The first half, up to impersonation, is `flow.rs`.

use crate::api::DriftMode;
use crate::conditions::TRUE;
use crate::constants::{FIELD_MANAGER, conditions as ct};
use crate::effect::{Effect, EventType};
use crate::input::{ApiError, ApplyAction, ApplyReport, DriftReport, LiveObject, ObjectResult};
use crate::outcome::{Failure, Outcome};
use crate::reason::Reason;
use crate::render_value;
use crate::{desired, drift, exits, impersonation, ownership, policy, prune};

use super::ctx::{ApplyCounts, Step};
use super::{Attempt, Phase};

impl Attempt {
    /// SPEC §3 steps 13-14. The check only matters when the digests say "no change": with
    /// changed digests the apply that follows corrects drift anyway, because in `Correct`
    /// mode every apply forces (`write_step`).
    pub(super) fn drift_step(&mut self) {
        self.ctx.step = Step::Drift;
        if !self.ctx.digests_unchanged() {
            return self.apply_step();
        }
        if self.ctx.drift_mode() == DriftMode::Disabled {
            return self.unchanged();
        }
        self.phase = Phase::CheckingDrift;
        // Hooks are one-shot (a finished Job may be gone by its TTL): never drift.
        let objects = self
            .ctx
            .writable()
            .into_iter()
            .filter(|o| crate::hooks::phase_of(&o.manifest).is_none())
            .collect();
        self.out.push(Effect::CheckDrift {
            objects,
            field_manager: FIELD_MANAGER.to_string(),
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
    }

    pub(super) fn on_drift(&mut self, report: DriftReport) {
        let clean = drift::clean(&report);
        self.ctx.drift_ok = Some(clean);
        if let (Some((id, err)), Some(who)) = (drift::forbidden(&report), &self.ctx.identity) {
            let msg = format!(
                "drift check of {} forbidden while impersonating {}: {err}",
                id.display(),
                who.user
            );
            return self.fail(Failure::stalled(Reason::ImpersonationFailed, msg));
        }
        let drifted = drift::assess(&report, &self.ctx.desired);
        if drifted.is_empty() {
            if clean {
                self.ctx.conds.remove(ct::DRIFTED);
            }
            return self.unchanged();
        }
        let msg = drift::detailed_message(&drifted);
        let shown = self
            .ctx
            .persisted
            .conditions
            .iter()
            .any(|c| c.type_ == ct::DRIFTED && c.status == TRUE && c.message == msg);
        self.ctx
            .conds
            .set(ct::DRIFTED, TRUE, Reason::DriftDetected, &msg);
        if !shown {
            self.event(EventType::Warning, Reason::DriftDetected, &msg);
        }
        if self.ctx.drift_mode() == DriftMode::Correct {
            self.apply_step();
        } else {
            self.unchanged();
        }
    }

    /// SPEC §25: before an apply, read who owns each object the release renders. Every
    /// object is checked, `ssa: Ignore` and `IfNotPresent` ones and those the persisted
    /// inventory lists included: all of them enter the new inventory, and the inventory is
    /// a status a tenant may write. An unchanged release is a no-op and never gets here.
    fn apply_step(&mut self) {
        self.ctx.step = Step::Apply;
        let targets = ownership::targets(&self.ctx.desired);
        if targets.is_empty() {
            return self.write_step();
        }
        self.ctx.owner_targets = targets.clone();
        self.phase = Phase::InspectingOwners;
        self.out.push(Effect::InspectOwners {
            targets,
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
    }

    pub(super) fn on_owners(&mut self, objects: Vec<LiveObject>) {
        let decided = ownership::decide_listed(
            &self.ctx.owner_targets,
            &objects,
            &self.ctx.uuid,
            self.ctx.adopt_existing(),
            self.ctx.persisted_entries(),
            self.ctx.identity.as_ref().map(|i| i.user.as_str()),
        );
        match decided {
            Ok(()) => self.write_step(),
            Err(f) => {
                self.ctx.apply_ok = Some(false);
                self.fail(f)
            }
        }
    }

    /// In `Correct` mode every apply forces, not only the one a drift check asked for: an
    /// attempt whose digests changed skips the drift check, and without force its apply
    /// would stall `ApplyFailed` on a field a `kubectl edit` or another manager took, the
    /// very drift `Correct` promises to take back (SPEC §20). `ssa: Merge` objects never
    /// force (the interpreter drops it for them, §28), and ignored fields another manager
    /// owns are not in the applied object.
    fn write_step(&mut self) {
        // SPEC §32: `pre-apply` hooks run when the render changed, before anything else.
        if !self.ctx.digests_unchanged() && self.has_pre_apply_work() {
            return self.hooks_start(crate::hooks::HookPhase::PreApply, None);
        }
        self.main_write();
    }

    /// The objects of the main apply: all writable ones but `pre-apply`/`post-apply` hooks.
    fn main_writable(&self) -> Vec<crate::object::DesiredObject> {
        self.ctx
            .writable()
            .into_iter()
            .filter(crate::hooks::in_main_apply)
            .collect()
    }

    /// SPEC §19: the apply of everything but the phase hooks.
    pub(super) fn main_write(&mut self) {
        self.ctx.step = Step::Apply;
        self.phase = Phase::Applying;
        self.out.push(Effect::Apply {
            stages: render_value::stages(&self.main_writable()),
            field_manager: FIELD_MANAGER.to_string(),
            force: self.ctx.force_conflicts() || self.ctx.drift_mode() == DriftMode::Correct,
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
    }

    pub(super) fn on_apply(&mut self, report: ApplyReport) {
        let mut failures = Vec::new();
        let (mut created, mut updated, mut unchanged) = (0, 0, 0);
        for o in &report.objects {
            match &o.result {
                Ok(ApplyAction::Created) => created += 1,
                Ok(ApplyAction::Updated) => updated += 1,
                Ok(ApplyAction::Recreated) => {
                    updated += 1;
                    let note = policy::recreated_message(&o.id);
                    self.event(EventType::Normal, Reason::Recreated, &note);
                }
                Ok(ApplyAction::Unchanged) => unchanged += 1,
                Err(e) => failures.push((&o.id, e)),
            }
        }
        self.ctx.counts = ApplyCounts {
            created,
            updated,
            unchanged,
        };
        let writable = self.main_writable();
        let reported = writable
            .iter()
            .filter(|d| report.objects.iter().any(|o| o.id == d.id))
            .count();
        if failures.is_empty() && reported == writable.len() {
            self.ctx.apply_ok = Some(true);
            return self.prune_step();
        }
        self.ctx.apply_ok = Some(false);
        let who = self.ctx.identity.as_ref().map(|i| i.user.as_str());
        self.fail(exits::apply_failure(
            &failures,
            reported,
            writable.len(),
            who,
        ));
    }

    /// Without `prune`, only the stale objects marked `prune: disabled` are visited: they
    /// are orphaned (labels removed) so another release can adopt them (SPEC §25 handover).
    fn prune_step(&mut self) {
        let stale: Vec<_> = self
            .ctx
            .stale
            .iter()
            .filter(|e| desired::prune_visits(e, self.ctx.common.prune))
            .cloned()
            .collect();
        if stale.is_empty() {
            return self.applied_ok(Outcome::Applied);
        }
        self.start_prune(&stale);
    }

    /// Prunes `entries` (the stale set, or the whole inventory on deletion).
    pub(super) fn start_prune(&mut self, entries: &[crate::api::InventoryEntry]) {
        self.ctx.step = if self.ctx.deleting {
            Step::Deletion
        } else {
            Step::Prune
        };
        self.ctx.prune_ran = true;
        // As the confined operator (SPEC §15), objects outside the namespace are left alone.
        let confined = self.ctx.identity.is_none()
            && impersonation::confined(self.cfg.allow_operator_identity);
        let (entries, outside) = if confined {
            impersonation::split_prunable(&self.ctx.key.namespace, entries)
        } else {
            (entries.to_vec(), Vec::new())
        };
        if !outside.is_empty() {
            let note = impersonation::prune_skipped_message(&self.ctx.key.namespace, &outside);
            self.event(EventType::Warning, Reason::PruneSkipped, &note);
        }
        let (protected, targets) = prune::plan(&entries);
        self.ctx.orphan_targets = entries
            .iter()
            .filter(|e| ownership::prune_disabled(e))
            .map(crate::object::ResourceId::from_entry)
            .collect();
        if !protected.is_empty() {
            let names: Vec<String> = protected.iter().map(|p| p.display()).collect();
            let note = format!(
                "Skipped pruning {} resource(s) that are never deleted: {}",
                names.len(),
                names.join(", ")
            );
            self.event(EventType::Warning, Reason::PruneSkipped, &note);
        }
        if targets.is_empty() {
            return self.finish_prune();
        }
        self.ctx.prune_targets = targets.clone();
        self.phase = Phase::InspectingStale;
        self.out.push(Effect::InspectStale {
            targets,
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
    }

    pub(super) fn on_inspect(&mut self, objects: Vec<LiveObject>) {
        let d = prune::decide(
            &self.ctx.prune_targets,
            &objects,
            &self.ctx.uuid,
            &self.ctx.orphan_targets,
        );
        self.ctx.prune_failures = d.failures;
        if d.deletions.is_empty() {
            return self.finish_prune();
        }
        self.ctx.deletions = d.deletions.clone();
        self.phase = Phase::Pruning;
        self.out.push(Effect::Prune {
            deletions: d.deletions,
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
    }

    pub(super) fn on_prune(&mut self, results: Vec<ObjectResult>) {
        let (n, failures) = prune::tally(&self.ctx.deletions, &results);
        self.ctx.pruned = n;
        self.ctx.prune_failures.extend(failures);
        self.finish_prune();
    }

    fn finish_prune(&mut self) {
        if self.ctx.prune_failures.is_empty() {
            self.ctx.prune_ok = Some(true);
            return if self.ctx.deleting {
                self.deletion_done()
            } else {
                self.applied_ok(Outcome::AppliedAndPruned)
            };
        }
        self.ctx.prune_ok = Some(false);
        let msg = prune::failure_message(&self.ctx.prune_failures);
        let forbidden = self
            .ctx
            .prune_failures
            .iter()
            .any(|f| matches!(f.error, ApiError::Forbidden { .. }));
        let who = self.ctx.identity.as_ref().map(|i| i.user.as_str());
        self.fail(exits::prune_failure(msg, forbidden, who));
    }
}
