//! The async interpreter of opm-operator (DESIGN.md §2): the executors that carry out the
//! core's effects against the network, the disk, the `cue` binary and the Kubernetes API,
//! the driver that runs one attempt of the core, and the controllers. Executors decide
//! nothing: each returns a typed error, [`effects::local`] translates download and render
//! errors into the core's typed errors at one boundary, and the core alone picks the SPEC §4
//! exit (reason, transient or stalled). [`effects::local::Verdict`] shows executor tests
//! that exit, so they assert the real mapping.
//!
//! The folders, by role (a folder uses only those above it in this list):
//!
//! - [`kube`]: clients, API errors, discovery, dynamic objects, watches, live cache.
//! - [`artifact`]: download, hardened extraction, the digest-keyed cache, `spec.path`.
//! - [`cue`]: the `cue` renderer, its limits, the synthesised package, the exported value,
//!   Secret redaction, registry credentials.
//! - [`steps`]: the policy-free API steps (apply, prune, drift, status, events, …).
//! - [`ops`]: metrics, leader election, probes, the trace sink.
//! - [`effects`]: one executor per effect kind: a `run` that performs it and answers with
//!   the core's `InputKind`, and `timed_out`, its answer when it overruns
//!   `Attempt::bound`.
//! - [`controller`]: the kube-runtime controllers, the fair admission gate, the shared
//!   runtime, and the driver of one attempt.
//! - [`commands`]: `run`, `render`, `crds` and their flag parsers.

pub mod artifact;
pub mod commands;
pub mod controller;
pub mod cue;
pub mod effects;
pub mod kube;
pub mod ops;
pub mod steps;
