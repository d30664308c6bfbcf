//! Drives attempts through the machine.
//!
//! One attempt follows the drain rule of the crate docs: start with `Observed`, execute the
//! whole batch, feed the awaited effect's result, repeat until `Done`. Between attempts the
//! clock moves as `clock` says.

use std::time::Duration;

use opm_core::effect::Effect;
use opm_core::input::{Input, InputKind};
use opm_core::machine::Attempt;
use opm_core::object::ReleaseKey;
use opm_core::outcome::Outcome;
use opm_core::reason::Reason;

use super::log::AttemptLog;
use super::memo::{Ended, Recording};
use super::{Retention, World, WorldError, add};

/// An attempt run (or answered from its memo): whether the release was there, how it
/// ended, and (with `Retention::Full`) the exchange with the machine.
struct Ran {
    found: bool,
    ended: Ended,
    inputs: Vec<Input>,
    batches: Vec<Vec<Effect>>,
}

fn check_batch(key: &ReleaseKey, batch: &[Effect]) -> Result<(), WorldError> {
    let err = |detail: String| {
        Err(WorldError::BatchShape {
            key: key.clone(),
            detail,
        })
    };
    let Some((last, rest)) = batch.split_last() else {
        return err("empty batch".into());
    };
    if let Some(e) = rest
        .iter()
        .find(|e| !matches!(e, Effect::EmitEvent { .. } | Effect::RecordMetric { .. }))
    {
        return err(format!("{:?} before the end of a batch", e.kind()));
    }
    if matches!(last, Effect::EmitEvent { .. } | Effect::RecordMetric { .. }) {
        return err("batch ends in a fire-and-forget effect".into());
    }
    Ok(())
}

impl World {
    /// Runs one attempt for `key` now, drained to `Done`, and schedules its requeue.
    pub fn run_attempt(&mut self, key: &ReleaseKey) -> Result<&AttemptLog, WorldError> {
        let mut log = self.attempt(key)?;
        log.status = self
            .cluster
            .releases
            .get(key)
            .and_then(|o| o.status().cloned());
        self.timeline.push(log.timeline_entry());
        self.logs.push(log);
        if self.retention == Retention::Timeline {
            // Keep only the last full log, so callers still get a reference to it.
            let last = self.logs.len() - 1;
            self.logs.drain(..last);
        }
        // Pushed just above.
        Ok(self.logs.last().expect("log pushed"))
    }

    /// [`World::run_attempt`] for the driver, which does not look at the log: with
    /// `Retention::Timeline` only the timeline entry is made, read from the stored status
    /// where it lies (a copy of every status was a sixth of a long run), and no log is kept.
    pub(super) fn run_attempt_unlogged(&mut self, key: &ReleaseKey) -> Result<(), WorldError> {
        if self.retention == Retention::Full {
            return self.run_attempt(key).map(|_| ());
        }
        let log = self.attempt(key)?;
        let status = self.cluster.releases.get(key).and_then(|o| o.status());
        self.timeline.push(log.timeline_entry_with(status));
        self.logs.clear();
        Ok(())
    }

    fn attempt(&mut self, key: &ReleaseKey) -> Result<AttemptLog, WorldError> {
        self.clear_due(key);
        let started_at = self.now;
        let memoise = self.memo && self.retention == Retention::Timeline;
        let version = self
            .cluster
            .releases
            .get(key)
            .and_then(|o| o.meta().resource_version.clone());
        let remembered = match self.memos.get(key) {
            Some(m) if memoise && version.is_some() && m.holds(self, key, version.as_deref()) => {
                Some(m.ended)
            }
            _ => None,
        };
        let ran = match remembered {
            Some(ended) => self.replay_memo(key, ended),
            None => self.run_machine(key, memoise, version)?,
        };
        let Ended {
            outcome,
            reason,
            requeue_after,
            steps,
        } = ran.ended;
        // SPEC §21: as the operator does, at the attempt's end (its last metrics included).
        if opm_core::triggers::forgets_series(ran.found, reason) {
            self.metrics.forget(key);
        }
        self.requeue(key, outcome, requeue_after);
        let current = std::mem::take(&mut self.current);
        let id = self.attempts_run();
        Ok(AttemptLog {
            id,
            key: key.clone(),
            started_at,
            finished_at: self.now,
            steps,
            inputs: ran.inputs,
            batches: ran.batches,
            outcome: Some(outcome),
            reason: reason.to_string(),
            requeue_after,
            // Filled in by `run_attempt`, which keeps the log.
            status: None,
            deleted: current.deleted,
            status_mismatches: current.status_mismatches,
        })
    }

