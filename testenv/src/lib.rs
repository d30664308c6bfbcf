//! Test support for opm-operator: the real parts integration tests run against.
//!
//! - [`TestEnv`]: one real kube-apiserver (+ embedded etcd) per test binary, started on
//!   first use, with the Flux source CRDs installed; a fresh namespace and admin client
//!   per test; [`install_crds`] for the project's own CRDs.
//! - [`rbac`]: ServiceAccounts, Roles, bindings and impersonating clients.
//! - [`ArtifactServer`] + [`archive`]: artifacts over real HTTP on 127.0.0.1, built in the
//!   test (tar.gz, zip) with real sha256 digests, and injectable faults.
//! - [`flux`]: Flux source objects with `status.artifact` set by the test.
//! - [`CueRegistry`]: `cue mod registry` with the example modules published; [`cue`] runs
//!   the real binary; [`opm`]: the OPM core, catalogs and modules of `examples/opm/`.
//! - [`RestartableApiServer`]: an API server of its own to SIGKILL and restart (chaos).
//! - [`tools`]: where the pinned tools are (`./tools/install` puts them there).
//! - [`wait::eventually`]: poll until a condition holds.
//! - [`workloads::Workloads`]: kube-controller-manager, kube-scheduler and kwok with fake
//!   nodes, started on demand, so workloads roll out (SPEC §26).
//!
//! Everything started here is stopped when the test binary exits (child processes
//! terminated, temporary directories removed), and children die with the test binary
//! even when it is killed.

pub mod archive;
pub mod artifacts;
pub mod auth_registry;
mod crds;
pub mod cue;
mod env;
mod error;
pub mod flux;
pub mod opm;
mod process;
pub mod rbac;
pub mod registry;
mod restartable;
pub mod tools;
pub mod wait;
pub mod workloads;

pub use artifacts::{ArtifactServer, Fault};
pub use crds::{flux_source_crds, install_crds, load_crds_from_dir};
pub use env::{TestEnv, TestNamespace};
pub use error::{Error, Result};
pub use registry::CueRegistry;
pub use restartable::RestartableApiServer;
