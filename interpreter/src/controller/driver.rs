//! Runs one reconcile attempt: read the release, start the core's [`Attempt`], execute each
//! batch in order (fire-and-forget effects first, then the awaited one, bounded by
//! [`Attempt::bound`]), feed the result back, until `Done` (the drain rule, opm_core docs).
//! The executors live in `effects`, one module per effect kind; the driver decides
//! nothing: it only adds ±5 % jitter to success requeues.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opm_core::effect::Effect;
use opm_core::machine::Attempt;
use opm_core::triggers;
use opm_core::{Input, InputKind, Outcome, ReleaseKey, ReleaseObject};
use tracing::Instrument;

use crate::cue::secrets::SecretTable;
use crate::effects::Cx;
use crate::{controller::jitter, kube::releases};

mod execute;
mod trace;
use execute::{execute, fire_and_forget};
use trace::Trace;

pub use crate::controller::jitter::{MAX_REQUEUE, jitter_with};
pub use crate::effects::runtime::Runtime;
pub use crate::effects::unpersisted::Unpersisted;

/// How an attempt ended, as the controller needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The outcome the core reached.
    pub outcome: Outcome,
    /// The Ready condition's reason it wrote.
    pub reason: String,
    /// With jitter applied to success requeues.
    pub requeue_after: Option<Duration>,
    /// A status write of the attempt turned the release Ready: its dependents are
    /// re-triggered ([`opm_core::triggers::retriggers_dependents`]).
    pub turned_ready: bool,
}

/// Failures outside the core's protocol: the release could not be read, or the core refused
/// an input (a driver bug). The controller retries them with a short backoff.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("reading the release failed: {0}")]
    /// Reading the release from the API server failed.
    Read(#[source] kube::Error),
    #[error("the core refused an input: {0}")]
    /// The core refused an input (a driver bug).
    Protocol(#[from] opm_core::InputError),
    /// A bug: the attempt panicked. Only this attempt fails; it is retried with backoff.
    #[error("the attempt panicked: {0}")]
    Panicked(String),
}

impl DriverError {
    /// A short name for metrics and logs.
    pub fn metric_label(&self) -> &'static str {
        match self {
            DriverError::Read(_) => "read",
            DriverError::Protocol(_) => "protocol",
            DriverError::Panicked(_) => "panic",
        }
    }
}

/// Runs one attempt for `key`.
pub async fn run_attempt(rt: &Runtime, key: &ReleaseKey) -> Result<Finished, DriverError> {
    run_attempt_from(rt, key, None).await
}

/// [`run_attempt`] starting from the controller store's copy of the release, used instead
/// of a GET when it is not older than our own last write to it
/// (`crate::kube::observed::Observed::usable`).
pub async fn run_attempt_from(
    rt: &Runtime,
    key: &ReleaseKey,
    stored: Option<ReleaseObject>,
) -> Result<Finished, DriverError> {
    let id = rt.next_attempt_id();
    let span = tracing::info_span!(
        "attempt",
        kind = key.kind.as_str(),
        namespace = %key.namespace,
        name = %key.name,
        attempt = id
    );
    async {
        let mut trace = Trace::new(rt, key, id);
        let result = drive(rt, key, stored, &mut trace).await;
        trace.write();
        match &result {
            Ok(f) => tracing::info!(
                outcome = f.outcome.metric_label(),
                reason = %f.reason,
                requeue_after = ?f.requeue_after,
                "attempt finished"
            ),
            Err(e) => tracing::warn!(error = %e, "attempt failed outside the core"),
        }
        result
    }
    .instrument(span)
    .await
}

/// What the attempt's start read of the release, kept for its end.
struct Seen {
    /// The persisted failure count the core saw (SPEC §24).
    counted: i64,
    /// For the events regarding the release.
    regarding: Option<ObjectReference>,
    /// The release's `metadata.generation` as read (the events webhook sends it).
    generation: Option<i64>,
    /// The metadata read: the finalizer patch's guard.
    known: Option<ObjectMeta>,
    gone: bool,
    /// `Ready=True` when read.
    ready: bool,
}

/// Reads the release (the watch's copy when usable) into the attempt's first input.
async fn observe(
    rt: &Runtime,
    key: &ReleaseKey,
    stored: Option<ReleaseObject>,
) -> Result<(Input, Seen), DriverError> {
    let mut object = match rt.observed.usable(key, stored) {
        Some(o) => Some(o),
        None => releases::read(rt.clients.operator(), key)
            .await
            .map_err(DriverError::Read)?,
    };
    if let Some(obj) = &mut object {
        rt.unpersisted.overlay(key, obj);
        rt.metrics.observe_release(key, obj);
    }
    // A release gone, or applying to this cluster again, lets go of its remote connection
    // (closed once no release uses it, SPEC §31).
    if object
        .as_ref()
        .is_none_or(|o| o.common().kube_config.is_none())
    {
        rt.clusters.released(key);
    }
    let seen = Seen {
        counted: object
            .as_ref()
            .and_then(ReleaseObject::status)
            .map_or(0, |s| s.failure_counters.reconcile),
        regarding: object.as_ref().map(releases::object_ref),
        generation: object.as_ref().and_then(|o| o.meta().generation),
        known: object.as_ref().map(|o| o.meta().clone()),
        gone: object.is_none(),
        ready: triggers::is_ready(object.as_ref().and_then(ReleaseObject::status)),
    };
    let input = Input::new(
        Timestamp::now(),
        InputKind::Observed {
            key: key.clone(),
            object: object.map(Box::new),
        },
    );
    Ok((input, seen))
}

