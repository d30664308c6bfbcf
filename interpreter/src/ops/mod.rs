//! Running it in production: Prometheus metrics, leader election, the HTTP probes and
//! their heartbeats, and the trace sink.

pub mod admission;
pub mod endpoints;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod trace_sink;
