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
//! input ([`Effect::is_awaited`]), of the kind [`Effect::answered_by`] names (an
//! [`InputName`], the same value [`InputKind::kind`] gives). A result that does not answer
//! the awaited effect is refused with [`InputError::Unexpected`] and changes nothing. After `Done` the attempt is
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
//! ## Where each SPEC section lives
//!
//! One module implements each section of SPEC.md; the interpreter only executes what it
//! decides.
//!
//! | SPEC | module |
//! |---|---|
//! | §1 API | [`api`] |
//! | §2 Constants | [`constants`] |
//! | §3 One reconcile attempt | [`machine`] ([`Attempt`]) |
//! | §4 Exits | [`exits`] (reasons: [`reason`], outcomes: [`outcome`]) |
//! | §5 Backoff and requeue | [`backoff`] |
//! | §6 Labels | [`render_value`] |
//! | §7 Digests and no-op | [`digest`] |
//! | §8 Inventory and the stale set | [`inventory`] |
//! | §9 Prune | [`prune`] (what becomes of each stale entry: [`desired`]) |
//! | §10 Status commit | `status`, private (conditions: [`conditions`]) |
//! | §11 Events | [`reason`] (reason → action) |
//! | §12 Deletion | [`deletion`] |
//! | §13 Suspend | [`machine`] |
//! | §14 Dependencies | [`deps`] |
//! | §15 Impersonation and tenancy | [`impersonation`] |
//! | §16 Source resolution | `source`, private |
//! | §17 Artifact fetch and extraction | [`exits`] (classification; the download is the interpreter's) |
//! | §18 Render | [`render_value`] (render → desired objects, as the machine and `kubectl opm diff` both do it: [`desired`]) |
//! | §19 Apply | [`render_value`] (stages and order) |
//! | §20 Drift detection | [`drift`] (field comparison: [`fields`]) |
//! | §21 Metrics | [`effect`] ([`Metric`]) |
//! | §22 Operator process | [`config`] (`/healthz`: [`liveness`]) |
//! | §23 Traces and simulation | [`trace`] (the simulated world: the `opm-world` crate, `world/`) |
//! | §24 Limits | [`config`] (per-namespace fairness: [`fairness`]) |
//! | §25 Ownership | [`ownership`] |
//! | §26 Health | [`health`] |
//! | §27 Values from objects | [`values_from`] |
//! | §28 Per-object policies | [`policy`] |
//! | §29 The user CLI | the `kubectl-opm` crate (`cli/`) |
//! | §30 OPM modules and the Platform | [`opm`] (the Platform: [`opm::platform`]) |
//! | §32 Alerts: the events webhook's queue, drops and backoff | [`event_delivery`] |
//! | §32 Lifecycle: ordered teardown | [`teardown`] |
//!
//! What re-triggers an attempt (a dependency becoming Ready, a new ServiceAccount, a
//! source's new artifact, SPEC §5, §14, §15) and when a release's metric series are
//! forgotten is [`triggers`], shared by the operator and the simulated world.
//! Shared helpers with no section of their own: [`duration`] (Go-style durations),
//! [`names`] (RFC 1123 names), [`object`] (object identities), [`input`] (inputs and typed
//! errors).
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

#![warn(unreachable_pub)]
#![warn(missing_docs)]

// missing_docs: its doc comments become the CRDs' field descriptions (deploy/crds): documenting them is a CRD change of its own.
#[allow(missing_docs)]
pub mod api;
pub mod backoff;
pub mod conditions;
pub mod config;
pub mod constants;
pub mod deletion;
pub mod deps;
pub mod desired;
pub mod digest;
pub mod drift;
pub mod duration;
pub mod effect;
pub mod event_delivery;
pub mod exits;
pub mod fairness;
pub mod fields;
pub mod health;
pub mod hooks;
pub mod impersonation;
pub mod input;
pub mod inventory;
pub mod liveness;
pub mod machine;
pub mod names;
pub mod object;
pub mod opm;
pub mod outcome;
pub mod ownership;
pub mod policy;
pub mod prune;
pub mod reason;
pub mod remote;
pub mod render_ahead;
pub mod render_value;
mod source;
mod status;
pub mod teardown;
pub mod trace;
pub mod triggers;
pub mod values_from;

pub use config::{AllowOperatorIdentity, Config};
pub use effect::{Effect, EffectKind, Event, EventType, Metric};
pub use input::{
    ApiError, FetchError, Input, InputError, InputKind, InputName, RenderError, SourceError,
};
pub use machine::Attempt;
pub use object::{DesiredObject, Kind, ReleaseKey, ReleaseObject, ResourceId};
pub use outcome::Outcome;
pub use reason::Reason;
