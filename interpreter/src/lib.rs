//! The async interpreter of opm-operator (DESIGN.md §2): the executors that carry out the
//! core's effects against the network, the disk and the `cue` binary. Executors decide
//! nothing: each returns a typed error whose variant tells the core which SPEC §4 exit
//! applies (`class()` for transient vs stalled, `reason()` for the condition reason).

pub mod artifact_cache;
pub mod extract;
pub mod fetch;
pub mod module_ref;
pub mod render;

pub use fetch::FailureClass;
