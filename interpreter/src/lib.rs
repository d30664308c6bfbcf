//! The async interpreter of opm-operator (DESIGN.md §2): the executors that carry out the
//! core's effects against the network, the disk, the `cue` binary and the Kubernetes API,
//! the driver that runs one attempt of the core, and the controllers. Executors decide
//! nothing: each returns a typed error, [`local`] translates it into the core's typed error
//! at one boundary, and the core alone picks the SPEC §4 exit (reason, transient or stalled).
//! [`local::Verdict`] shows executor tests that exit, so they assert the real mapping.
//!
//! - [`fetch`]: download with caps, timeout and digest check (SPEC §17).
//! - [`extract`]: hardened tar.gz/zip extraction (SPEC §17).
//! - [`release_path`]: `spec.path` navigation inside an artifact.
//! - [`artifact_cache`]: extracted artifacts by digest, LRU-bounded, one download per digest.
//! - [`module_ref`]: module reference validation and the synthesised release package.
//! - [`render`]: the `cue` child process, its deadline, caps, stderr classification, cache.
//! - [`rendered`]: the exported release value and Secret redaction (SPEC §23).
//! - [`driver`]: one attempt of the core: feeds inputs, fires events and metrics, bounds
//!   each awaited effect by `Attempt::bound`, and dispatches it to its executor.
//! - `effects`: the executors, one module per effect kind (`effects::apply`,
//!   `effects::render`, …). Each has a `run` that performs the effect and answers with the
//!   core's `InputKind` (failing each object on a client that cannot be built, scrubbing
//!   Secret values from API errors; download and render errors pass through [`local`]) and,
//!   next to it, `timed_out`: its answer when it overruns its bound.
//! - [`runtime`]: what every attempt shares (clients, caches, watches, metrics, the render
//!   gate); [`unpersisted`]: failures whose status write failed; [`jitter`]: ±5 % on
//!   success requeues.

pub mod artifact_cache;
pub mod cue_limits;
pub mod extract;
pub mod fetch;
pub mod module_ref;
pub mod redact;
pub mod registry_auth;
pub mod release_path;
pub mod render;
pub mod render_cmd;
pub mod rendered;
pub mod size_flag;

pub mod admission;
pub mod api_error;
pub mod apply;
pub mod apply_policy;
pub mod controller;
pub mod crds;
pub mod deps;
pub mod discovery;
pub mod drift;
pub mod driver;
pub mod dynamic;
pub(crate) mod effects;
pub mod endpoints;
pub mod events;
pub mod finalizer;
pub mod flags;
pub mod health;
pub mod health_read;
pub mod impersonate;
pub mod jitter;
pub mod leader;
pub mod live_cache;
pub mod local;
pub mod local_values;
pub mod metrics;
pub mod object_watch;
pub mod observed;
pub mod owners;
pub mod prune;
pub mod releases;
pub mod run;
pub mod runtime;
pub mod secrets;
pub mod service_account;
pub mod source;
pub mod status;
pub mod termination;
pub mod trace_sink;
pub mod unpersisted;
pub mod values_from;
pub mod values_watch;
