//! The operator's metrics as the world records them from `RecordMetric` effects (SPEC §21).

use std::collections::BTreeMap;
use std::time::Duration;

use opm_core::effect::Metric;
use opm_core::object::ReleaseKey;
use opm_core::outcome::Outcome;

/// The operator's metrics, per release (SPEC §21). Cleared by an operator restart; a
/// release's series go away when the release does.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Metrics {
    /// `opm_controller_reconcile_total`: attempts by (release, outcome).
    pub reconcile_total: BTreeMap<(ReleaseKey, Outcome), u64>,
    /// Total attempt time per release: the sum of the duration histogram.
    pub reconcile_duration: BTreeMap<ReleaseKey, Duration>,
    /// By (release, `created`|`updated`|`unchanged`).
    pub apply_resources: BTreeMap<(ReleaseKey, &'static str), u64>,
    /// `opm_controller_prune_resources_total`: objects pruned per release.
    pub prune_resources: BTreeMap<ReleaseKey, u64>,
    /// `opm_controller_inventory_size`: the last inventory size reported per release.
    pub inventory_size: BTreeMap<ReleaseKey, u64>,
    /// `opm_controller_release_healthy`.
    pub release_healthy: BTreeMap<ReleaseKey, bool>,
    /// `opm_controller_health_wait_seconds`: the waits observed, per release.
    pub health_waits: BTreeMap<ReleaseKey, Vec<Duration>>,
}

impl Metrics {
    /// Single-key series are looked up before inserting, so a release's key is copied
    /// only the first time: this runs for every metric of every attempt.
    pub(crate) fn record(&mut self, key: &ReleaseKey, m: &Metric) {
        match m {
            Metric::Reconcile { outcome, duration } => {
                *self
                    .reconcile_total
                    .entry((key.clone(), *outcome))
                    .or_default() += 1;
                match self.reconcile_duration.get_mut(key) {
                    Some(d) => *d += *duration,
                    None => {
                        self.reconcile_duration.insert(key.clone(), *duration);
                    }
                }
            }
            Metric::ApplyResources {
                created,
                updated,
                unchanged,
            } => {
                for (a, n) in [
                    ("created", created),
                    ("updated", updated),
                    ("unchanged", unchanged),
                ] {
                    *self.apply_resources.entry((key.clone(), a)).or_default() += n;
                }
            }
            Metric::PruneResources { count } => match self.prune_resources.get_mut(key) {
                Some(v) => *v += count,
                None => {
                    self.prune_resources.insert(key.clone(), *count);
                }
            },
            Metric::InventorySize { count } => match self.inventory_size.get_mut(key) {
                Some(v) => *v = *count,
                None => {
                    self.inventory_size.insert(key.clone(), *count);
                }
            },
            Metric::ReleaseHealthy { healthy } => match self.release_healthy.get_mut(key) {
                Some(v) => *v = *healthy,
                None => {
                    self.release_healthy.insert(key.clone(), *healthy);
                }
            },
            Metric::HealthWait { duration } => match self.health_waits.get_mut(key) {
                Some(v) => v.push(*duration),
                None => {
                    self.health_waits.insert(key.clone(), vec![*duration]);
                }
            },
        }
    }

    /// Removes every series of a release.
    pub fn forget(&mut self, key: &ReleaseKey) {
        self.reconcile_total.retain(|(k, _), _| k != key);
        self.reconcile_duration.remove(key);
        self.apply_resources.retain(|(k, _), _| k != key);
        self.prune_resources.remove(key);
        self.inventory_size.remove(key);
        self.release_healthy.remove(key);
        self.health_waits.remove(key);
    }

    /// `opm_controller_reconcile_total` summed over releases, by outcome.
    pub fn total_by_outcome(&self) -> BTreeMap<Outcome, u64> {
        let mut out = BTreeMap::new();
        for ((_, o), n) in &self.reconcile_total {
            *out.entry(*o).or_default() += n;
        }
        out
    }
}
