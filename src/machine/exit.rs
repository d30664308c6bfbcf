//! Every way an attempt ends (SPEC §4, §10, §11, §13): conditions, events, the status to
//! commit, metrics and `Done`.

use std::time::Duration;

use crate::api::{HistoryEntry, ReleaseStatus};
use crate::backoff::{compute_backoff, honour_retry_after};
use crate::conditions::{FALSE, TRUE, k8s_time};
use crate::constants::conditions as ct;
use crate::effect::{Effect, Event, EventType, Metric};
use crate::input::ApiError;
use crate::outcome::{Failure, FailureClass, Outcome};
use crate::reason::Reason;
use crate::status::{self, is_empty_patch, merge_patch};

use super::ctx::ApplyCounts;
use super::{After, Attempt, DoneInfo, Phase, add};

impl Attempt {
    pub(super) fn event(&mut self, event_type: EventType, reason: Reason, note: &str) {
        self.out.push(Effect::EmitEvent {
            event: Event {
                event_type,
                reason,
                action: reason.action().to_string(),
                // events.k8s.io/v1 rejects notes over 1 KiB; a note may quote a tenant's
                // input, so control characters go first (SPEC §24).
                note: crate::conditions::truncate(
                    &crate::conditions::without_control(note),
                    crate::constants::EVENT_NOTE_MAX,
                ),
            },
        });
    }

    /// Ends the attempt at once: metrics (none here) and `Done`.
    pub(super) fn done_now(&mut self, outcome: Outcome, reason: Reason, requeue: Option<Duration>) {
        self.emit_done(DoneInfo {
            outcome,
            reason,
            requeue,
            metrics: Vec::new(),
        });
    }

    fn emit_done(&mut self, d: DoneInfo) {
        let extra = std::mem::take(&mut self.ctx.health_metrics);
        for metric in d.metrics.into_iter().chain(extra) {
            self.out.push(Effect::RecordMetric { metric });
        }
        self.out.push(Effect::Done {
            outcome: d.outcome,
            reason: d.reason,
            // Every source is bounded already; this keeps the promise in one place.
            requeue_after: d.requeue.map(|r| r.min(crate::backoff::MAX_REQUEUE)),
        });
        self.phase = Phase::Finished;
    }

    /// What an attempt that applied reports beside its outcome: the apply counts, the prune
    /// count when pruning ran, and the inventory size. Shared by a completed attempt and one
    /// that applied and now waits for health, so both feed the same series.
    pub(super) fn applied_metrics(&self) -> Vec<Metric> {
        let ApplyCounts {
            created,
            updated,
            unchanged,
        } = self.ctx.counts;
        let mut metrics = vec![Metric::ApplyResources {
            created,
            updated,
            unchanged,
        }];
        if self.ctx.prune_ran {
            metrics.push(Metric::PruneResources {
                count: self.ctx.pruned,
            });
        }
        metrics.push(Metric::InventorySize {
            count: self.ctx.entries.len() as u64,
        });
        metrics
    }

    pub(super) fn reconcile_metric(&self, outcome: Outcome) -> Metric {
        Metric::Reconcile {
            outcome,
            duration: self.elapsed(),
        }
    }

    /// The persisted status with this attempt's generation and finalised conditions: all a
    /// suspended release's commit changes.
    pub(super) fn observed_status(&self) -> ReleaseStatus {
        let mut s = self.ctx.persisted.clone();
        s.observed_generation = self.ctx.generation;
        s.conditions = self.ctx.conds.finalize(
            &self.ctx.persisted.conditions,
            self.now,
            self.ctx.generation,
        );
        s
    }

    /// The status every commit shares: observed generation, finalised conditions, the
    /// on-demand token.
    pub(super) fn base_status(&self) -> ReleaseStatus {
        let mut s = self.observed_status();
        if let Some(t) = &self.ctx.requested_at {
            s.last_handled_reconcile_at = t.clone();
        }
        if let Some(h) = &self.ctx.health {
            s.health = Some(h.clone());
        } else if !self.ctx.common.waits() {
            s.health = None;
        }
        s
    }

    /// An attempt that counts (SPEC §10): its failure counters updated by whether it
    /// `succeeded`, and its `lastAttempted*` fields.
    pub(super) fn record_counted_attempt(&self, s: &mut ReleaseStatus, succeeded: bool) {
        status::update_counters(
            &mut s.failure_counters,
            Some(succeeded),
            self.ctx.apply_ok,
            self.ctx.prune_ok,
            self.ctx.drift_ok,
        );
        self.record_attempt(s);
    }