    /// The same attempt as last time: its metrics again, and nothing else (its events are
    /// not kept with `Retention::Timeline`).
    fn replay_memo(&mut self, key: &ReleaseKey, ended: Ended) -> Ran {
        if let Some(memo) = self.memos.get_mut(key) {
            memo.checked_at(self.store_writes);
            for m in memo.metrics() {
                self.metrics.record(key, m);
            }
        }
        self.current = Default::default();
        self.memo_hits += 1;
        Ran {
            found: true,
            ended,
            inputs: Vec::new(),
            batches: Vec::new(),
        }
    }

    /// Sets when `key` is next due after an attempt that asked for `requeue_after` (with
    /// the operator's jitter on success, when on); a watch trigger during the attempt
    /// keeps its earlier time.
    fn requeue(&mut self, key: &ReleaseKey, outcome: Outcome, requeue_after: Option<Duration>) {
        let mut requeue = requeue_after;
        if self.jitter
            && matches!(
                outcome,
                Outcome::NoOp | Outcome::Applied | Outcome::AppliedAndPruned
            )
            && let Some(d) = requeue
        {
            // ±5 %, in thousandths.
            let factor = 950 + self.schedule.rng.below(101) as u32;
            requeue = Some(d * factor / 1000);
        }
        if let Some(d) = requeue
            && self.cluster.releases.get(key).is_some()
        {
            let at = add(self.now, d);
            // A watch trigger during the attempt keeps its earlier time.
            if self.due.get(key).is_none_or(|t| *t > at) {
                self.set_due(key, at);
            }
        }
    }

    /// Runs the core for one attempt of `key`, drained to `Done`: whether the release was
    /// found, the `Done`, the steps, and (with `Retention::Full`) the exchange. With
    /// `memoise`, a NoOp that only read the world is remembered for the next attempt.
    fn run_machine(
        &mut self,
        key: &ReleaseKey,
        memoise: bool,
        version: Option<String>,
    ) -> Result<Ran, WorldError> {
        let started_at = self.now;
        let object = self.cluster.releases.get(key).cloned().map(Box::new);
        let found = object.is_some();
        let mut recording = (memoise && found).then(Recording::default);
        let first = Input::new(
            started_at,
            InputKind::Observed {
                key: key.clone(),
                object,
            },
        );
        // With `Retention::Timeline` the exchange is not kept: no copies of inputs.
        let keep = self.retention == Retention::Full;
        let mut inputs = Vec::new();
        if keep {
            inputs.push(first.clone());
        }
        let (mut machine, mut batch) = Attempt::start(&self.cfg, first);
        self.current = super::effects::Current {
            deadline: Some(machine.deadline()),
            ..Default::default()
        };
        let mut steps = 1usize;
        let mut batches = Vec::new();
        let done = loop {
            check_batch(key, &batch)?;
            let answer = self.run_batch(key, &machine, &batch, recording.as_mut());
            let done = done_of(&batch);
            if keep {
                batches.push(std::mem::take(&mut batch));
            }
            if let Some(done) = done {
                break done;
            }
            if steps >= self.max_steps {
                return Err(WorldError::Runaway {
                    key: key.clone(),
                    steps,
                });
            }
            // An awaited effect always has an answer.
            let input = Input::new(self.now, answer.expect("awaited effect answered"));
            if keep {
                inputs.push(input.clone());
            }
            batch = machine.step(input).map_err(|error| WorldError::Input {
                key: key.clone(),
                error,
            })?;
            steps += 1;
        };
        let (outcome, reason, requeue_after) = done;
        let ended = Ended {
            outcome,
            reason,
            requeue_after,
            steps: steps as u32,
        };
        let clean = !self.current.faulted && self.now == started_at;
        match recording.and_then(|r| r.finish(self, version, ended, clean)) {
            Some(m) => self.memos.insert(key.clone(), m),
            None => self.memos.remove(key),
        };
        Ok(Ran {
            found,
            ended,
            inputs,
            batches,
        })
    }

    /// Executes one batch of effects, each bounded as the operator bounds it
    /// (`Attempt::bound`: the finishing ones outlive the attempt's deadline by their own
    /// allowance); the answer to the awaited one, if any.
    fn run_batch(
        &mut self,
        key: &ReleaseKey,
        machine: &Attempt,
        batch: &[Effect],
        mut recording: Option<&mut Recording>,
    ) -> Option<InputKind> {
        let mut answer = None;
        for e in batch {
            if let Some(r) = recording.as_deref_mut() {
                r.note(self, e);
            }
            self.current.deadline = Some(add(self.now, machine.bound(self.now, e)));
            answer = self.execute(key, e).or(answer);
        }
        answer
    }
}

/// The batch's `Done`, if it ends with one. Only `Done` is copied out of the batch: cloning
/// every last effect copied each drift check's manifests once more.
fn done_of(batch: &[Effect]) -> Option<(Outcome, Reason, Option<Duration>)> {
    match batch.last() {
        Some(Effect::Done {
            outcome,
            reason,
            requeue_after,
        }) => Some((*outcome, *reason, *requeue_after)),
        _ => None,
    }
}
