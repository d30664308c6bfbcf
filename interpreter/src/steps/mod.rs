//! The API steps the executors call, one module per step, policy-free: each carries out
//! what the core decided (apply, prune, drift check, status write, …) and reports what
//! happened; none of them picks a reason or a requeue.

pub mod apply;
pub mod apply_policy;
pub mod deps;
pub mod drift;
pub mod events;
pub mod finalizer;
pub mod health_read;
pub mod owners;
pub mod prune;
pub mod server_apply;
pub mod service_account;
pub mod source;
pub mod status;
pub mod termination;
pub mod values_from;
