//! Runs one reconcile attempt: read the release, start the core's [`Attempt`], execute each
//! batch in order (fire-and-forget effects first, then the awaited one, bounded by the
//! attempt's deadline), feed the result back, until `Done` (the drain rule, opm_core docs).
//! The driver decides nothing; it only adds ±5 % jitter to success requeues.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opm_core::effect::Effect;
use opm_core::input::{
    AppliedObject, ApplyReport, DriftReport, LiveObject, ObjectResult, RenderOutput,
};
use opm_core::machine::Attempt;
use opm_core::trace::{Recorder, TraceHeader};
use opm_core::{
    ApiError, Config, FetchError, Input, InputKind, Outcome, ReleaseKey, ReleaseObject,
    RenderError, SourceError,
};
use serde_json::Value;
use tracing::Instrument;

use crate::apply::{self, ApplyCtx};
use crate::discovery::Resolver;
use crate::events::EventSink;
use crate::impersonate::Clients;
use crate::live_cache::LiveCache;
use crate::local::Local;
use crate::metrics::Metrics;
use crate::object_watch::ObjectWatch;
use crate::observed::Observed;
use crate::secrets::SecretTable;
use crate::{deps, drift, finalizer, owners, prune, releases, service_account, source, status};

/// How long finishing effects (status patch, finalizer removal) may take: the core never
/// cuts them short by the attempt deadline.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything attempts share.
pub struct Runtime {
    pub config: Config,
    pub clients: Clients,
    pub resolver: Resolver,
    pub events: EventSink,
    pub metrics: Metrics,
    pub local: Local,
    /// `--trace-dir`: where attempts are recorded, if anywhere.
    pub traces: Option<crate::trace_sink::TraceSink>,
    /// Live object versions seen by applies and drift checks (saves their GETs).
    pub live: LiveCache,
    /// What the watches delivered: releases and Flux sources (saves their GETs).
    pub observed: Observed,
    /// Versions of the objects we manage (saves drift dry-runs and first GETs).
    pub watch: ObjectWatch,
    pub drift_stats: drift::DriftStats,
    /// `/healthz` heartbeats.
    pub health: Arc<crate::health::Health>,
    /// Consecutive failed attempts whose status could not be written (SPEC §24): the core
    /// sees them as the persisted `failureCounters.reconcile` until a write lands.
    pub unpersisted: Unpersisted,
    /// Fair turns of `cue` (SPEC §24): at most `--max-concurrent-renders` at once and at
    /// most half of them (at least one) for one namespace, so a tenant whose renders burn
    /// until their deadline cannot hold every turn while another tenant's render queues.
    pub render_gate: Arc<crate::admission::Admission>,
    attempt_ids: AtomicU64,
    /// Objects read for their health, by version (saves their GETs, SPEC §26).
    pub health_reads: crate::health_read::HealthCache,
}

impl Runtime {
    pub fn new(
        config: Config,
        clients: Clients,
        local: Local,
        traces: Option<crate::trace_sink::TraceSink>,
    ) -> Arc<Self> {
        let operator = clients.operator();
        // Events get a client with its own rate limiter: a burst of events never delays a
        // status write (issue 13 item 5).
        let events = match clients.operator_events() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "building the events client failed; sharing the operator's");
                operator.clone()
            }
        };
        let health: Arc<crate::health::Health> = Arc::default();
        let render_gate = crate::admission::Admission::new(
            opm_core::fairness::Limits::with_default_per_namespace(
                local.renderer.config().max_concurrent.max(1),
                None,
            ),
            health.clone(),
        );
        Arc::new(Self {
            config,
            resolver: Resolver::new(operator.clone()),
            events: EventSink::new(events),
            metrics: Metrics::default(),
            clients,
            local,
            traces,
            live: LiveCache::default(),
            observed: Observed::default(),
            watch: ObjectWatch::new(operator),
            drift_stats: drift::DriftStats::default(),
            health,
            unpersisted: Unpersisted::default(),
            render_gate,
            attempt_ids: AtomicU64::new(0),
            health_reads: Default::default(),
        })
    }
}

