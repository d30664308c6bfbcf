//! `opm-sim`'s library half: the scenario format (`opm-sim run SCENARIO`), which builds and
//! runs the core's simulated world ([`opm_world`]). The binary (`src/main.rs`) adds
//! the command line, the reports and trace replay.

pub mod scenario;
