//! The `cue` side (DESIGN §3, SPEC §18, §23, §27): the renderer and its limits, the
//! synthesised release package, the exported value, Secret redaction and registry
//! credentials.

pub mod cue_limits;
pub mod local_values;
// Issue 17: its public items get docs with the render batching that reworks it.
#[allow(missing_docs)]
pub mod module_ref;
pub(crate) mod redact;
// Issue 17: its public items get docs with the render batching that reworks it.
#[allow(missing_docs)]
pub mod registry_auth;
// Issue 17: its public items get docs with the render batching that reworks it.
#[allow(missing_docs)]
pub mod render;
pub mod rendered;
pub mod secrets;