/// How an attempt ended, as the controller needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub outcome: Outcome,
    pub reason: String,
    /// With jitter applied to success requeues.
    pub requeue_after: Option<Duration>,
}

/// Failures outside the core's protocol: the release could not be read, or the core refused
/// an input (a driver bug). The controller retries them with a short backoff.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("reading the release failed: {0}")]
    Read(#[source] kube::Error),
    #[error("the core refused an input: {0}")]
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
/// of a GET when it is not older than our own last write to it ([`Observed::usable`]).
pub async fn run_attempt_from(
    rt: &Runtime,
    key: &ReleaseKey,
    stored: Option<ReleaseObject>,
) -> Result<Finished, DriverError> {
    let id = rt.attempt_ids.fetch_add(1, Ordering::Relaxed);
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

async fn drive(
    rt: &Runtime,
    key: &ReleaseKey,
    stored: Option<ReleaseObject>,
    trace: &mut Trace<'_>,
) -> Result<Finished, DriverError> {
    let mut object = match rt.observed.usable(key, stored) {
        Some(o) => Some(o),
        None => releases::read(rt.clients.operator(), key)
            .await
            .map_err(DriverError::Read)?,
    };
    if let Some(obj) = &mut object {
        rt.unpersisted.overlay(key, obj);
    }
    let counted = object
        .as_ref()
        .and_then(ReleaseObject::status)
        .map_or(0, |s| s.failure_counters.reconcile);
    let regarding = object.as_ref().map(releases::object_ref);
    let known = object.as_ref().map(|o| o.meta().clone());
    let gone = object.is_none();
    if let Some(obj) = &object {
        rt.metrics.observe_release(key, obj);
    }
    let input = Input::new(
        Timestamp::now(),
        InputKind::Observed {
            key: key.clone(),
            object: object.map(Box::new),
        },
    );
    trace.input(&input);
    let (mut attempt, mut batch) = Attempt::start(&rt.config, input);
    trace.effects(&batch);
    let mut secrets = SecretTable::default();
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
                fire_and_forget(rt, key, regarding.as_ref(), effect).await;
            }
        };
        if let Effect::Done {
            outcome,
            reason,
            requeue_after,
        } = last
        {
            fired.await;
            // Gone, or our finalizer just came off (no attempt follows the object's
            // disappearance): the release's series go with it.
            if gone || reason == opm_core::outcome::reasons::DELETED {
                rt.metrics.forget(key);
                rt.observed.forget(key);
            }
            rt.unpersisted.record(key, &reason, counted, gone);
            return Ok(Finished {
                requeue_after: requeue_after.map(|d| jitter(outcome, d)),
                outcome,
                reason,
            });
        }
        if !last.is_awaited() {
            fired.await;
            fire_and_forget(rt, key, regarding.as_ref(), &last).await;
            return Err(DriverError::Protocol(opm_core::InputError::Finished));
        }
        let finishing = matches!(
            last,
            Effect::PatchStatus { .. } | Effect::RemoveFinalizer { .. }
        );
        let bound = if finishing {
            FINISH_TIMEOUT
        } else {
            remaining(attempt.deadline())
        };
        tracing::debug!(effect = ?last.kind(), "executing");
        let executed =
            tokio::time::timeout(bound, execute(rt, key, &last, &mut secrets, known.as_ref()));
        let ((), executed) = futures::join!(fired, executed);
        let result = match executed {
            Ok(r) => r,
            Err(_) => timed_out(&last),
        };
        rt.health.progress();
        let input = Input::new(Timestamp::now(), result);
        trace.input(&input);
        batch = attempt.step(input)?;
        trace.effects(&batch);
    }
}

fn remaining(deadline: Timestamp) -> Duration {
    let left = deadline.as_millisecond() - Timestamp::now().as_millisecond();
    Duration::from_millis(left.max(0) as u64)
}

/// The longest requeue the driver schedules: the CRD refuses an `interval` over 24h, and
/// a longer one (an old object, a CRD without the rule) must not overflow a timer.
pub const MAX_REQUEUE: Duration = Duration::from_secs(24 * 3600);

