//! SPEC §3 step 17 and §26: after the apply (or on a NoOp attempt), read the objects' health
//! and end the attempt `Ready` (all `Current`), `HealthCheckFailed` (one `Failed`, or not
//! all `Current` within `timeout` of the apply), or `Progressing`.
//!
//! The wait holds no worker: a `Progressing` attempt ends like any other, and the next one
//! (a managed object's watch event, or the short requeue) takes the NoOp path, which reads
//! health again. The wait's start is `status.lastAppliedAt`, so it survives a restart and a
//! new revision (a new apply) restarts it.

use std::time::Duration;

use crate::conditions::{FALSE, TRUE, UNKNOWN, k8s_time};
use crate::constants::conditions as ct;
use crate::effect::{Effect, EventType, HealthTarget, Metric};
use crate::health::{self, Judged};
use crate::input::HealthObject;
use crate::inventory;
use crate::outcome::{Failure, Outcome};
use crate::reason::Reason;
use crate::status;

use super::ctx::{ApplyCounts, Step};
use super::health_read::judge;
use super::{After, Attempt, DoneInfo, Phase, add};

/// Requeue while waiting when no watch event comes first: 10s, 20s, 40s, then 60s.
fn wait_requeue(waited: Duration) -> Duration {
    let s = waited.as_secs();
    Duration::from_secs(match s {
        0..10 => 10,
        10..30 => 20,
        30..70 => 40,
        _ => 60,
    })
}

impl Attempt {
    /// A stall when a `healthChecks` entry names another namespace without
    /// `--allow-cross-namespace-refs`, or a `healthCheckExprs` entry does not compile
    /// (checked before anything is applied, so an invalid check never waits until the
    /// timeout).
    pub(super) fn check_health_rules(&mut self) -> Result<(), Failure> {
        super::health_read::confine(
            &self.ctx.common.health_checks,
            &self.ctx.key.namespace,
            self.cfg.allow_cross_namespace_refs,
        )?;
        if !self.ctx.common.waits() {
            self.ctx.conds.remove(ct::HEALTHY);
            return Ok(());
        }
        match health::compile(&self.ctx.common.health_check_exprs) {
            Ok(_) => Ok(()),
            Err(e) => {
                let msg = e.to_string();
                self.ctx
                    .conds
                    .set(ct::HEALTHY, FALSE, Reason::HealthCheckFailed, &msg);
                Err(Failure::stalled(Reason::HealthCheckFailed, msg))
            }
        }
    }

    /// The apply (and prune) succeeded.
    pub(super) fn applied_ok(&mut self, outcome: Outcome) {
        if !self.ctx.common.waits() {
            self.ctx.applied = true;
            self.ctx.applied_at = Some(self.now);
            return self.after_healthy(Some(outcome));
        }
        self.ctx.applied = true;
        self.ctx.applied_at = Some(self.now);
        self.health_start(Some(outcome));
    }

    /// Nothing to apply (SPEC §3 step 14): a NoOp, after health when `wait`.
    pub(super) fn unchanged(&mut self) {
        if !self.ctx.common.waits() {
            return self.after_healthy(None);
        }
        self.health_start(None);
    }

    fn health_start(&mut self, applied: Option<Outcome>) {
        self.ctx.step = Step::Health;
        let targets: Vec<HealthTarget> = self
            .health_ids()
            .into_iter()
            .filter(|id| self.reads(id))
            .map(|id| HealthTarget {
                pods: self.unhealthy_long_enough(&id),
                id,
            })
            .collect();
        if targets.is_empty() {
            return self.on_health(applied, true, Vec::new());
        }
        self.phase = Phase::AssessingHealth {
            applied,
            pods_read: false,
        };
        self.out.push(Effect::AssessHealth {
            targets,
            identity: self.ctx.identity.clone(),
            cluster: self.ctx.cluster.clone(),
        });
    }

