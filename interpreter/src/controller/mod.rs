//! The controllers and the attempt driver: the kube-runtime loops, the fair admission
//! gate, the state every attempt shares, and the driver that runs one attempt of the
//! core.

pub mod admission;
// `controller::controller` is the public path the tests and the cli use.
#[allow(clippy::module_inception)]
pub mod controller;
pub mod driver;
pub mod jitter;
mod panics;
pub mod runtime;
pub mod unpersisted;
mod watches;