    fn record_attempt(&self, s: &mut ReleaseStatus) {
        let d = &self.ctx.digests;
        s.release_uuid = self.ctx.uuid.clone();
        if let Some(src) = &self.ctx.source_status {
            s.source = Some(src.clone());
        }
        s.last_attempted_action = "reconcile".to_string();
        s.last_attempted_at = Some(k8s_time(self.start));
        s.last_attempted_duration = crate::duration::format(self.elapsed());
        s.last_attempted_source_digest = d.source.clone();
        s.last_attempted_config_digest = d.config.clone();
        s.last_attempted_render_digest = d.render.clone();
    }

    pub(super) fn history(&self, phase: &str, message: &str, with_inventory: bool) -> HistoryEntry {
        let d = &self.ctx.digests;
        HistoryEntry {
            sequence: 0,
            action: "reconcile".to_string(),
            phase: phase.to_string(),
            started_at: Some(k8s_time(self.start)),
            finished_at: Some(k8s_time(self.now)),
            source_digest: d.source.clone(),
            config_digest: d.config.clone(),
            render_digest: d.render.clone(),
            inventory_digest: if with_inventory {
                d.inventory.clone()
            } else {
                String::new()
            },
            inventory_count: if with_inventory {
                self.ctx.entries.len() as i64
            } else {
                0
            },
            message: message.to_string(),
        }
    }

    /// A failed exit of SPEC §4.
    pub(super) fn fail(&mut self, f: Failure) {
        let c = &mut self.ctx.conds;
        c.set(ct::READY, FALSE, f.reason, &f.message);
        match f.class {
            FailureClass::Stalled => {
                c.set(ct::STALLED, TRUE, f.reason, &f.message);
                c.remove(ct::RECONCILING);
            }
            FailureClass::Transient | FailureClass::SoftBlocked => c.remove(ct::STALLED),
        }
        let shown_message = c
            .get(ct::READY)
            .map(|r| r.message.clone())
            .unwrap_or_default();
        match f.class {
            FailureClass::SoftBlocked => self.event(EventType::Normal, f.reason, &f.message),
            _ => {
                // No event storms: a Warning already shown by the persisted Ready is not repeated.
                let already = self.ctx.persisted.conditions.iter().any(|p| {
                    p.type_ == ct::READY
                        && p.status == FALSE
                        && p.reason == f.reason
                        && p.message == shown_message
                });
                if !already {
                    self.event(EventType::Warning, f.reason, &f.message);
                }
            }
        }
        let mut s = self.base_status();
        let mut failures = s.failure_counters.reconcile;
        if f.class != FailureClass::SoftBlocked {
            self.record_counted_attempt(&mut s, false);
            failures = s.failure_counters.reconcile;
            if self.ctx.applied {
                self.record_applied(&mut s, self.ctx.applied_at.unwrap_or(self.now));
            }
            let entry = self.history(self.ctx.step.as_str(), &f.message, false);
            status::push_history(&mut s.history, entry);
        } else if let Some(src) = &self.ctx.source_status {
            s.source = Some(src.clone());
        }
        let requeue = f.requeue(failures, self.cfg.requeue_dependency);
        s.next_retry_at = Some(k8s_time(add(self.now, requeue)));
        let outcome = f.outcome();
        let metrics = vec![self.reconcile_metric(outcome)];
        self.commit(
            s,
            After::Done(DoneInfo {
                outcome,
                reason: f.reason,
                requeue: Some(requeue),
                metrics,
            }),
        );
    }

    /// `Ready=True/ReconciliationSucceeded`; `Reconciling` and `Stalled` removed.
    fn mark_succeeded(&mut self) {
        let c = &mut self.ctx.conds;
        c.set(
            ct::READY,
            TRUE,
            Reason::ReconciliationSucceeded,
            "Reconciliation succeeded",
        );
        c.remove(ct::RECONCILING);
        c.remove(ct::STALLED);
    }

