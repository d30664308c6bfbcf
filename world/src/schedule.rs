//! The schedule that drives the cluster through time: the scheduled [`WorldEvent`]s, the
//! [`FaultSchedule`] and the seeded [`SplitMix64`] (uids aside, the world's only variety:
//! probabilistic faults and the optional success jitter). Apart from the [`crate::cluster`]
//! it acts on.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::events::WorldEvent;
use crate::faults::FaultSchedule;
use crate::prng::SplitMix64;

/// What happens when, and the generator that decides what is left to chance.
#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    /// Scheduled world events by (time, insertion order).
    pub(crate) events: BTreeMap<(Timestamp, u64), WorldEvent>,
    /// The insertion order of the next scheduled event.
    pub(crate) next_seq: u64,
    /// Faults waiting for the effects they hit.
    pub(crate) faults: FaultSchedule,
    /// The seeded generator.
    pub(crate) rng: SplitMix64,
}

impl Schedule {
    /// Nothing scheduled; the generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            events: BTreeMap::new(),
            next_seq: 0,
            faults: FaultSchedule::default(),
            rng: SplitMix64::new(seed),
        }
    }
}
