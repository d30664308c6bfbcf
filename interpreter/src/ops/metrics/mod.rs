//! The operator's Prometheus metrics (SPEC §21), exposed in the Prometheus text format by a
//! `prometheus-client` registry. Every series carries the release's `kind,name,namespace`,
//! so a deleted release's series can be removed from every family.
//!
//! The values are plain numbers in one record per release, encoded by a collector at each
//! scrape, not a `Family` of metric objects per name: a release has a dozen series or more,
//! and as `Family` entries each held its own copies of the labels, an `Arc<Mutex<…>>` per
//! histogram and a hash-map slot per family (~2.9 KB per release in a heap profile at 3 000
//! releases; here ~0.9 KB). The exposition is the one the families produced (a recorded
//! fleet's text is a unit-test fixture): a series appears once it is first recorded,
//! counter names get `_total`, histograms count into the same buckets.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use opm_core::api::ReleaseStatus;
use opm_core::event_delivery::{DeliveryStats, DropReason};
use opm_core::{Kind, Metric, Outcome, ReleaseKey, ReleaseObject};
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;

pub(crate) use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

mod clusters;
mod collect;
pub(crate) use clusters::ClusterGauges;
use collect::{Fleet, FleetCollector, WebhookCollector, WebhookStats};

/// Every outcome label, in the order of [`Series::reconcile`].
const OUTCOMES: [Outcome; 6] = [
    Outcome::NoOp,
    Outcome::Applied,
    Outcome::AppliedAndPruned,
    Outcome::FailedTransient,
    Outcome::FailedStalled,
    Outcome::Progressing,
];
/// The `outcome` label of each of [`OUTCOMES`] (made once, not at every scrape).
static OUTCOME_LABELS: LazyLock<[&str; OUTCOMES.len()]> =
    LazyLock::new(|| OUTCOMES.map(Outcome::metric_label));
/// Every action label, in the order of [`Series::apply_resources`].
const ACTIONS: [&str; 3] = ["created", "updated", "unchanged"];

/// Histogram buckets: `count` upper bounds from `start`, doubling (then `+Inf`).
#[derive(Clone, Copy)]
struct Buckets {
    start: f64,
    count: u16,
}

impl Buckets {
    fn bounds(self) -> Vec<f64> {
        exponential_buckets(self.start, 2.0, self.count)
            .chain(std::iter::once(f64::INFINITY))
            .collect()
    }
}

/// Reconciles take from milliseconds (no-op) to minutes (slow applies): 5 ms … ~82 s.
const RECONCILE_BUCKETS: Buckets = Buckets {
    start: 0.005,
    count: 15,
};
/// A `cue export` takes from microseconds (render cache) to tens of seconds: 1 ms … ~33 s.
const RENDER_BUCKETS: Buckets = Buckets {
    start: 0.001,
    count: 16,
};
/// From the apply to healthy: a second (a ConfigMap-only release) to the 24h timeout cap:
/// 0.5 s … ~4.5 h.
const HEALTH_WAIT_BUCKETS: Buckets = Buckets {
    start: 0.5,
    count: 16,
};

/// One histogram series: the count per bucket (not cumulative; the encoder adds them up).
#[derive(Debug, Clone, PartialEq)]
struct Hist {
    sum: f64,
    count: u64,
    per_bucket: Box<[u64]>,
}

impl Hist {
    /// Counts `v` into the first bucket whose upper bound is at least `v` (`NaN`: `+Inf`).
    fn observe(slot: &mut Option<Hist>, bounds: &[f64], v: f64) {
        let h = slot.get_or_insert_with(|| Hist {
            sum: 0.0,
            count: 0,
            per_bucket: vec![0; bounds.len()].into(),
        });
        h.sum += v;
        h.count += 1;
        let i = bounds
            .iter()
            .position(|b| *b >= v)
            .unwrap_or(bounds.len() - 1);
        h.per_bucket[i] += 1;
    }
}

/// Every series of one release; `None` is a series not recorded yet (not exposed).
#[derive(Debug, Default)]
struct Series {
    reconcile: [Option<u64>; OUTCOMES.len()],
    reconcile_duration: Option<Hist>,
    apply_resources: [Option<u64>; ACTIONS.len()],
    prune_resources: Option<u64>,
    inventory_size: Option<i64>,
    fetch_bytes: Option<u64>,
    render_duration: Option<Hist>,
    cache_hits: Option<u64>,
    cache_misses: Option<u64>,
    ready: Option<i64>,
    suspended: Option<i64>,
    healthy: Option<i64>,
    health_wait: Option<Hist>,
}

fn add(counter: &mut Option<u64>, n: u64) {
    *counter = Some(counter.unwrap_or(0).saturating_add(n));
}

/// What one family reads from a release's [`Series`].
enum Values<'a> {
    Counter(Option<u64>),
    Gauge(Option<i64>),
    Histogram(Option<&'a Hist>),
    /// Counters by one more label (`outcome`, `action`): its name, values and series.
    CountersBy(&'static str, &'static [&'static str], &'a [Option<u64>]),
}

impl Values<'_> {
    fn any(&self) -> bool {
        match self {
            Values::Counter(v) => v.is_some(),
            Values::Gauge(v) => v.is_some(),
            Values::Histogram(h) => h.is_some(),
            Values::CountersBy(_, _, vs) => vs.iter().any(Option::is_some),
        }
    }
}