    /// SPEC §3 step 17: applied (and maybe pruned).
    pub(super) fn success(&mut self, outcome: Outcome) {
        self.mark_succeeded();
        self.ctx.conds.remove(ct::DRIFTED);
        self.applied_events(Some(outcome));
        self.event(
            EventType::Normal,
            Reason::ReconciliationSucceeded,
            "Reconciliation succeeded",
        );

        let mut s = self.base_status();
        self.record_counted_attempt(&mut s, true);
        self.record_applied(&mut s, self.now);
        let entry = self.history("complete", "", true);
        status::push_history(&mut s.history, entry);
        s.next_retry_at = None;

        let mut metrics = vec![self.reconcile_metric(outcome)];
        metrics.extend(self.applied_metrics());
        let requeue = Some(self.ctx.interval);
        self.commit(
            s,
            After::Done(DoneInfo {
                outcome,
                reason: Reason::ReconciliationSucceeded,
                requeue,
                metrics,
            }),
        );
    }

    /// SPEC §3 step 14 and §10's NoOp commit: conditions, observedGeneration, counters
    /// `reconcile`/`drift`, `nextRetryAt` cleared. Nothing else.
    pub(super) fn noop_exit(&mut self) {
        self.mark_succeeded();
        self.event(EventType::Normal, Reason::NoOp, "No changes detected");
        // A NoOp never touches the history, the bulk of a status, and most NoOps change
        // nothing at all: the status is built and compared without it, and the history is
        // copied only when there is something to commit.
        let history = std::mem::take(&mut self.ctx.persisted.history);
        let mut s = self.base_status();
        status::update_counters(
            &mut s.failure_counters,
            Some(true),
            None,
            None,
            self.ctx.drift_ok,
        );
        s.next_retry_at = None;
        let unchanged = s == self.ctx.persisted;
        self.ctx.persisted.history = history;
        let metrics = vec![self.reconcile_metric(Outcome::NoOp)];
        let requeue = Some(self.ctx.interval);
        let after = After::Done(DoneInfo {
            outcome: Outcome::NoOp,
            reason: Reason::NoOp,
            requeue,
            metrics,
        });
        if unchanged {
            // What `commit` does with a status equal to the persisted one.
            return self.after_patch(after);
        }
        s.history = self.ctx.persisted.history.clone();
        self.commit(s, after);
    }

    /// A finalizer patch failed: nothing was committed; retry with backoff.
    pub(super) fn finalizer_failed(&mut self, e: &ApiError) {
        let note = format!("updating the finalizer failed: {e}");
        self.unpersisted_failure(Reason::FinalizerFailed, &note, e);
    }

    /// A write of our own failed, so no status records this attempt: a Warning, and a
    /// backoff as if the failure counter had been incremented (the interpreter keeps that
    /// count in memory).
    fn unpersisted_failure(&mut self, reason: Reason, note: &str, e: &ApiError) {
        self.event(EventType::Warning, reason, note);
        let n = self
            .ctx
            .persisted
            .failure_counters
            .reconcile
            .saturating_add(1);
        let metrics = vec![self.reconcile_metric(Outcome::FailedTransient)];
        self.emit_done(DoneInfo {
            outcome: Outcome::FailedTransient,
            reason,
            requeue: Some(honour_retry_after(compute_backoff(n), e)),
            metrics,
        });
    }

    /// Sends the status as one merge patch, unless it changes nothing.
    pub(super) fn commit(&mut self, new: ReleaseStatus, after: After) {
        // Equal statuses serialise alike, so their patch is empty: most attempts (periodic
        // NoOps) end here without turning both statuses into JSON to diff them.
        if new == self.ctx.persisted {
            return self.after_patch(after);
        }
        let old = serde_json::to_value(&self.ctx.persisted).unwrap_or_default();
        let new_value = serde_json::to_value(&new).unwrap_or_default();
        let patch = merge_patch(&old, &new_value);
        if is_empty_patch(&patch) {
            return self.after_patch(after);
        }
        self.out.push(Effect::PatchStatus {
            patch,
            status: Box::new(new),
        });
        self.phase = Phase::PatchingStatus { after };
    }

    fn after_patch(&mut self, after: After) {
        match after {
            After::Done(d) => self.emit_done(d),
            After::RemoveFinalizer => self.remove_finalizer(),
        }
    }

    pub(super) fn on_status_patched(&mut self, after: After, result: Result<(), ApiError>) {
        match result {
            Ok(()) => self.after_patch(after),
            Err(e) => {
                let note = format!("writing the status failed: {e}");
                self.unpersisted_failure(Reason::StatusPatchFailed, &note, &e);
            }
        }
    }
}
