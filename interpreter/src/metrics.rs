//! A minimal in-process metrics registry for the core's `RecordMetric` effects, keyed by the
//! release's series labels. It renders the Prometheus text format; the HTTP endpoint and the
//! full SPEC §21 set (histogram buckets, fetch bytes, cache hits) are still to come.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use opm_core::{Metric, ReleaseKey};

/// Samples by (metric name, label string).
#[derive(Default)]
pub struct Metrics {
    series: Mutex<BTreeMap<(String, String), f64>>,
}

fn labels(key: &ReleaseKey, extra: &[(&str, &str)]) -> String {
    let mut s = format!(
        "kind=\"{}\",name=\"{}\",namespace=\"{}\"",
        key.kind.as_str(),
        key.name,
        key.namespace
    );
    for (k, v) in extra {
        let _ = write!(s, ",{k}=\"{v}\"");
    }
    s
}

impl Metrics {
    fn add(&self, name: &str, labels: String, value: f64) {
        let mut m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((name.to_string(), labels)).or_default() += value;
    }

    fn set(&self, name: &str, labels: String, value: f64) {
        let mut m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        m.insert((name.to_string(), labels), value);
    }

    /// Records one sample for `key`'s series.
    pub fn record(&self, key: &ReleaseKey, metric: &Metric) {
        match metric {
            Metric::Reconcile { outcome, duration } => {
                self.add(
                    "opm_controller_reconcile_total",
                    labels(key, &[("outcome", outcome.metric_label())]),
                    1.0,
                );
                self.add(
                    "opm_controller_reconcile_duration_seconds_sum",
                    labels(key, &[]),
                    duration.as_secs_f64(),
                );
                self.add(
                    "opm_controller_reconcile_duration_seconds_count",
                    labels(key, &[]),
                    1.0,
                );
            }
            Metric::ApplyResources {
                created,
                updated,
                unchanged,
            } => {
                for (action, n) in [
                    ("created", created),
                    ("updated", updated),
                    ("unchanged", unchanged),
                ] {
                    self.add(
                        "opm_controller_apply_resources_total",
                        labels(key, &[("action", action)]),
                        *n as f64,
                    );
                }
            }
            Metric::PruneResources { count } => self.add(
                "opm_controller_prune_resources_total",
                labels(key, &[]),
                *count as f64,
            ),
            Metric::InventorySize { count } => self.set(
                "opm_controller_inventory_size",
                labels(key, &[]),
                *count as f64,
            ),
        }
    }

    /// Removes every series of a deleted release.
    pub fn forget(&self, key: &ReleaseKey) {
        let prefix = labels(key, &[]);
        let mut m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|(_, l), _| !l.starts_with(&prefix));
    }

    /// The value of one series, for tests and diagnostics.
    pub fn get(&self, name: &str, key: &ReleaseKey, extra: &[(&str, &str)]) -> Option<f64> {
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&(name.to_string(), labels(key, extra))).copied()
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let m = self.series.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for ((name, l), v) in m.iter() {
            let _ = writeln!(out, "{name}{{{l}}} {v}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::{Kind, Outcome};
    use std::time::Duration;

    #[test]
    fn records_and_forgets_a_release() {
        let m = Metrics::default();
        let key = ReleaseKey {
            kind: Kind::Release,
            namespace: "ns".into(),
            name: "a".into(),
        };
        m.record(
            &key,
            &Metric::Reconcile {
                outcome: Outcome::NoOp,
                duration: Duration::from_millis(10),
            },
        );
        m.record(
            &key,
            &Metric::Reconcile {
                outcome: Outcome::NoOp,
                duration: Duration::from_millis(10),
            },
        );
        assert_eq!(
            m.get(
                "opm_controller_reconcile_total",
                &key,
                &[("outcome", "no_op")]
            ),
            Some(2.0)
        );
        assert!(
            m.render()
                .contains("opm_controller_reconcile_total{kind=\"Release\"")
        );
        m.forget(&key);
        assert!(m.render().is_empty());
    }
}