/// ±5 % on success requeues only (SPEC §5), clamped to [`MAX_REQUEUE`].
fn jitter(outcome: Outcome, d: Duration) -> Duration {
    jitter_with(outcome, d, fastrand::f64())
}

/// [`jitter`] with the random draw `r` in `[0, 1)` given. Never panics: any `d` and any
/// `r` (NaN, infinite, negative) give a duration of at most [`MAX_REQUEUE`].
pub fn jitter_with(outcome: Outcome, d: Duration, r: f64) -> Duration {
    let d = d.min(MAX_REQUEUE);
    if outcome.is_failure() {
        return d;
    }
    let r = if r.is_finite() {
        r.clamp(0.0, 1.0)
    } else {
        0.5
    };
    Duration::try_from_secs_f64(d.as_secs_f64() * (0.95 + r * 0.1))
        .unwrap_or(d)
        .min(MAX_REQUEUE)
}

/// Per release: the count of consecutive failed attempts not yet persisted because their
/// status write (or finalizer patch) failed. Without it every such attempt computes the
/// backoff from the same stale persisted counter, so a write that keeps failing retried
/// every 5s forever, each time re-running the dry-runs. The core still decides the delay
/// (`compute_backoff` of the counter it sees); this only feeds it the true count.
#[derive(Default)]
pub struct Unpersisted {
    counts: std::sync::Mutex<std::collections::HashMap<ReleaseKey, i64>>,
}

impl Unpersisted {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<ReleaseKey, i64>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Raises the observed `failureCounters.reconcile` to the count kept in memory.
    pub fn overlay(&self, key: &ReleaseKey, obj: &mut ReleaseObject) {
        let Some(n) = self.lock().get(key).copied() else {
            return;
        };
        let status = match obj {
            ReleaseObject::ModuleRelease(o) => o.status.get_or_insert_with(Default::default),
            ReleaseObject::Release(o) => o.status.get_or_insert_with(Default::default),
        };
        let c = &mut status.failure_counters.reconcile;
        *c = (*c).max(n);
    }

    /// After an attempt that saw `counted` failures: one that could not write its status
    /// adds one in memory; any other exit wrote (or needed no write) and clears it.
    pub fn record(&self, key: &ReleaseKey, reason: &str, counted: i64, gone: bool) {
        use opm_core::outcome::reasons;
        let mut counts = self.lock();
        if !gone && (reason == reasons::STATUS_PATCH_FAILED || reason == reasons::FINALIZER_FAILED)
        {
            counts.insert(key.clone(), counted.saturating_add(1));
        } else {
            counts.remove(key);
        }
    }

    /// The count kept for `key`, if any.
    pub fn get(&self, key: &ReleaseKey) -> Option<i64> {
        self.lock().get(key).copied()
    }
}

async fn fire_and_forget(
    rt: &Runtime,
    key: &ReleaseKey,
    regarding: Option<&ObjectReference>,
    effect: &Effect,
) {
    match effect {
        Effect::EmitEvent { event } => {
            if let Some(r) = regarding {
                rt.events.publish(event, r).await;
            }
        }
        Effect::RecordMetric { metric } => rt.metrics.record(key, metric),
        other => tracing::warn!(effect = ?other.kind(), "unexpected effect before the last"),
    }
}

