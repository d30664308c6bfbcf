//! The async interpreter of opm-operator (DESIGN.md §2): the executors that carry out the
//! core's effects against the network, the disk and the `cue` binary. Executors decide
//! nothing: each returns a typed error whose variant tells the core which SPEC §4 exit
//! applies (`class()` for transient vs stalled, `reason()` for the condition reason).
//!
//! - [`fetch`]: download with caps, timeout and digest check (SPEC §17).
//! - [`extract`]: hardened tar.gz/zip extraction (SPEC §17).
//! - [`release_path`]: `spec.path` navigation inside an artifact.
//! - [`artifact_cache`]: extracted artifacts by digest, LRU-bounded, one download per digest.
//! - [`module_ref`]: module reference validation and the synthesised release package.
//! - [`render`]: the `cue` child process, its deadline, caps, stderr classification, cache.
//! - [`rendered`]: the exported release value and Secret redaction (SPEC §23).

pub mod artifact_cache;
pub mod extract;
pub mod fetch;
pub mod module_ref;
pub mod release_path;
pub mod render;
pub mod rendered;

pub use fetch::FailureClass;
