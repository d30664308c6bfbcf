//! The API steps the executors call, one module per step, policy-free: each carries out
//! what the core decided (apply, prune, drift check, status write, …) and reports what
//! happened; none of them picks a reason or a requeue.

pub(crate) mod apply;
pub mod apply_policy;
pub mod deps;
pub(crate) mod drift;
pub mod events;
pub(crate) mod finalizer;
pub(crate) mod health_read;
pub(crate) mod owners;
pub(crate) mod prune;
pub(crate) mod server_apply;
pub(crate) mod service_account;
pub mod source;
pub(crate) mod status;
pub(crate) mod termination;
pub mod values_from;
