//! Moving the world through time: the next wakeup, one step (the earliest scheduled
//! event, else the earliest due attempt), and driving until a time or until settled.
//! Time jumps *exactly* to the next due attempt or scheduled event (events first at equal
//! times, then attempts by due time and key); nothing ever nudges it forward to escape a
//! livelock: [`World::drive_bounded`] reports [`Stuck`] instead.

use jiff::Timestamp;

use opm_core::object::ReleaseKey;
use opm_core::outcome::Outcome;

use super::{World, WorldError};

/// What [`World::step`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Applied a scheduled event at this time.
    Event(Timestamp),
    /// Ran an attempt for this release (its timeline entry is the last one).
    Attempt(ReleaseKey),
    /// Nothing is scheduled or due.
    Idle,
}

/// The world did not settle within the attempt budget.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("not settled after {attempts} attempts at {at}: {unsettled:?} ({error:?})")]
pub struct Stuck {
    /// Attempts this drive ran before it stopped.
    pub attempts: usize,
    /// The virtual time it stopped at.
    pub at: Timestamp,
    /// Releases whose last attempt since their last change was not a NoOp (or that have
    /// not been attempted since).
    pub unsettled: Vec<ReleaseKey>,
    /// Set when the world stopped on an error rather than on the budget.
    pub error: Option<Box<WorldError>>,
}

impl World {
    /// When the next thing happens: a scheduled event or a due attempt.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        let ev = self.schedule.events.keys().next().map(|(t, _)| *t);
        let at = self.queue.iter().next().map(|(t, _)| *t);
        match (ev, at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Does the next thing: applies the earliest scheduled event, or runs the earliest due
    /// attempt, moving the clock to its time (never backwards).
    pub fn step(&mut self) -> Result<Step, WorldError> {
        let ev = self.schedule.events.keys().next().copied();
        let at = self.queue.first().map(|(t, _)| *t);
        let event_first = match (&ev, &at) {
            (Some((te, _)), Some(ta)) => te <= ta,
            (Some(_), None) => true,
            (None, _) => false,
        };
        match (ev, at) {
            (Some((t, seq)), _) if event_first => {
                self.now = self.now.max(t);
                // The key was just read from the map.
                let event = self
                    .schedule
                    .events
                    .remove(&(t, seq))
                    .expect("scheduled event");
                self.apply_event(event)?;
                Ok(Step::Event(t))
            }
            (_, Some(_)) => {
                // Taken off the queue here (the attempt would clear it anyway), so its key
                // is moved out rather than copied.
                let (t, key) = self.queue.pop_first().expect("queue checked non-empty");
                self.due.remove(&key);
                self.now = self.now.max(t);
                self.run_attempt_unlogged(&key)?;
                Ok(Step::Attempt(key))
            }
            _ => Ok(Step::Idle),
        }
    }

    /// Runs everything due up to and including `t`, then sets the clock to `t`. Returns the
    /// number of attempts run.
    pub fn drive_until(&mut self, t: Timestamp) -> Result<usize, WorldError> {
        let mut attempts = 0;
        while self.next_wakeup().is_some_and(|w| w <= t) {
            if let Step::Attempt(_) = self.step()? {
                attempts += 1;
            }
        }
        self.now = self.now.max(t);
        Ok(attempts)
    }

    /// Releases that are not settled: changed since their last attempt, or whose last
    /// attempt asked to come back and was not a NoOp.
    pub fn unsettled(&self) -> Vec<ReleaseKey> {
        let mut last: std::collections::BTreeMap<&ReleaseKey, &super::TimelineEntry> =
            Default::default();
        for e in &self.timeline {
            last.insert(&e.key, e);
        }
        self.cluster
            .releases
            .iter()
            .filter(|(_, r)| !r.external)
            .filter(|(k, _)| {
                let Some(e) = last.get(k) else {
                    return true;
                };
                let changed = self.changed_at.get(*k).is_some_and(|c| *c > e.started_at);
                let calm = e.requeue_after.is_none() || e.outcome == Some(Outcome::NoOp);
                changed || !calm
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Steps until no event is pending and every release is settled, running at most
    /// `max_attempts` attempts. Returns the attempts run.
    pub fn drive_bounded(&mut self, max_attempts: usize) -> Result<usize, Stuck> {
        let mut attempts = 0;
        loop {
            if self.schedule.events.is_empty() && self.unsettled().is_empty() {
                return Ok(attempts);
            }
            if attempts >= max_attempts {
                return Err(Stuck {
                    attempts,
                    at: self.now,
                    unsettled: self.unsettled(),
                    error: None,
                });
            }
            let error = match self.step() {
                Ok(Step::Attempt(_)) => {
                    attempts += 1;
                    continue;
                }
                Ok(Step::Event(_)) => continue,
                Ok(Step::Idle) => None,
                Err(e) => Some(Box::new(e)),
            };
            return Err(Stuck {
                attempts,
                at: self.now,
                unsettled: self.unsettled(),
                error,
            });
        }
    }
}
