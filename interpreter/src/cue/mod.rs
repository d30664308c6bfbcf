//! The `cue` side (DESIGN §3, SPEC §18, §23, §27): the renderer and its limits, the
//! synthesised release package, the exported value, Secret redaction and registry
//! credentials.

pub mod cue_cache;
pub mod cue_limits;
pub mod local_values;
pub mod module_ref;
pub mod opm;
pub(crate) mod redact;
pub mod registry_auth;
pub mod render;
pub mod render_error;
pub mod rendered;
pub mod secrets;
