//! Remote cluster series (SPEC §31): which cluster each release applies to, and how many
//! clients and managed-object watches the operator holds open for remote clusters.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opm_core::ReleaseKey;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// The values behind the series, shared with the collector.
#[derive(Debug, Default)]
pub struct ClusterGauges {
    /// Release → the server URL of the remote cluster it applies to.
    releases: Mutex<BTreeMap<ReleaseKey, String>>,
    clients: AtomicU64,
    watches: AtomicU64,
}

impl ClusterGauges {
    /// `key` applies to `server` (`None`: the operator's own cluster, no series).
    pub fn set_release(&self, key: &ReleaseKey, server: Option<&str>) {
        let mut r = self.releases.lock().unwrap_or_else(|p| p.into_inner());
        match server {
            Some(s) => {
                if r.get(key).map(String::as_str) != Some(s) {
                    r.insert(key.clone(), s.to_string());
                }
            }
            None => {
                r.remove(key);
            }
        }
    }

    /// Open remote clients (one per kubeconfig digest) and their watched kinds.
    pub fn set_open(&self, clients: u64, watches: u64) {
        self.clients.store(clients, Ordering::Relaxed);
        self.watches.store(watches, Ordering::Relaxed);
    }

    /// (clients, watches) now.
    pub fn open(&self) -> (u64, u64) {
        (
            self.clients.load(Ordering::Relaxed),
            self.watches.load(Ordering::Relaxed),
        )
    }
}

#[derive(Debug)]
pub(super) struct ClusterCollector(pub Arc<ClusterGauges>);

impl Collector for ClusterCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let (clients, watches) = self.0.open();
        for (name, help, v) in [
            (
                "opm_controller_remote_clients",
                "Remote cluster clients open, one per distinct kubeconfig.",
                clients,
            ),
            (
                "opm_controller_remote_watches",
                "Managed-object watches open in remote clusters, one per kind and cluster.",
                watches,
            ),
        ] {
            let g = ConstGauge::new(v as i64);
            let metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            g.encode(metric)?;
        }
        let releases = self.0.releases.lock().unwrap_or_else(|p| p.into_inner());
        if releases.is_empty() {
            return Ok(());
        }
        let mut metric = encoder.encode_descriptor(
            "opm_controller_release_cluster",
            "The remote cluster a release applies to (1 per release; none for this cluster).",
            None,
            MetricType::Gauge,
        )?;
        for (key, server) in releases.iter() {
            let labels = [
                ("kind", key.kind.as_str()),
                ("name", key.name.as_str()),
                ("namespace", key.namespace.as_str()),
                ("cluster", server.as_str()),
            ];
            metric
                .encode_family(&labels.as_slice())?
                .encode_gauge(&1i64)?;
        }
        Ok(())
    }
}
