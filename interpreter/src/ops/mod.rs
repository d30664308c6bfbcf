//! Running it in production: Prometheus metrics, leader election, the HTTP probes and
//! their heartbeats, the trace sink, and the events webhook.

pub(crate) mod admission;
pub mod endpoints;
pub mod events_webhook;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod trace_sink;
