//! # opm-core: the pure reconcile core of opm-operator
//!
//! One reconcile attempt of a `ModuleRelease` or `Release` is a synchronous state machine,
//! [`Attempt`]. It receives [`Input`]s (the observed release, then the result of each effect
//! it asked for) and returns [`Effect`]s (read a source, render, apply, prune, patch status,
//! emit an event, ... and finally [`Effect::Done`] with the [`Outcome`] and the requeue).
//! Every decision of SPEC.md lives here: phase order, failure classification, conditions,
//! reasons, messages, events, digests, inventory, prune guards, status, requeue.
//!
//! ## What the machine never does
//!
//! It never performs IO: no network, no files, no Kubernetes client, no child processes.
//! It never reads a clock (time arrives as [`Input::now`]), never draws a random number,
//! never spawns a thread or task and is not async. It never sees Secret values, only their
//! digests (SPEC §23). Given the same [`Config`] and the same inputs it returns the same
//! effects, byte for byte once serialised, so an attempt is a replayable JSON-lines trace
//! ([`trace`]). It never panics on any input: a malformed input is an [`InputError`] or a
//! classified exit.
//!
//! ## The drain rule
//!
//! **Feed one input, execute the whole batch it returns, then feed the result of that batch's
//! awaited effect, and nothing else, until a batch ends in `Done`.**
//!
//! A batch is zero or more fire-and-forget effects (`EmitEvent`, `RecordMetric`), then
//! exactly one awaited effect or `Done`, last. Every awaited effect gets exactly one result
//! input ([`Effect::is_awaited`]). A result that does not answer the awaited effect is
//! refused with [`InputError::Unexpected`] and changes nothing. After `Done` the attempt is
//! spent; the next `Observed` input starts a new [`Attempt`] (the only memory between
//! attempts is the release's `status`).
//!
//! The interpreter's loop:
//! 1. read the release and call [`Attempt::start`] with an `Observed` input;
//! 2. execute the returned batch in order: fire-and-forget effects, then the last one;
//! 3. if the last is awaited, bound it by [`Attempt::deadline`] − now (an overrun is that
//!    effect's `Timeout` error), wrap its result as the matching [`InputKind`] with the
//!    current time and call [`Attempt::step`]; go to 2;
//! 4. on `Done`, requeue after `requeue_after` (±5 % jitter on successes only).
//!
//! ## Where things live
//!
//! [`api`] the CRDs (SPEC §1) · [`input`] inputs and typed errors · [`effect`] effects ·
//! [`machine`] the attempt (§3) · [`outcome`] outcomes and the exit table (§4) · [`backoff`]
//! (§5) · [`render_value`] exported value → objects, labels, apply stages (§6, §18, §19) ·
//! [`digest`] (§7) · [`inventory`] (§8) · [`prune`] guards (§9) · [`conditions`] and
//! [`status`] (§10) · [`deletion`] (§12) · [`deps`] (§14) · [`impersonation`] (§15) ·
//! [`source`] (§16-18) · [`drift`] (§20) · [`trace`] (§23) · [`values_from`] (§27).
//!
//! ```
//! use opm_core::{Attempt, Config, Effect, Input, InputKind, ReleaseKey, Kind};
//! let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
//! let key = ReleaseKey { kind: Kind::Release, namespace: "demo".into(), name: "gone".into() };
//! let (mut attempt, batch) =
//!     Attempt::start(&Config::default(), Input::new(now, InputKind::Observed { key, object: None }));
//! assert!(matches!(batch.last(), Some(Effect::Done { requeue_after: None, .. })));
//! assert!(attempt.step(Input::new(now, InputKind::StatusPatched { result: Ok(()) })).is_err());
//! ```

pub mod api;
pub mod backoff;
pub mod conditions;
pub mod config;
pub mod constants;
pub mod deletion;
pub mod deps;
pub mod digest;
pub mod drift;
pub mod duration;
pub mod effect;
pub mod exits;
pub mod fairness;
pub mod fields;
pub mod health;
pub mod impersonation;
pub mod input;
pub mod inventory;
pub mod liveness;
pub mod machine;
pub mod names;
pub mod object;
pub mod outcome;
pub mod ownership;
pub mod policy;
pub mod prune;
pub mod reason;
pub mod render_value;
pub mod source;
pub mod status;
pub mod trace;
pub mod values_from;
pub mod world;

pub use config::{AllowOperatorIdentity, Config};
pub use effect::{Effect, EffectKind, Event, EventType, Metric};
pub use input::{ApiError, FetchError, Input, InputError, InputKind, RenderError, SourceError};
pub use machine::Attempt;
pub use object::{DesiredObject, Kind, ReleaseKey, ReleaseObject, ResourceId};
pub use outcome::Outcome;
pub use reason::Reason;
pub use world::World;
