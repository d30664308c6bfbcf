//! What every attempt shares: clients, caches, watches, metrics and the render gate. Built
//! once by `run` (and the test harnesses), borrowed by the driver and each executor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use opm_core::Config;

use crate::effects::local::Local;
use crate::effects::unpersisted::Unpersisted;
use crate::kube::discovery::Resolver;
use crate::kube::impersonate::Clients;
use crate::kube::live_cache::LiveCache;
use crate::kube::object_watch::ObjectWatch;
use crate::kube::observed::Observed;
use crate::ops::metrics::Metrics;
use crate::steps::drift;
use crate::steps::events::EventSink;

/// Everything attempts share.
pub struct Runtime {
    /// The operator's configuration, as the core reads it.
    pub config: Config,
    /// The operator's client and the impersonating ones.
    pub clients: Clients,
    /// Discovery, cached.
    pub resolver: Resolver,
    /// Kubernetes Events, on their own client.
    pub events: EventSink,
    /// `--events-webhook`: every event also queued for the receiver, if one is set.
    pub webhook: Option<crate::ops::events_webhook::EventsWebhook>,
    /// The Prometheus registry (SPEC §21).
    pub metrics: Metrics,
    /// The artifact cache and the renderer.
    pub local: Local,
    /// `--trace-dir`: where attempts are recorded, if anywhere.
    pub traces: Option<crate::ops::trace_sink::TraceSink>,
    /// Live object versions seen by applies and drift checks (saves their GETs).
    pub live: LiveCache,
    /// What the watches delivered: releases and Flux sources (saves their GETs).
    pub observed: Observed,
    /// Versions of the objects we manage (saves drift dry-runs and first GETs).
    pub watch: ObjectWatch,
    /// What drift checks skipped, for tests and the bench.
    pub drift_stats: drift::DriftStats,
    /// `/healthz` heartbeats.
    pub health: Arc<crate::ops::health::Health>,
    /// Consecutive failed attempts whose status could not be written (SPEC §24): the core
    /// sees them as the persisted `failureCounters.reconcile` until a write lands.
    pub unpersisted: Unpersisted,
    /// Fair turns of `cue` (SPEC §24): at most `--max-concurrent-renders` at once and at
    /// most half of them (at least one) for one namespace, so a tenant whose renders burn
    /// until their deadline cannot hold every turn while another tenant's render queues.
    pub render_gate: Arc<crate::ops::admission::Admission>,
    attempt_ids: AtomicU64,
    /// Objects read for their health, by version (saves their GETs, SPEC §26).
    pub health_reads: crate::steps::health_read::HealthCache,
    /// What renders read of `valuesFrom` objects (SPEC §27): where the values watch opens.
    pub values_reads: crate::steps::values_from::ReadVersions,
    /// Remote clusters, one connection per kubeconfig digest (SPEC §31).
    pub clusters: crate::effects::clusters::Clusters,
}

impl Runtime {
    /// The shared state of one operator process, with empty caches.
    pub fn new(
        config: Config,
        clients: Clients,
        local: Local,
        traces: Option<crate::ops::trace_sink::TraceSink>,
        webhook: Option<crate::ops::events_webhook::EventsWebhook>,
    ) -> Arc<Self> {
        let operator = clients.operator();
        // Events get a client with its own rate limiter: a burst of events never delays a
        // status write (issue 13 item 5).
        let events = match clients.operator_events() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "building the events client failed; sharing the operator's");
                operator.clone()
            }
        };
        let health: Arc<crate::ops::health::Health> = Arc::default();
        let render_gate = crate::ops::admission::Admission::new(
            opm_core::fairness::Limits::with_default_per_namespace(
                local.renderer.config().max_concurrent.max(1),
                None,
            ),
            health.clone(),
        );
        let metrics = Metrics::default();
        if let Some(w) = &webhook {
            let w = w.clone();
            metrics.serve_webhook_stats(move || w.stats());
        }
        let clusters =
            crate::effects::clusters::Clusters::new(clients.limit(), metrics.clusters.clone());
        Arc::new(Self {
            clusters,
            config,
            webhook,
            resolver: Resolver::new(operator.clone()),
            events: EventSink::new(events),
            metrics,
            clients,
            local,
            traces,
            live: LiveCache::default(),
            observed: Observed::default(),
            watch: ObjectWatch::new(operator),
            drift_stats: drift::DriftStats::default(),
            health,
            unpersisted: Unpersisted::default(),
            render_gate,
            attempt_ids: AtomicU64::new(0),
            health_reads: Default::default(),
            values_reads: Default::default(),
        })
    }
}

impl Runtime {
    /// A fresh id for the next attempt (logs and traces name attempts by it).
    pub fn next_attempt_id(&self) -> u64 {
        self.attempt_ids.fetch_add(1, Ordering::Relaxed)
    }
}

impl crate::ops::endpoints::Observed for Runtime {
    fn health(&self) -> &Arc<crate::ops::health::Health> {
        &self.health
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}
