//! The exposition: every family a release's series are exposed in, and the collectors
//! that encode them at each scrape (SPEC §21) and the events webhook's series (SPEC §32).

use std::fmt;
use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::*;

/// One exposed family: its name (counters without `_total`: the encoder appends it), help,
/// type, histogram bounds and how to read it.
pub(super) struct FamilyDef {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    bounds: Vec<f64>,
    read: for<'a> fn(&'a Series) -> Values<'a>,
}

fn def(
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    read: for<'a> fn(&'a Series) -> Values<'a>,
) -> FamilyDef {
    FamilyDef {
        name,
        help,
        kind,
        bounds: Vec::new(),
        read,
    }
}

fn hist(
    name: &'static str,
    help: &'static str,
    buckets: Buckets,
    read: for<'a> fn(&'a Series) -> Values<'a>,
) -> FamilyDef {
    FamilyDef {
        bounds: buckets.bounds(),
        ..def(name, help, MetricType::Histogram, read)
    }
}

/// Every family, in this order in the exposition.
pub(super) fn families() -> Vec<FamilyDef> {
    let mut all = attempt_families();
    all.extend(artifact_and_state_families());
    all
}

/// Health, reconciles, applies, prunes and the inventory.
fn attempt_families() -> Vec<FamilyDef> {
    vec![
        def(
            "opm_controller_release_healthy",
            "1 while every object of the release is healthy, else 0",
            MetricType::Gauge,
            |s| Values::Gauge(s.healthy),
        ),
        hist(
            "opm_controller_health_wait_seconds",
            "Time from an apply to every object healthy",
            HEALTH_WAIT_BUCKETS,
            |s| Values::Histogram(s.health_wait.as_ref()),
        ),
        def(
            "opm_controller_reconcile",
            "Reconcile attempts by outcome",
            MetricType::Counter,
            |s| Values::CountersBy("outcome", &*OUTCOME_LABELS, &s.reconcile),
        ),
        hist(
            "opm_controller_reconcile_duration_seconds",
            "Duration of reconcile attempts",
            RECONCILE_BUCKETS,
            |s| Values::Histogram(s.reconcile_duration.as_ref()),
        ),
        def(
            "opm_controller_apply_resources",
            "Objects applied, by what the apply did",
            MetricType::Counter,
            |s| Values::CountersBy("action", &ACTIONS, &s.apply_resources),
        ),
        def(
            "opm_controller_prune_resources",
            "Stale objects deleted",
            MetricType::Counter,
            |s| Values::Counter(s.prune_resources),
        ),
        def(
            "opm_controller_inventory_size",
            "Objects in the release's inventory",
            MetricType::Gauge,
            |s| Values::Gauge(s.inventory_size),
        ),
    ]
}

/// Fetches, renders, the artifact cache, Ready and suspended.
fn artifact_and_state_families() -> Vec<FamilyDef> {
    vec![
        def(
            "opm_controller_fetch_bytes",
            "Artifact bytes downloaded for the release (cache misses)",
            MetricType::Counter,
            |s| Values::Counter(s.fetch_bytes),
        ),
        hist(
            "opm_controller_render_duration_seconds",
            "Duration of renders (cue export, or a render-cache hit)",
            RENDER_BUCKETS,
            |s| Values::Histogram(s.render_duration.as_ref()),
        ),
        def(
            "opm_controller_artifact_cache_hits",
            "Artifact fetches served from the local cache",
            MetricType::Counter,
            |s| Values::Counter(s.cache_hits),
        ),
        def(
            "opm_controller_artifact_cache_misses",
            "Artifact fetches that had to download",
            MetricType::Counter,
            |s| Values::Counter(s.cache_misses),
        ),
        def(
            "opm_controller_release_ready",
            "1 while the release's Ready condition is True, else 0",
            MetricType::Gauge,
            |s| Values::Gauge(s.ready),
        ),
        def(
            "opm_controller_release_suspended",
            "1 while the release has spec.suspend set, else 0",
            MetricType::Gauge,
            |s| Values::Gauge(s.suspended),
        ),
    ]
}