/// Executes one awaited effect and wraps its result as the answering input.
async fn execute(
    rt: &Runtime,
    key: &ReleaseKey,
    effect: &Effect,
    secrets: &mut SecretTable,
    known: Option<&ObjectMeta>,
) -> InputKind {
    let operator = rt.clients.operator();
    match effect {
        Effect::AddFinalizer { finalizer } => InputKind::FinalizerAdded {
            result: wrote(
                rt,
                key,
                finalizer::add(operator, key, finalizer, known).await,
            ),
        },
        Effect::RemoveFinalizer { finalizer } => InputKind::FinalizerRemoved {
            result: wrote(
                rt,
                key,
                finalizer::remove(operator, key, finalizer, None).await,
            ),
        },
        Effect::CheckDependencies { namespace, refs } => InputKind::DependenciesChecked {
            result: deps::check(operator, namespace, refs).await,
        },
        Effect::ResolveSource { source: src } => InputKind::SourceResolved {
            result: match rt
                .observed
                .source(&src.api_version, &src.kind, &src.namespace, &src.name)
            {
                Some(watched) => source::artifact_of(&watched.data),
                None => source::resolve(operator, src).await,
            },
        },
        Effect::FetchArtifact { url, digest, .. } => InputKind::ArtifactFetched {
            result: rt
                .local
                .fetch(url, digest)
                .await
                .map(|(fetched, observed)| {
                    rt.metrics.record_fetch(key, observed);
                    fetched
                }),
        },
        Effect::Render { request } => {
            let started = std::time::Instant::now();
            // SPEC §27: `cue` sees the real Secret strings behind the digests in the values,
            // and the credentials behind their digest; the core and the trace never do.
            let request = secrets.restore_request(request);
            let credentials = match &request {
                opm_core::effect::RenderRequest::Module {
                    credentials: Some(d),
                    ..
                } => secrets.credentials(d).map(|b| (d.clone(), b.to_vec())),
                _ => None,
            };
            let rendered = {
                let _turn = rt.render_gate.acquire(&key.namespace).await;
                rt.local.render_with(&request, credentials).await
            };
            rt.metrics.record_render(key, started.elapsed());
            let result = match rendered {
                Ok((mut value, bytes)) => {
                    secrets.redact_render(&mut value);
                    secrets.redact_render_strings(&mut value);
                    let cluster_scoped = rt.resolver.cluster_scoped(&flatten(&value)).await;
                    Ok(RenderOutput {
                        value,
                        cluster_scoped,
                        bytes,
                    })
                }
                Err(e) => Err(secrets.scrub_render_error(e)),
            };
            InputKind::Rendered { result }
        }
        Effect::CheckServiceAccount { namespace, name } => InputKind::ServiceAccountChecked {
            result: service_account::exists(operator, namespace, name).await,
        },
        Effect::CheckDrift {
            objects,
            field_manager,
            identity,
        } => {
            let report = match rt.clients.for_identity(identity.as_ref()) {
                Ok(client) => {
                    let ctx = drift::DriftCtx {
                        client,
                        resolver: &rt.resolver,
                        secrets,
                        live: &rt.live,
                        watch: &rt.watch,
                        stats: &rt.drift_stats,
                        field_manager,
                        identity: identity_name(identity.as_ref()),
                    };
                    drift::check(&ctx, objects).await
                }
                Err(e) => DriftReport {
                    drifted: Vec::new(),
                    errors: objects
                        .iter()
                        .map(|o| ObjectResult {
                            id: o.id.clone(),
                            result: Err(e.clone()),
                        })
                        .collect(),
                    details: Vec::new(),
                },
            };
            let mut report = report;
            for o in &mut report.errors {
                if let Err(e) = &mut o.result {
                    secrets.scrub_api_error(e);
                }
            }
            InputKind::DriftChecked { report }
        }
        Effect::Apply {
            stages,
            field_manager,
            force,
            identity,
        } => {
            let report = match rt.clients.for_identity(identity.as_ref()) {
                Ok(client) => {
                    let ctx = ApplyCtx {
                        client,
                        operator,
                        resolver: &rt.resolver,
                        secrets,
                        field_manager,
                        force: *force,
                        live: &rt.live,
                        watch: &rt.watch,
                        identity: identity_name(identity.as_ref()),
                    };
                    apply::apply(&ctx, stages).await
                }
                Err(e) => failed_apply(stages, e),
            };
            let mut report = report;
            // SPEC §23: an API error may echo a Secret value.
            for o in &mut report.objects {
                if let Err(e) = &mut o.result {
                    secrets.scrub_api_error(e);
                }
            }
            InputKind::Applied { report }
        }
        Effect::InspectOwners { targets, identity } => {
            let objects = match rt.clients.for_identity(identity.as_ref()) {
                Ok(client) => owners::inspect(client, &rt.resolver, &rt.watch, targets).await,
                Err(e) => targets
                    .iter()
                    .map(|id| LiveObject {
                        id: id.clone(),
                        result: Err(e.clone()),
                    })
                    .collect(),
            };
            InputKind::OwnersInspected { objects }
        }
        Effect::AssessHealth { targets, identity } => {
            let objects = match rt.clients.for_identity(identity.as_ref()) {
                Ok(client) => {
                    crate::health_read::read(
                        client,
                        &rt.resolver,
                        &rt.watch,
                        &rt.health_reads,
                        targets,
                    )
                    .await
                }
                Err(e) => targets
                    .iter()
                    .map(|t| opm_core::input::HealthObject {
                        id: t.id.clone(),
                        result: Err(e.clone()),
                        pods: Vec::new(),
                    })
                    .collect(),
            };
            InputKind::HealthRead { objects }
        }
        Effect::InspectStale { targets, identity } => {
            let objects = match rt.clients.for_identity(identity.as_ref()) {
                Ok(client) => prune::inspect(client, &rt.resolver, targets).await,
                Err(e) => targets
                    .iter()
                    .map(|id| LiveObject {
                        id: id.clone(),
                        result: Err(e.clone()),
                    })
                    .collect(),
            };
            InputKind::StaleInspected { objects }
        }
        Effect::Prune {
            deletions,
            identity,
        } => {
            let results = match rt.clients.for_identity(identity.as_ref()) {
                Ok(client) => prune::delete(client, &rt.resolver, deletions).await,
                Err(e) => deletions
                    .iter()
                    .map(|d| ObjectResult {
                        id: d.id.clone(),
                        result: Err(e.clone()),
                    })
                    .collect(),
            };
            InputKind::Pruned { results }
        }
        Effect::AwaitTermination {
            targets,
            identity,
            until,
        } => match rt.clients.for_identity(identity.as_ref()) {
            Ok(client) => {
                let bound = remaining(*until).saturating_sub(crate::termination::MARGIN);
                let (remaining, error) =
                    crate::termination::await_gone(client, &rt.resolver, targets, bound).await;
                InputKind::TerminationAwaited { remaining, error }
            }
            Err(e) => InputKind::TerminationAwaited {
                remaining: targets.iter().map(|d| d.id.clone()).collect(),
                error: Some(e),
            },
        },
        Effect::PatchStatus { patch, status } => {
            let result = wrote(rt, key, status::patch(operator, key, patch).await);
            if result.is_ok() {
                rt.metrics.observe_status(key, status);
            }
            InputKind::StatusPatched { result }
        }
        Effect::ReadValues {
            namespace,
            refs,
            credentials,
            identity,
        } => {
            let mut read = crate::values_from::read(
                rt.clients.for_identity(identity.as_ref()),
                namespace,
                refs,
                credentials.as_deref(),
                secrets,
            )
            .await;
            if let InputKind::ValuesRead {
                values,
                credentials,
            } = &mut read
            {
                for e in values
                    .iter_mut()
                    .filter_map(|r| r.as_mut().err())
                    .chain(credentials.iter_mut().filter_map(|r| r.as_mut().err()))
                {
                    secrets.scrub_api_error(e);
                }
            }
            read
        }
        Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. } => {
            unreachable!("fire-and-forget and Done effects are never executed as awaited")
        }
    }
}

