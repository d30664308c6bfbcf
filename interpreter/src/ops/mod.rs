//! Running it in production: Prometheus metrics, leader election, the HTTP probes and
//! their heartbeats, and the trace sink.

pub(crate) mod admission;
pub mod endpoints;
pub mod health;
pub mod leader;
pub(crate) mod metrics;
pub mod trace_sink;