/// The registry and every release's series.
pub struct Metrics {
    registry: Registry,
    /// Remote cluster series (SPEC §31).
    pub clusters: Arc<ClusterGauges>,
    fleet: Fleet,
    webhook: Arc<OnceLock<WebhookStats>>,
    reconcile_bounds: Vec<f64>,
    render_bounds: Vec<f64>,
    health_wait_bounds: Vec<f64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let fleet = Fleet::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(FleetCollector {
            fleet: fleet.clone(),
            families: collect::families(),
        }));
        let webhook = Arc::<OnceLock<WebhookStats>>::default();
        registry.register_collector(Box::new(WebhookCollector {
            source: webhook.clone(),
        }));
        let clusters = Arc::new(ClusterGauges::default());
        registry.register_collector(Box::new(clusters::ClusterCollector(clusters.clone())));
        Self {
            registry,
            clusters,
            fleet,
            webhook,
            reconcile_bounds: RECONCILE_BUCKETS.bounds(),
            render_bounds: RENDER_BUCKETS.bounds(),
            health_wait_bounds: HEALTH_WAIT_BUCKETS.bounds(),
        }
    }
}

/// What an artifact fetch cost, for the fetch and cache series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchObservation {
    /// Served from the cache.
    Hit,
    /// Downloaded (or joined a download in flight) this many archive bytes.
    Miss {
        /// The archive's size.
        bytes: u64,
    },
}

impl Metrics {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<ReleaseKey, Series>> {
        self.fleet.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes `key`'s series (made on its first one).
    fn with(&self, key: &ReleaseKey, change: impl FnOnce(&mut Series)) {
        let mut fleet = self.lock();
        match fleet.get_mut(key) {
            Some(series) => change(series),
            None => change(fleet.entry(key.clone()).or_default()),
        }
    }

    /// Records one of the core's `RecordMetric` samples for `key`'s series.
    pub fn record(&self, key: &ReleaseKey, metric: &Metric) {
        self.with(key, |s| match metric {
            Metric::Reconcile { outcome, duration } => {
                if let Some(i) = OUTCOMES.iter().position(|o| o == outcome) {
                    add(&mut s.reconcile[i], 1);
                }
                Hist::observe(
                    &mut s.reconcile_duration,
                    &self.reconcile_bounds,
                    duration.as_secs_f64(),
                );
            }
            Metric::ApplyResources {
                created,
                updated,
                unchanged,
            } => {
                for (slot, n) in s
                    .apply_resources
                    .iter_mut()
                    .zip([created, updated, unchanged])
                {
                    add(slot, *n);
                }
            }
            Metric::PruneResources { count } => add(&mut s.prune_resources, *count),
            Metric::InventorySize { count } => {
                s.inventory_size = Some(i64::try_from(*count).unwrap_or(i64::MAX));
            }
            Metric::ReleaseHealthy { healthy } => s.healthy = Some(i64::from(*healthy)),
            Metric::HealthWait { duration } => Hist::observe(
                &mut s.health_wait,
                &self.health_wait_bounds,
                duration.as_secs_f64(),
            ),
        });
    }

    /// An artifact fetch for `key` (hit or miss, and the bytes a miss downloaded).
    pub fn record_fetch(&self, key: &ReleaseKey, observed: FetchObservation) {
        self.with(key, |s| match observed {
            FetchObservation::Hit => add(&mut s.cache_hits, 1),
            FetchObservation::Miss { bytes } => {
                add(&mut s.cache_misses, 1);
                add(&mut s.fetch_bytes, bytes);
            }
        });
    }

    /// How long one render of `key` took.
    pub fn record_render(&self, key: &ReleaseKey, took: Duration) {
        self.with(key, |s| {
            Hist::observe(
                &mut s.render_duration,
                &self.render_bounds,
                took.as_secs_f64(),
            );
        });
    }

    /// The Ready and suspended gauges from the release as read at the start of an attempt.
    /// A `Release`'s fetch counters start at 0 here, so they exist before the first hit.
    pub fn observe_release(&self, key: &ReleaseKey, object: &ReleaseObject) {
        self.with(key, |s| {
            if key.kind == Kind::Release {
                for counter in [&mut s.fetch_bytes, &mut s.cache_hits, &mut s.cache_misses] {
                    add(counter, 0);
                }
            }
            s.suspended = Some(i64::from(object.common().suspend));
            s.ready = Some(ready(object.status()));
        });
    }

    /// The Ready gauge from a status the attempt just committed.
    pub fn observe_status(&self, key: &ReleaseKey, status: &ReleaseStatus) {
        self.with(key, |s| s.ready = Some(ready(Some(status))));
    }

    /// Exposes the events webhook's series, read from `read` at each scrape (once; a
    /// second source is ignored).
    pub fn serve_webhook_stats(&self, read: impl Fn() -> DeliveryStats + Send + Sync + 'static) {
        let _ = self.webhook.set(Box::new(read));
    }

    /// Removes every series of a deleted release, in every family.
    pub fn forget(&self, key: &ReleaseKey) {
        self.lock().remove(key);
        self.clusters.set_release(key, None);
    }

    /// The value of one exposed sample (`name` as exposed, e.g. with `_total` or `_count`),
    /// for tests and diagnostics.
    pub fn get(&self, name: &str, key: &ReleaseKey, extra: &[(&str, &str)]) -> Option<f64> {
        let mut series = format!(
            "{name}{{kind=\"{}\",name=\"{}\",namespace=\"{}\"",
            key.kind.as_str(),
            key.name,
            key.namespace
        );
        for (k, v) in extra {
            series.push_str(&format!(",{k}=\"{v}\""));
        }
        series.push_str("} ");
        self.render()
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str())?.parse().ok())
    }

    /// The Prometheus text exposition (serve it with [`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// 1 when `status` has `Ready=True`.
fn ready(status: Option<&ReleaseStatus>) -> i64 {
    i64::from(status.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    }))
}

#[cfg(test)]
mod tests;
