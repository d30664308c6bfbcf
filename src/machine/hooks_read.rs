//! Reading a phase's hooks and judging each (SPEC §32): which Jobs are done, which run
//! again, which wait or failed. `hooks.rs` acts on the sorted verdicts.

use crate::conditions::FALSE;
use crate::constants::conditions as ct;
use crate::health;
use crate::hooks::{self, HookPhase, Judging, Verdict};
use crate::input::HealthObject;
use crate::object::ResourceId;
use crate::outcome::Failure;
use crate::reason::Reason;

use super::Attempt;
use super::health_read::judge;
use super::hook_verdicts::Sorted;
use super::hooks::{HookRun, HookStep};

impl Attempt {
    pub(super) fn on_hooks_read(&mut self, run: HookRun, objects: Vec<HealthObject>) {
        let rules = match health::compile(&self.ctx.common.health_check_exprs) {
            Ok(r) => r.with_deadline(self.eval_deadline.clone()),
            Err(e) => {
                return self.fail(Failure::stalled(Reason::HealthCheckFailed, e.to_string()));
            }
        };
        let j = Judging {
            render_digest: &self.ctx.digests.render,
            now: self.now,
            timeout: self.ctx.timeout,
            retry_due: self.hook_retry_due(),
            after_write: run.step == HookStep::Rereading,
        };
        let mut sorted = Sorted::default();
        for o in &objects {
            if let Some(verdict) = self.hook_verdict(run.phase, &run.deleted, o, &rules, &j) {
                sorted.add(&o.id, verdict, self.rendered_phase(&o.id));
            }
        }
        self.hooks_act(run, sorted)
    }

    /// The phase a rendered object's hook annotation names, if it is rendered.
    fn rendered_phase(&self, id: &ResourceId) -> Option<HookPhase> {
        self.ctx
            .desired
            .iter()
            .find(|d| d.id.identity() == id.identity())
            .and_then(|d| hooks::phase_of(&d.manifest))
    }

    /// The verdict on one hook read in `phase`; `None` for an object this run leaves alone
    /// (another release's Job, or a `pre-delete` Job whose render did not change).
    fn hook_verdict(
        &self,
        phase: HookPhase,
        deleted: &[String],
        o: &HealthObject,
        rules: &health::HealthRules,
        j: &Judging<'_>,
    ) -> Option<Verdict> {
        let live = match &o.result {
            Ok(v) => v.as_ref(),
            Err(e) => return Some(Verdict::Waiting(format!("reading it failed: {e}"))),
        };
        let gone_uid = live
            .and_then(|l| l.pointer("/metadata/uid"))
            .and_then(|u| u.as_str())
            .is_some_and(|u| deleted.iter().any(|d| d == u));
        if j.after_write && gone_uid {
            return Some(Verdict::Waiting("not yet updated".to_string()));
        }
        let assessment = judge(o, rules).assessment;
        let rendered_phase = self.rendered_phase(&o.id);
        let verdict = match phase {
            HookPhase::PreDelete => {
                // Only a Job this release owns (its live uuid label; the inventory is a
                // status a tenant may write) and annotated pre-delete is run.
                let ours = |l: &serde_json::Value| {
                    l.pointer("/metadata/labels")
                        .and_then(|m| m.get(crate::constants::labels::RELEASE_UUID))
                        .and_then(|u| u.as_str())
                        == Some(self.ctx.uuid.as_str())
                };
                if live
                    .is_some_and(|l| hooks::phase_of(l) != Some(HookPhase::PreDelete) || !ours(l))
                {
                    return None;
                }
                hooks::judge_pre_delete(live, &assessment, j)
            }
            // A `pre-delete` Job read before the apply: only a changed render matters
            // (the main apply creates it again, suspended).
            HookPhase::PreApply if rendered_phase == Some(HookPhase::PreDelete) => match live {
                Some(l) if !j.after_write && hooks::live_digest(l) != Some(j.render_digest) => {
                    Verdict::Recreate {
                        uid: l
                            .pointer("/metadata/uid")
                            .and_then(|u| u.as_str())
                            .unwrap_or_default()
                            .to_string(),
                    }
                }
                _ => return None,
            },
            _ => hooks::judge_apply_phase(&o.id, live, &assessment, j),
        };
        Some(verdict)
    }

    /// The backoff after this release's `HookFailed` has passed: a failed Job runs again.
    fn hook_retry_due(&self) -> bool {
        let failed = self.ctx.persisted.conditions.iter().any(|c| {
            c.type_ == ct::READY && c.status == FALSE && c.reason == Reason::HookFailed.as_str()
        });
        failed
            && self
                .ctx
                .persisted
                .next_retry_at
                .as_ref()
                .is_none_or(|t| t.0 <= self.now)
    }
}
