//! The operator's Prometheus metrics (SPEC §21), kept in a `prometheus-client` registry and
//! exposed in the Prometheus text format. Every series carries the release's
//! `kind,name,namespace`, so a deleted release's series can be removed from every family.
//!
//! `prometheus-client` appends `_total` to counter names when encoding, so counters are
//! registered without it; the exposed names are exactly the SPEC ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opm_core::api::ReleaseStatus;
use opm_core::{Kind, Metric, Outcome, ReleaseKey, ReleaseObject};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric as RegistryMetric, Registry};

pub(crate) use prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Every outcome label, so `forget` can remove each `reconcile_total` series.
const OUTCOMES: [Outcome; 6] = [
    Outcome::NoOp,
    Outcome::Applied,
    Outcome::AppliedAndPruned,
    Outcome::FailedTransient,
    Outcome::FailedStalled,
    Outcome::Progressing,
];
const ACTIONS: [&str; 3] = ["created", "updated", "unchanged"];

/// The `kind,name,namespace` labels of one release's series. A release has a dozen series
/// or more; their name and namespace point at one shared copy (see [`Metrics::labels`])
/// rather than each holding its own strings, which were ~1.8 KB per release.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReleaseLabels {
    kind: &'static str,
    name: Arc<str>,
    namespace: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    kind: &'static str,
    name: Arc<str>,
    namespace: Arc<str>,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabels {
    kind: &'static str,
    name: Arc<str>,
    namespace: Arc<str>,
    action: &'static str,
}

impl ReleaseLabels {
    fn of(key: &ReleaseKey) -> Self {
        Self {
            kind: key.kind.as_str(),
            name: key.name.as_str().into(),
            namespace: key.namespace.as_str().into(),
        }
    }

    fn outcome(&self, outcome: Outcome) -> OutcomeLabels {
        OutcomeLabels {
            kind: self.kind,
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            outcome: outcome.metric_label(),
        }
    }

    fn action(&self, action: &'static str) -> ActionLabels {
        ActionLabels {
            kind: self.kind,
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            action,
        }
    }
}

/// Builds histograms with fixed buckets (a `Family` needs a constructor for them).
#[derive(Clone)]
struct Buckets {
    start: f64,
    count: u16,
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, 2.0, self.count))
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

/// The registry and handles to its families.
pub struct Metrics {
    registry: Registry,
    reconcile: Family<OutcomeLabels, Counter>,
    reconcile_duration: Family<ReleaseLabels, Histogram, Buckets>,
    apply_resources: Family<ActionLabels, Counter>,
    prune_resources: Family<ReleaseLabels, Counter>,
    inventory_size: Family<ReleaseLabels, Gauge>,
    fetch_bytes: Family<ReleaseLabels, Counter>,
    render_duration: Family<ReleaseLabels, Histogram, Buckets>,
    cache_hits: Family<ReleaseLabels, Counter>,
    cache_misses: Family<ReleaseLabels, Counter>,
    ready: Family<ReleaseLabels, Gauge>,
    suspended: Family<ReleaseLabels, Gauge>,
    healthy: Family<ReleaseLabels, Gauge>,
    health_wait: Family<ReleaseLabels, Histogram, Buckets>,
    /// Each release's labels, shared by its series; dropped with them in [`Self::forget`].
    labels: Mutex<HashMap<ReleaseKey, ReleaseLabels>>,
}

/// From the apply to healthy: a second (a ConfigMap-only release) to the 24h timeout cap:
/// 0.5 s … ~4.5 h.
const HEALTH_WAIT_BUCKETS: Buckets = Buckets {
    start: 0.5,
    count: 16,
};

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::default();
        // Fields in registration order, which is the order of the exposition text.
        // Counter names without `_total`: the encoder appends it.
        Self {
            healthy: r.family(
                "opm_controller_release_healthy",
                "1 while every object of the release is healthy (SPEC §26), else 0",
                Family::default(),
            ),
            health_wait: r.family(
                "opm_controller_health_wait_seconds",
                "Time from an apply to every object healthy",
                Family::new_with_constructor(HEALTH_WAIT_BUCKETS),
            ),
            reconcile: r.family(
                "opm_controller_reconcile",
                "Reconcile attempts by outcome",
                Family::default(),
            ),
            reconcile_duration: r.family(
                "opm_controller_reconcile_duration_seconds",
                "Duration of reconcile attempts",
                Family::new_with_constructor(RECONCILE_BUCKETS),
            ),
            apply_resources: r.family(
                "opm_controller_apply_resources",
                "Objects applied, by what the apply did",
                Family::default(),
            ),
            prune_resources: r.family(
                "opm_controller_prune_resources",
                "Stale objects deleted",
                Family::default(),
            ),
            inventory_size: r.family(
                "opm_controller_inventory_size",
                "Objects in the release's inventory",
                Family::default(),
            ),
            fetch_bytes: r.family(
                "opm_controller_fetch_bytes",
                "Artifact bytes downloaded for the release (cache misses)",
                Family::default(),
            ),
            render_duration: r.family(
                "opm_controller_render_duration_seconds",
                "Duration of renders (cue export, or a render-cache hit)",
                Family::new_with_constructor(RENDER_BUCKETS),
            ),
            cache_hits: r.family(
                "opm_controller_artifact_cache_hits",
                "Artifact fetches served from the local cache",
                Family::default(),
            ),
            cache_misses: r.family(
                "opm_controller_artifact_cache_misses",
                "Artifact fetches that had to download",
                Family::default(),
            ),
            ready: r.family(
                "opm_controller_release_ready",
                "1 while the release's Ready condition is True, else 0",
                Family::default(),
            ),
            suspended: r.family(
                "opm_controller_release_suspended",
                "1 while the release has spec.suspend set, else 0",
                Family::default(),
            ),
            registry: r,
            labels: Mutex::default(),
        }
    }
}

