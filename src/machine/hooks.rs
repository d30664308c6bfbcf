//! SPEC §32 hooks in the attempt: a phase reads its hooks, deletes the Jobs to run again,
//! applies what is missing or another render's, resumes suspended `pre-delete` Jobs, reads
//! them back, and either goes on (all done), waits (`Progressing`, without holding a
//! worker: the next attempt reads them again) or fails (`HookFailed`). The rules are
//! `crate::hooks`.

use std::time::Duration;

use crate::conditions::TRUE;
use crate::constants::{FIELD_MANAGER, conditions as ct};
use crate::effect::{Effect, HealthTarget};
use crate::hooks::{self, HookPhase};
use crate::input::{ApplyReport, InputName, ObjectResult};
use crate::object::{DesiredObject, ResourceId};
use crate::outcome::{Failure, Outcome};
use crate::reason::Reason;
use crate::render_value;

use super::ctx::Step;
use super::hook_verdicts::Sorted;
use super::{Attempt, Phase};

/// One phase's run through its hooks.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HookRun {
    pub(super) phase: HookPhase,
    /// The outcome of this attempt's main apply (`post-apply`), if there was one.
    pub(super) applied: Option<Outcome>,
    pub(super) step: HookStep,
    /// What is read: the phase's hooks (and, before an apply, the `pre-delete` Jobs whose
    /// render changed).
    pub(super) targets: Vec<ResourceId>,
    /// Hooks to apply once the Jobs to recreate are deleted.
    pub(super) apply: Vec<ResourceId>,
    /// The uids this run deleted: read back (a watch cache behind), they are waited for,
    /// never judged.
    pub(super) deleted: Vec<String>,
}

/// The effect a hook run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HookStep {
    /// The first read of the phase's hooks.
    Reading,
    /// Deleting the Jobs that run again (UID precondition).
    Deleting,
    /// Applying the hooks that are missing or another render's.
    Applying,
    /// Resuming suspended `pre-delete` Jobs.
    Resuming,
    /// The read after this attempt's writes.
    Rereading,
}

impl HookStep {
    /// The input that answers this step.
    pub(super) fn awaits(self) -> InputName {
        match self {
            HookStep::Reading | HookStep::Rereading => InputName::HealthRead,
            HookStep::Deleting | HookStep::Resuming => InputName::Pruned,
            HookStep::Applying => InputName::Applied,
        }
    }
}

/// The hooks' wait requeues as the health wait's first step; their watch events come first.
const HOOK_REQUEUE: Duration = Duration::from_secs(10);

impl Attempt {
    /// The rendered objects of `phase` the operator writes (`ssa: Ignore` ones are not).
    fn hooks_of(&self, phase: HookPhase) -> Vec<DesiredObject> {
        self.ctx
            .writable()
            .into_iter()
            .filter(|o| hooks::phase_of(&o.manifest) == Some(phase))
            .collect()
    }

    /// Whether the render has hooks that must run before the main apply: `pre-apply` ones,
    /// or `pre-delete` Jobs (recreated when their render changed).
    pub(super) fn has_pre_apply_work(&self) -> bool {
        self.ctx.desired.iter().any(|o| {
            matches!(
                hooks::phase_of(&o.manifest),
                Some(HookPhase::PreApply | HookPhase::PreDelete)
            )
        })
    }

    /// Whether `post-apply` hooks run now: always after this attempt's apply; on a NoOp
    /// attempt unless the last one already ended `Ready=True` at these digests.
    pub(super) fn post_hooks_due(&self, applied: Option<Outcome>) -> bool {
        if self.hooks_of(HookPhase::PostApply).is_empty() {
            return false;
        }
        applied.is_some()
            || !self
                .ctx
                .persisted
                .conditions
                .iter()
                .any(|c| c.type_ == ct::READY && c.status == TRUE)
    }

    /// Starts `phase`: reads its hooks, or goes on when there are none.
    pub(super) fn hooks_start(&mut self, phase: HookPhase, applied: Option<Outcome>) {
        self.ctx.step = Step::Hooks;
        let targets: Vec<ResourceId> = match phase {
            HookPhase::PreApply => self
                .hooks_of(HookPhase::PreApply)
                .into_iter()
                .chain(self.hooks_of(HookPhase::PreDelete))
                .map(|o| o.id)
                .collect(),
            HookPhase::PostApply => self
                .hooks_of(HookPhase::PostApply)
                .into_iter()
                .map(|o| o.id)
                .collect(),
            HookPhase::PreDelete => self
                .ctx
                .persisted_entries()
                .iter()
                .map(ResourceId::from_entry)
                .filter(hooks::is_job)
                .collect(),
        };
        let run = HookRun {
            phase,
            applied,
            step: HookStep::Reading,
            targets,
            apply: Vec::new(),
            deleted: Vec::new(),
        };
        if run.targets.is_empty() {
            return self.hooks_next(run);
        }
        self.hooks_read(run, HookStep::Reading);
    }