    pub(super) fn on_health(
        &mut self,
        applied: Option<Outcome>,
        pods_read: bool,
        objects: Vec<HealthObject>,
    ) {
        let rules = match health::compile(&self.ctx.common.health_check_exprs) {
            Ok(r) => r.with_deadline(self.eval_deadline.clone()),
            Err(e) => {
                return self.fail(Failure::stalled(Reason::HealthCheckFailed, e.to_string()));
            }
        };
        let fresh: Vec<Judged> = objects.iter().map(|o| judge(o, &rules)).collect();
        let judged = self.merge_judged(pods_read, fresh);
        if !pods_read {
            let again = self.pods_to_read(&judged);
            let asked_already = objects.iter().any(|o| !o.pods.is_empty());
            if !again.is_empty() && !asked_already {
                self.ctx.judged = judged;
                self.phase = Phase::AssessingHealth {
                    applied,
                    pods_read: true,
                };
                self.out.push(Effect::AssessHealth {
                    targets: again,
                    identity: self.ctx.identity.clone(),
                    cluster: self.ctx.cluster.clone(),
                });
                return;
            }
        }
        self.decide_health(applied, &judged);
    }

    /// When the wait began: this attempt's apply, else the last one.
    fn wait_start(&self, applied: Option<Outcome>) -> jiff::Timestamp {
        if applied.is_some() {
            return self.ctx.applied_at.unwrap_or(self.now);
        }
        self.ctx
            .persisted
            .last_applied_at
            .as_ref()
            .map_or(self.now, |t| t.0)
    }

    fn decide_health(&mut self, applied: Option<Outcome>, judged: &[Judged]) {
        let previous = self.ctx.persisted.health.as_ref();
        let mut summary = health::summarize(judged, previous, self.now);
        // Unchanged verdicts keep their timestamp: a NoOp attempt writes no status.
        if let Some(p) = previous {
            let mut same = summary.report.clone();
            same.checked_at = p.checked_at.clone();
            if &same == p {
                summary.report.checked_at = p.checked_at.clone();
            }
        }
        self.ctx.health = Some(summary.report.clone());
        let start = self.wait_start(applied);
        let waited = Duration::try_from(self.now.duration_since(start)).unwrap_or(Duration::ZERO);
        let was_healthy = self.was_healthy();
        if summary.all_current {
            let msg = format!("all {} resources are healthy", judged.len());
            self.ctx
                .conds
                .set(ct::HEALTHY, TRUE, Reason::Succeeded, &msg);
            self.ctx
                .health_metrics
                .push(Metric::ReleaseHealthy { healthy: true });
            if !was_healthy || applied.is_some() {
                self.ctx
                    .health_metrics
                    .push(Metric::HealthWait { duration: waited });
            }
            self.ctx.healthy_message = Some(msg);
            return self.after_healthy(applied);
        }
        self.ctx
            .health_metrics
            .push(Metric::ReleaseHealthy { healthy: false });
        let timeout = self.ctx.timeout;
        let failed_msg = if summary.any_failed {
            Some(summary.failed_message())
        } else if waited >= timeout {
            Some(summary.timeout_message(timeout))
        } else {
            None
        };
        if let Some(msg) = failed_msg {
            self.ctx
                .conds
                .set(ct::HEALTHY, FALSE, Reason::HealthCheckFailed, &msg);
            if applied.is_some() {
                self.applied_events(applied);
            }
            return self.fail(Failure::transient(Reason::HealthCheckFailed, msg));
        }
        let msg = summary.waiting_message();
        let remaining = timeout.saturating_sub(waited).max(Duration::from_secs(1));
        self.progressing(applied, &msg, wait_requeue(waited).min(remaining), true);
    }

    fn was_healthy(&self) -> bool {
        self.ctx
            .persisted
            .conditions
            .iter()
            .any(|c| c.type_ == ct::HEALTHY && c.status == TRUE)
    }

    /// Everything else is healthy (or not waited for): `post-apply` hooks, then success.
    fn after_healthy(&mut self, applied: Option<Outcome>) {
        if self.post_hooks_due(applied) {
            return self.hooks_start(crate::hooks::HookPhase::PostApply, applied);
        }
        self.finish_healthy(applied);
    }

