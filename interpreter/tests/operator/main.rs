//! End-to-end tests of the operator on the real test cluster (opm-testenv): the operator
//! runs in-process through the same code path as `opm-operator run`, real `cue`, real
//! `cue mod registry`, real HTTP artifacts. One API server for this whole binary.

mod alerts;
mod artifacts;
mod depends_objects;
mod drift_policies;
mod events_webhook;
mod failures;
mod ha;
mod harness;
mod health;
mod hooks;
mod hostile;
mod identity;
mod leader;
mod lifecycle;
mod metrics;
mod opm;
mod private_registry;
mod process;
mod rbac;
mod redteam_cel;
mod redteam_fairness;
mod redteam_inputs;
mod redteam_ownership;
mod redteam_render;
mod redteam_tenancy;
mod redteam_values;
mod remote;
mod security;
#[path = "../support/mod.rs"]
mod support;
mod teardown;
mod values;