async fn drive(
    rt: &Runtime,
    key: &ReleaseKey,
    stored: Option<ReleaseObject>,
    trace: &mut Trace<'_>,
) -> Result<Finished, DriverError> {
    let (input, seen) = observe(rt, key, stored).await?;
    trace.input(&input);
    let (mut attempt, mut batch) = Attempt::start(&rt.config, input);
    let mut cel_time_left = rt.config.health_eval_timeout;
    trace.effects(&batch);
    let mut secrets = SecretTable::default();
    let (mut ready, mut turned_ready) = (seen.ready, false);
    loop {
        let Some(last) = batch.pop() else {
            // An empty batch breaks the protocol; treat it like a refused input.
            return Err(DriverError::Protocol(opm_core::InputError::Finished));
        };
        // The batch's events go out while the awaited effect runs (the status patch, as a
        // rule): an attempt then costs one round trip less. Among themselves they keep
        // their order.
        let fired = async {
            for effect in &batch {
                fire_and_forget(rt, key, &seen, effect).await;
            }
        };
        if let Effect::Done {
            outcome,
            reason,
            requeue_after,
        } = last
        {
            fired.await;
            let mut finished = finish(rt, key, &seen, outcome, reason, requeue_after);
            finished.turned_ready = turned_ready;
            return Ok(finished);
        }
        if !last.is_awaited() {
            fired.await;
            fire_and_forget(rt, key, &seen, &last).await;
            return Err(DriverError::Protocol(opm_core::InputError::Finished));
        }
        tracing::debug!(effect = ?last.kind(), "executing");
        let mut cx = Cx {
            rt,
            conn: None,
            key,
            secrets: &mut secrets,
            known: seen.known.as_ref(),
            bound: attempt.bound(Timestamp::now(), &last),
        };
        let ((), result) = futures::join!(fired, execute(&mut cx, &last));
        rt.health.progress();
        if let (Effect::PatchStatus { status, .. }, InputKind::StatusPatched { result: Ok(()) }) =
            (&last, &result)
        {
            turned_ready |= triggers::retriggers_dependents(ready, Some(status));
            ready = triggers::is_ready(Some(status));
        }
        let input = Input::new(Timestamp::now(), result);
        trace.input(&input);
        batch = if matches!(input.kind, InputKind::HealthRead { .. }) {
            let stepped = step_judging_health(attempt, input, &mut cel_time_left).await;
            let (a, b) = stepped?;
            attempt = a;
            if let Some(steps) = attempt.eval_deadline().stopped_at() {
                trace.health_deadline_at(steps);
            }
            b
        } else {
            attempt.step(input)?
        };
        trace.effects(&batch);
    }
}

/// Feeds a health read to the core on tokio's blocking pool, never on an async worker: the
/// step judges every object, `healthCheckExprs` included, and a tenant's expression may take
/// up to its budget of steps (SPEC §24). `left` is what remains of the attempt's
/// `--health-eval-timeout`; when it runs out the attempt's deadline flag is raised, the
/// evaluation stops at its next step and the object is `Failed` naming the time, so this
/// waits at most a step past the deadline. Other releases, watches, probes and the lease
/// run on the workers meanwhile.
async fn step_judging_health(
    mut attempt: Attempt,
    input: Input,
    left: &mut Duration,
) -> Result<(Attempt, Vec<Effect>), DriverError> {
    let deadline = attempt.eval_deadline();
    if left.is_zero() {
        deadline.expire();
    }
    let started = std::time::Instant::now();
    let mut task = tokio::task::spawn_blocking(move || {
        let batch = attempt.step(input);
        (attempt, batch)
    });
    let joined = match tokio::time::timeout(*left, &mut task).await {
        Ok(joined) => joined,
        Err(_) => {
            tracing::warn!(
                timeout = ?deadline.after(),
                "health expressions ran over --health-eval-timeout; stopping them"
            );
            deadline.expire();
            task.await
        }
    };
    *left = left.saturating_sub(started.elapsed());
    match joined {
        Ok((attempt, batch)) => Ok((attempt, batch?)),
        // The step panicked: resumed here, where the attempt's panic guard catches it.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(DriverError::Panicked(e.to_string())),
    }
}

/// The attempt's `Done`: forgets a gone release, keeps the unpersisted failure count.
fn finish(
    rt: &Runtime,
    key: &ReleaseKey,
    seen: &Seen,
    outcome: Outcome,
    reason: opm_core::Reason,
    requeue_after: Option<Duration>,
) -> Finished {
    // Gone, or our finalizer just came off (no attempt follows the object's
    // disappearance): the release's series go with it.
    if triggers::forgets_series(!seen.gone, reason) {
        rt.metrics.forget(key);
        rt.observed.forget(key);
        rt.clusters.released(key);
    }
    rt.unpersisted.record(key, reason, seen.counted, seen.gone);
    Finished {
        requeue_after: requeue_after.map(|d| jitter::jitter(outcome, d)),
        outcome,
        reason: reason.to_string(),
        turned_ready: false,
    }
}
