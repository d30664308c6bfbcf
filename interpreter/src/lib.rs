//! The async interpreter of opm-operator (DESIGN.md §2): the executors that carry out the
//! core's effects against the network, the disk, the `cue` binary and the Kubernetes API,
//! the driver that runs one attempt of the core, and the controllers. Executors decide
//! nothing: each returns a typed error, [`effects::local`] translates download and render
//! errors into the core's typed errors at one boundary, and the core alone picks the SPEC §4
//! exit (reason, transient or stalled). [`effects::local::Verdict`] shows executor tests
//! that exit, so they assert the real mapping.
//!
//! The folders, by role (a folder uses only those above it in this list, and no module
//! uses itself through others: `tools/check-module-cycles`, run by `make lint`, checks
//! both):
//!
//! - [`kube`]: clients, API errors, discovery, dynamic objects, the managed-object watch,
//!   what the watches delivered, the live cache and the object comparison it digests.
//! - [`artifact`]: download, hardened extraction, the digest-keyed cache, `spec.path`.
//! - [`cue`]: the `cue` renderer, its limits, the synthesised package, the exported value,
//!   Secret redaction, registry credentials, local values files.
//! - [`steps`]: the policy-free API steps (apply, prune, drift, status, events, …).
//! - [`ops`]: metrics, leader election, the probes and their heartbeats, the fair
//!   admission gate that reports to them, the trace sink, the events webhook.
//! - [`effects`]: one executor per effect kind: a `run` that performs it and answers with
//!   the core's `InputKind`, and `timed_out`, its answer when it overruns
//!   `Attempt::bound`; and the runtime every executor shares.
//! - [`controller`]: the kube-runtime controllers, the values watch that re-triggers
//!   them, and the driver of one attempt.
//! - [`commands`]: `run`, `render`, `crds` and their flag parsers.

#![warn(unreachable_pub)]
#![warn(missing_docs)]

pub mod artifact;
pub mod commands;
pub mod controller;
pub mod cue;
pub mod effects;
pub mod kube;
pub mod ops;
pub mod steps;