/// The user requests are sent as: the impersonated one, or empty for the operator's own.
fn identity_name(identity: Option<&opm_core::effect::Impersonation>) -> &str {
    identity.map_or("", |i| i.user.as_str())
}

/// Records the release version one of our writes produced (see [`Observed`]).
fn wrote(
    rt: &Runtime,
    key: &ReleaseKey,
    result: Result<Option<String>, ApiError>,
) -> Result<(), ApiError> {
    match &result {
        Ok(Some(rv)) => rt.observed.wrote(key, Some(rv)),
        // Nothing was written.
        Ok(None) => {}
        // The write may have landed: the next attempt reads the release.
        Err(_) => rt.observed.wrote(key, None),
    }
    result.map(|_| ())
}

/// The objects under `components.<c>.<key>` of an exported render (borrowed: a render at
/// the caps is not copied for the scope lookup).
/// Public for `kubectl opm diff`, which asks discovery the same question.
pub fn flatten(exported: &Value) -> Vec<&Value> {
    exported
        .get("components")
        .and_then(Value::as_object)
        .map(|cs| {
            cs.values()
                .filter_map(Value::as_object)
                .flat_map(|objs| objs.values())
                .collect()
        })
        .unwrap_or_default()
}

fn failed_apply(stages: &[opm_core::effect::ApplyStage], e: ApiError) -> ApplyReport {
    ApplyReport {
        objects: stages
            .first()
            .map(|s| {
                s.objects
                    .iter()
                    .map(|o| AppliedObject {
                        id: o.id.clone(),
                        result: Err(e.clone()),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The answer to an effect that overran its bound: that effect's `Timeout` error.
fn timed_out(effect: &Effect) -> InputKind {
    let t = || ApiError::Timeout {
        message: format!("{:?} exceeded the attempt deadline", effect.kind()),
    };
    match effect {
        Effect::AddFinalizer { .. } => InputKind::FinalizerAdded { result: Err(t()) },
        Effect::RemoveFinalizer { .. } => InputKind::FinalizerRemoved { result: Err(t()) },
        Effect::CheckDependencies { .. } => InputKind::DependenciesChecked { result: Err(t()) },
        Effect::ResolveSource { .. } => InputKind::SourceResolved {
            result: Err(SourceError::Api { error: t() }),
        },
        Effect::FetchArtifact { .. } => InputKind::ArtifactFetched {
            result: Err(FetchError::Timeout),
        },
        Effect::Render { .. } => InputKind::Rendered {
            result: Err(RenderError::Timeout {
                message: "render exceeded the attempt deadline".into(),
            }),
        },
        Effect::CheckServiceAccount { .. } => InputKind::ServiceAccountChecked { result: Err(t()) },
        Effect::CheckDrift { objects, .. } => InputKind::DriftChecked {
            report: DriftReport {
                drifted: Vec::new(),
                errors: objects
                    .iter()
                    .map(|o| ObjectResult {
                        id: o.id.clone(),
                        result: Err(t()),
                    })
                    .collect(),
                details: Vec::new(),
            },
        },
        Effect::Apply { stages, .. } => InputKind::Applied {
            report: failed_apply(stages, t()),
        },
        Effect::InspectOwners { targets, .. } => InputKind::OwnersInspected {
            objects: targets
                .iter()
                .map(|id| LiveObject {
                    id: id.clone(),
                    result: Err(t()),
                })
                .collect(),
        },
        Effect::InspectStale { targets, .. } => InputKind::StaleInspected {
            objects: targets
                .iter()
                .map(|id| LiveObject {
                    id: id.clone(),
                    result: Err(t()),
                })
                .collect(),
        },
        Effect::Prune { deletions, .. } => InputKind::Pruned {
            results: deletions
                .iter()
                .map(|d| ObjectResult {
                    id: d.id.clone(),
                    result: Err(t()),
                })
                .collect(),
        },
        Effect::PatchStatus { .. } => InputKind::StatusPatched { result: Err(t()) },
        Effect::AssessHealth { targets, .. } => InputKind::HealthRead {
            objects: targets
                .iter()
                .map(|t_| opm_core::input::HealthObject {
                    id: t_.id.clone(),
                    result: Err(t()),
                    pods: Vec::new(),
                })
                .collect(),
        },
        Effect::ReadValues {
            refs, credentials, ..
        } => InputKind::ValuesRead {
            values: refs.iter().map(|_| Err(t())).collect(),
            credentials: credentials.as_ref().map(|_| Err(t())),
        },
        // The deadline is the bound SPEC §12 sets: what was still there is reported.
        Effect::AwaitTermination { targets, .. } => InputKind::TerminationAwaited {
            remaining: targets.iter().map(|d| d.id.clone()).collect(),
            error: None,
        },
        Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. } => {
            unreachable!("only awaited effects are bounded")
        }
    }
}

/// The attempt's trace, appended to the `--trace-dir` sink when set.
struct Trace<'a> {
    recorder: Option<Recorder>,
    sink: Option<&'a crate::trace_sink::TraceSink>,
}

impl<'a> Trace<'a> {
    fn new(rt: &'a Runtime, key: &ReleaseKey, id: u64) -> Self {
        match &rt.traces {
            Some(sink) => Self {
                recorder: Some(Recorder::new(
                    &TraceHeader::new(&rt.config, key.clone()).with_attempt(id),
                )),
                sink: Some(sink),
            },
            None => Self {
                recorder: None,
                sink: None,
            },
        }
    }

    fn input(&mut self, input: &Input) {
        if let Some(r) = &mut self.recorder {
            r.input(input);
        }
    }

    fn effects(&mut self, batch: &[Effect]) {
        if let Some(r) = &mut self.recorder {
            r.effects(batch);
        }
    }

    fn write(&self) {
        if let (Some(r), Some(sink)) = (&self.recorder, self.sink)
            && let Err(e) = sink.write_attempt(&r.to_jsonl())
        {
            tracing::warn!(error = %e, "writing the trace failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_never_panics_and_is_clamped() {
        let huge = Duration::from_secs(5_124_095_576_030_431 * 3600);
        for d in [
            Duration::ZERO,
            Duration::from_secs(300),
            huge,
            Duration::MAX,
        ] {
            for r in [0.0, 0.5, 0.999_999, 1.0, -1.0, 2.0, f64::NAN, f64::INFINITY] {
                for outcome in [Outcome::Applied, Outcome::NoOp, Outcome::FailedTransient] {
                    assert!(jitter_with(outcome, d, r) <= MAX_REQUEUE, "{d:?} {r}");
                }
            }
        }
        assert_eq!(
            jitter_with(Outcome::Applied, Duration::MAX, 0.5),
            MAX_REQUEUE,
            "5124095576030431h is clamped to 24h"
        );
    }

    #[test]
    fn jitter_is_five_percent_on_successes_only() {
        let d = Duration::from_secs(100);
        assert_eq!(
            jitter_with(Outcome::Applied, d, 0.0),
            Duration::from_secs(95)
        );
        assert_eq!(jitter_with(Outcome::NoOp, d, 1.0), Duration::from_secs(105));
        assert_eq!(jitter_with(Outcome::FailedTransient, d, 0.0), d);
        assert_eq!(
            jitter_with(Outcome::FailedStalled, Duration::MAX, 0.0),
            MAX_REQUEUE
        );
    }

    fn key() -> ReleaseKey {
        ReleaseKey {
            kind: opm_core::Kind::ModuleRelease,
            namespace: "a".into(),
            name: "web".into(),
        }
    }

    #[test]
    fn unpersisted_failures_count_up_until_a_write_lands() {
        use opm_core::outcome::reasons;
        let u = Unpersisted::default();
        let k = key();
        let mut obj: ReleaseObject = serde_json::from_value(serde_json::json!({
            "moduleRelease": {
                "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
                "metadata": {"name": "web", "namespace": "a"},
                "spec": {"module": {"path": "example.com/m@v0", "version": "v0.1.0"}}
            }
        }))
        .unwrap();
        u.overlay(&k, &mut obj);
        assert!(
            obj.status().is_none(),
            "nothing kept: the object is untouched"
        );
        for n in 0..4 {
            u.record(&k, reasons::STATUS_PATCH_FAILED, n, false);
            assert_eq!(u.get(&k), Some(n + 1));
        }
        u.overlay(&k, &mut obj);
        assert_eq!(obj.status().unwrap().failure_counters.reconcile, 4);
        // The backoff the core computes from it grows: 5s · 2^3.
        assert_eq!(
            opm_core::backoff::compute_backoff(4 + 1),
            Duration::from_secs(80)
        );
        u.record(&k, reasons::SUCCEEDED, 4, false);
        assert_eq!(u.get(&k), None);
        u.record(&k, reasons::STATUS_PATCH_FAILED, i64::MAX, false);
        assert_eq!(u.get(&k), Some(i64::MAX));
        u.record(&k, reasons::STATUS_PATCH_FAILED, 3, true);
        assert_eq!(u.get(&k), None, "a gone release keeps nothing");
    }
}
