//! The controllers and the attempt driver: the kube-runtime loops and the driver that runs
//! one attempt of the core.

// `controller::controller`: the folder holds more than the controllers themselves.
mod ahead;
mod context;
#[allow(clippy::module_inception)]
pub mod controller;
mod dependents;
pub mod driver;
pub(crate) mod jitter;
mod kubeconfig_watch;
mod panics;
mod platform;
mod queue;
pub(crate) mod values_watch;
mod watches;