    /// The success exit once everything, `post-apply` hooks included, is done.
    pub(super) fn finish_healthy(&mut self, applied: Option<Outcome>) {
        match applied {
            Some(o) => self.success(o),
            None => {
                if let Some(msg) = self.ctx.healthy_message.take()
                    && !self.was_healthy()
                {
                    self.event(EventType::Normal, Reason::ReconciliationSucceeded, &msg);
                }
                self.noop_exit()
            }
        }
    }

    /// The Applied (and Pruned) events of an attempt whose apply succeeded.
    pub(super) fn applied_events(&mut self, applied: Option<Outcome>) {
        let counts = self.ctx.counts;
        let total = counts.total();
        let ApplyCounts {
            created,
            updated,
            unchanged,
        } = counts;
        self.event(
            EventType::Normal,
            Reason::Applied,
            &format!(
                "Applied {total} resources ({created} created, {updated} updated, {unchanged} unchanged)"
            ),
        );
        if applied == Some(Outcome::AppliedAndPruned) && self.ctx.pruned > 0 {
            let note = format!("Pruned {} stale resources", self.ctx.pruned);
            self.event(EventType::Normal, Reason::Pruned, &note);
        }
    }

    /// Records an apply that succeeded: digests, time, the new inventory (the objects are
    /// there, whatever their health).
    /// `at` is when the objects were applied.
    pub(super) fn record_applied(&self, s: &mut crate::api::ReleaseStatus, at: jiff::Timestamp) {
        let d = &self.ctx.digests;
        s.last_applied_at = Some(k8s_time(at));
        s.last_applied_source_digest = d.source.clone();
        s.last_applied_config_digest = d.config.clone();
        s.last_applied_render_digest = d.render.clone();
        let mut inv = inventory::next(
            self.ctx.persisted.inventory.as_ref(),
            self.ctx.entries.clone(),
        );
        inv.cluster = self
            .ctx
            .cluster
            .as_ref()
            .map(|c| c.server.clone())
            .unwrap_or_default();
        s.inventory = Some(inv);
        if let Some(left) = &self.ctx.left_behind {
            s.left_behind = Some(left.clone());
        }
    }

    /// Waiting for health (SPEC §4): `Ready=Unknown/Progressing`, `Healthy` likewise.
    /// `health`: the wait is for the objects' health (`Healthy` says so too); a wait for
    /// `post-apply` hooks keeps the `Healthy` the health wait just decided.
    pub(super) fn progressing(
        &mut self,
        applied: Option<Outcome>,
        msg: &str,
        requeue: Duration,
        health: bool,
    ) {
        let waits = self.ctx.common.waits() && health;
        let c = &mut self.ctx.conds;
        c.set(ct::READY, UNKNOWN, Reason::Progressing, msg);
        if waits {
            c.set(ct::HEALTHY, UNKNOWN, Reason::Progressing, msg);
        }
        c.set(ct::RECONCILING, TRUE, Reason::Progressing, msg);
        c.remove(ct::STALLED);
        let mut s = self.base_status();
        let outcome = applied.unwrap_or(Outcome::Progressing);
        let mut metrics = vec![self.reconcile_metric(outcome)];
        if applied.is_some() {
            self.applied_events(applied);
            self.record_counted_attempt(&mut s, true);
            self.record_applied(&mut s, self.ctx.applied_at.unwrap_or(self.now));
            let entry = self.history("progressing", msg, true);
            status::push_history(&mut s.history, entry);
            metrics.extend(self.applied_metrics());
        }
        s.next_retry_at = Some(k8s_time(add(self.now, requeue)));
        self.commit(
            s,
            After::Done(DoneInfo {
                outcome,
                reason: Reason::Progressing,
                requeue: Some(requeue),
                metrics,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_requeue_grows_to_a_minute() {
        let r: Vec<u64> = [0, 9, 10, 29, 30, 69, 70, 600]
            .iter()
            .map(|s| wait_requeue(Duration::from_secs(*s)).as_secs())
            .collect();
        assert_eq!(r, [10, 10, 20, 20, 40, 40, 60, 60]);
    }
}