/// Registers a metric family and hands back the handle the recorder keeps.
trait RegisterFamily {
    fn family<M: RegistryMetric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M;
}

impl RegisterFamily for Registry {
    fn family<M: RegistryMetric + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        self.register(name, help, metric.clone());
        metric
    }
}

/// What an artifact fetch cost, for the fetch and cache series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchObservation {
    /// Served from the cache.
    Hit,
    /// Downloaded (or joined a download in flight) this many archive bytes.
    Miss { bytes: u64 },
}

impl Metrics {
    /// `key`'s labels: the shared copy, made on the release's first series.
    fn labels(&self, key: &ReleaseKey) -> ReleaseLabels {
        let mut labels = self.labels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = labels.get(key) {
            return l.clone();
        }
        let l = ReleaseLabels::of(key);
        labels.insert(key.clone(), l.clone());
        l
    }

    /// Records one of the core's `RecordMetric` samples for `key`'s series.
    pub fn record(&self, key: &ReleaseKey, metric: &Metric) {
        let l = self.labels(key);
        match metric {
            Metric::Reconcile { outcome, duration } => {
                self.reconcile.get_or_create(&l.outcome(*outcome)).inc();
                self.reconcile_duration
                    .get_or_create(&l)
                    .observe(duration.as_secs_f64());
            }
            Metric::ApplyResources {
                created,
                updated,
                unchanged,
            } => {
                for (action, n) in ACTIONS.iter().zip([created, updated, unchanged]) {
                    self.apply_resources
                        .get_or_create(&l.action(action))
                        .inc_by(*n);
                }
            }
            Metric::PruneResources { count } => {
                self.prune_resources.get_or_create(&l).inc_by(*count);
            }
            Metric::InventorySize { count } => {
                self.inventory_size
                    .get_or_create(&l)
                    .set(i64::try_from(*count).unwrap_or(i64::MAX));
            }
            Metric::ReleaseHealthy { healthy } => {
                self.healthy.get_or_create(&l).set(i64::from(*healthy));
            }
            Metric::HealthWait { duration } => {
                self.health_wait
                    .get_or_create(&l)
                    .observe(duration.as_secs_f64());
            }
        }
    }

    /// An artifact fetch for `key` (hit or miss, and the bytes a miss downloaded).
    pub fn record_fetch(&self, key: &ReleaseKey, observed: FetchObservation) {
        let l = self.labels(key);
        match observed {
            FetchObservation::Hit => {
                self.cache_hits.get_or_create(&l).inc();
            }
            FetchObservation::Miss { bytes } => {
                self.cache_misses.get_or_create(&l).inc();
                self.fetch_bytes.get_or_create(&l).inc_by(bytes);
            }
        }
    }

    /// How long one render of `key` took.
    pub fn record_render(&self, key: &ReleaseKey, took: Duration) {
        self.render_duration
            .get_or_create(&self.labels(key))
            .observe(took.as_secs_f64());
    }

    /// The Ready and suspended gauges from the release as read at the start of an attempt.
    /// A `Release`'s fetch counters start at 0 here, so they exist before the first hit.
    pub fn observe_release(&self, key: &ReleaseKey, object: &ReleaseObject) {
        let l = self.labels(key);
        if key.kind == Kind::Release {
            for family in [&self.fetch_bytes, &self.cache_hits, &self.cache_misses] {
                drop(family.get_or_create(&l));
            }
        }
        self.suspended
            .get_or_create(&l)
            .set(i64::from(object.common().suspend));
        self.set_ready(&l, object.status());
    }

    /// The Ready gauge from a status the attempt just committed.
    pub fn observe_status(&self, key: &ReleaseKey, status: &ReleaseStatus) {
        self.set_ready(&self.labels(key), Some(status));
    }

    fn set_ready(&self, l: &ReleaseLabels, status: Option<&ReleaseStatus>) {
        let ready = status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        self.ready.get_or_create(l).set(i64::from(ready));
    }

    /// Removes every series of a deleted release, in every family.
    pub fn forget(&self, key: &ReleaseKey) {
        let l = self
            .labels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key)
            .unwrap_or_else(|| ReleaseLabels::of(key));
        for outcome in OUTCOMES {
            self.reconcile.remove(&l.outcome(outcome));
        }
        for action in ACTIONS {
            self.apply_resources.remove(&l.action(action));
        }
        self.reconcile_duration.remove(&l);
        self.render_duration.remove(&l);
        self.health_wait.remove(&l);
        self.healthy.remove(&l);
        for family in [
            &self.prune_resources,
            &self.fetch_bytes,
            &self.cache_hits,
            &self.cache_misses,
        ] {
            family.remove(&l);
        }
        for family in [&self.inventory_size, &self.ready, &self.suspended] {
            family.remove(&l);
        }
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

#[cfg(test)]
mod tests;