    fn hooks_read(&mut self, mut run: HookRun, step: HookStep) {
        run.step = step;
        self.out.push(Effect::AssessHealth {
            targets: run
                .targets
                .iter()
                .map(|id| HealthTarget {
                    id: id.clone(),
                    pods: false,
                })
                .collect(),
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
        self.phase = Phase::Hooks { run };
    }

    /// Acts on the sorted verdicts: a failure fails the attempt; otherwise Jobs to recreate
    /// are deleted first, then hooks applied, then suspended Jobs resumed; then the wait.
    pub(super) fn hooks_act(&mut self, mut run: HookRun, sorted: Sorted) {
        let Sorted {
            failed,
            waiting,
            apply,
            recreate,
            resume,
        } = sorted;
        if !failed.is_empty() {
            let msg = hooks::failed_message(run.phase, &failed);
            return self.fail(Failure::transient(Reason::HookFailed, msg));
        }
        if !recreate.is_empty() {
            run.apply = apply;
            run.deleted = recreate.iter().map(|d| d.uid.clone()).collect();
            run.step = HookStep::Deleting;
            self.out.push(Effect::Prune {
                deletions: recreate,
                identity: self.ctx.identity.clone(),
                cluster: self.ctx.cluster.clone(),
            });
            self.phase = Phase::Hooks { run };
            return;
        }
        if !apply.is_empty() {
            return self.hooks_apply(run, apply);
        }
        if !resume.is_empty() {
            run.step = HookStep::Resuming;
            self.out.push(Effect::Prune {
                deletions: resume,
                identity: self.ctx.identity.clone(),
                cluster: self.ctx.cluster.clone(),
            });
            self.phase = Phase::Hooks { run };
            return;
        }
        if !waiting.is_empty() {
            let msg = hooks::waiting_message(run.phase, &waiting);
            let requeue = HOOK_REQUEUE.min(self.remaining(self.now).max(Duration::from_secs(1)));
            let health = run.phase != HookPhase::PostApply;
            return self.progressing(run.applied, &msg, requeue, health);
        }
        self.hooks_next(run)
    }

    fn hooks_apply(&mut self, mut run: HookRun, ids: Vec<ResourceId>) {
        let objects: Vec<DesiredObject> = self
            .ctx
            .writable()
            .into_iter()
            .filter(|o| ids.iter().any(|i| i.identity() == o.id.identity()))
            .collect();
        if objects.is_empty() {
            return self.hooks_read(run, HookStep::Rereading);
        }
        run.apply = ids;
        run.step = HookStep::Applying;
        self.out.push(Effect::Apply {
            stages: render_value::stages(&objects),
            field_manager: FIELD_MANAGER.to_string(),
            force: self.ctx.force_conflicts()
                || self.ctx.drift_mode() == crate::api::DriftMode::Correct,
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
        self.phase = Phase::Hooks { run };
    }

    pub(super) fn on_hooks_written(&mut self, mut run: HookRun, results: Vec<ObjectResult>) {
        let failures: Vec<String> = results
            .iter()
            .filter_map(|r| {
                r.result
                    .as_ref()
                    .err()
                    .map(|e| format!("{}: {e}", r.id.display()))
            })
            .collect();
        if !failures.is_empty() {
            let what = if run.step == HookStep::Resuming {
                "resuming"
            } else {
                "deleting, to run it again,"
            };
            let msg = format!("{} hook failed: {what} {}", run.phase, failures.join(", "));
            return self.fail(Failure::transient(Reason::HookFailed, msg));
        }
        if run.step == HookStep::Deleting && !run.apply.is_empty() {
            let ids = std::mem::take(&mut run.apply);
            return self.hooks_apply(run, ids);
        }
        self.hooks_read(run, HookStep::Rereading);
    }

    pub(super) fn on_hooks_applied(&mut self, run: HookRun, report: ApplyReport) {
        let failures: Vec<_> = report
            .objects
            .iter()
            .filter_map(|o| o.result.as_ref().err().map(|e| (&o.id, e)))
            .collect();
        let reported = report.objects.len();
        if !failures.is_empty() || reported < run.apply.len() {
            let who = self.ctx.identity.as_ref().map(|i| i.user.as_str());
            let f = crate::exits::apply_failure(&failures, reported, run.apply.len(), who);
            return self.fail(f);
        }
        self.hooks_read(run, HookStep::Rereading);
    }

    /// Every hook of the phase is done: what follows it.
    fn hooks_next(&mut self, run: HookRun) {
        match run.phase {
            HookPhase::PreApply => self.main_write(),
            HookPhase::PostApply => self.finish_healthy(run.applied),
            HookPhase::PreDelete => self.prune_all_now(),
        }
    }
}