pub(super) type Fleet = Arc<Mutex<BTreeMap<ReleaseKey, Series>>>;

/// Encodes every release's series at a scrape, family by family (a family without any
/// series is left out, as the registry leaves out an empty `Family`).
pub(super) struct FleetCollector {
    pub(super) fleet: Fleet,
    pub(super) families: Vec<FamilyDef>,
}

impl fmt::Debug for FleetCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetCollector").finish_non_exhaustive()
    }
}

impl Collector for FleetCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let fleet = self.fleet.lock().unwrap_or_else(|p| p.into_inner());
        for family in &self.families {
            if !fleet.values().any(|s| (family.read)(s).any()) {
                continue;
            }
            // The registry ends every help text with a period.
            let help = format!("{}.", family.help);
            let mut metric = encoder.encode_descriptor(family.name, &help, None, family.kind)?;
            for (key, series) in fleet.iter() {
                let labels = [
                    ("kind", key.kind.as_str()),
                    ("name", key.name.as_str()),
                    ("namespace", key.namespace.as_str()),
                ];
                encode(&mut metric, &labels, &family.bounds, (family.read)(series))?;
            }
        }
        Ok(())
    }
}

/// Reads the events webhook's counts at a scrape.
pub(super) type WebhookStats = Box<dyn Fn() -> DeliveryStats + Send + Sync>;

/// The events webhook's series (SPEC §32), process-wide: exposed only when the webhook is
/// on, and then every one from 0 (an alert on `increase` sees the first drop).
pub(super) struct WebhookCollector {
    pub(super) source: Arc<OnceLock<WebhookStats>>,
}

impl fmt::Debug for WebhookCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookCollector").finish_non_exhaustive()
    }
}

impl Collector for WebhookCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(read) = self.source.get() else {
            return Ok(());
        };
        let stats = read();
        for (name, help, v) in [
            (
                "opm_controller_events_webhook_sent",
                "Events the webhook receiver took.",
                stats.sent,
            ),
            (
                "opm_controller_events_webhook_retries",
                "Webhook POSTs that failed and are tried again.",
                stats.retries,
            ),
        ] {
            encoder
                .encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
        {
            let mut dropped = encoder.encode_descriptor(
                "opm_controller_events_webhook_dropped",
                "Events dropped: the queue was full (queue_full) or the receiver refused them (rejected).",
                None,
                MetricType::Counter,
            )?;
            for reason in DropReason::ALL {
                dropped
                    .encode_family(&[("reason", reason.metric_label())].as_slice())?
                    .encode_counter::<NoLabelSet, _, u64>(&stats.dropped(reason), None)?;
            }
        }
        let queued = i64::try_from(stats.queued).unwrap_or(i64::MAX);
        encoder
            .encode_descriptor(
                "opm_controller_events_webhook_queued",
                "Events waiting for the webhook receiver.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&queued)
    }
}

/// One release's series of one family.
fn encode(
    metric: &mut MetricEncoder<'_>,
    labels: &[(&str, &str); 3],
    bounds: &[f64],
    values: Values<'_>,
) -> Result<(), fmt::Error> {
    match values {
        Values::Counter(Some(v)) => metric
            .encode_family(&labels.as_slice())?
            .encode_counter::<NoLabelSet, _, u64>(&v, None),
        Values::Gauge(Some(v)) => metric.encode_family(&labels.as_slice())?.encode_gauge(&v),
        Values::Histogram(Some(h)) => {
            let buckets: Vec<(f64, u64)> = bounds
                .iter()
                .copied()
                .zip(h.per_bucket.iter().copied())
                .collect();
            metric
                .encode_family(&labels.as_slice())?
                .encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)
        }
        Values::CountersBy(label, names, vs) => {
            for (name, v) in names.iter().zip(vs) {
                let Some(v) = v else { continue };
                let labels = [labels[0], labels[1], labels[2], (label, *name)];
                metric
                    .encode_family(&labels.as_slice())?
                    .encode_counter::<NoLabelSet, _, u64>(v, None)?;
            }
            Ok(())
        }
        Values::Counter(None) | Values::Gauge(None) | Values::Histogram(None) => Ok(()),
    }
}
