//! The binary's subcommands (`run`, `render`, `crds`) and the value parsers of their
//! flags.

pub mod crds;
pub(crate) mod flags;
pub mod render_cmd;
pub mod run;
pub(crate) mod size_flag;
