//! The attempt state machine: the only place SPEC §3's order lives.
//!
//! `Attempt` holds a private `Phase` (what it is waiting for) and the facts gathered so far.
//! Each input is checked against the phase, then consumed in one `match (phase, input)`.

use std::time::Duration;

use jiff::Timestamp;

use crate::config::Config;
use crate::effect::{Effect, Metric};
use crate::health::EvalDeadline;
use crate::input::{Input, InputError, InputKind, InputName};
use crate::object::ReleaseKey;
use crate::outcome::Outcome;
use crate::reason::Reason;

mod apply;
mod cluster;
mod ctx;
mod deleting;
mod exit;
mod flow;
mod health_read;
mod health_wait;
mod hook_verdicts;
mod hooks;
mod hooks_read;
mod suspend;
mod values;

use ctx::Ctx;

/// One reconcile attempt of one release.
///
/// **Feed one input, execute the whole batch it returns, then feed the result of that batch's
/// awaited effect, and nothing else, until a batch ends in `Done`.**
///
/// Start with [`Attempt::start`] (an `Observed` input), continue with [`Attempt::step`], bound
/// every awaited effect by [`Attempt::bound`]. After `Done` the attempt refuses input; the
/// next `Observed` starts a new one.
#[derive(Debug, Clone)]
pub struct Attempt {
    cfg: Config,
    phase: Phase,
    start: Timestamp,
    now: Timestamp,
    deadline: Timestamp,
    ctx: Ctx,
    out: Vec<Effect>,
    /// Raised by the interpreter when this attempt's CEL time is up (SPEC §24).
    eval_deadline: EvalDeadline,
}

/// What the attempt waits for. Consumed by value on every input.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    AddingFinalizer,
    CheckingDependencies {
        refs: Vec<ReleaseKey>,
        objects: Vec<crate::deps::ObjectDependency>,
    },
    ResolvingSource,
    FetchingArtifact,
    Rendering,
    CheckingServiceAccount,
    CheckingDrift,
    InspectingOwners,
    Applying,
    InspectingStale,
    Pruning,
    PatchingStatus {
        after: After,
    },
    RemovingFinalizer,
    Finished,
    /// Reading objects for their health; `applied` is the outcome of this attempt's apply
    /// (none on the NoOp path), `pods_read` whether the second read (pods) was made.
    AssessingHealth {
        applied: Option<Outcome>,
        pods_read: bool,
    },
    /// The ServiceAccount check that precedes reading `valuesFrom` (SPEC §27).
    CheckingServiceAccountForValues,
    ReadingValues,
    /// `deletionPolicy: WaitForTermination`: the deleted objects must be gone first.
    AwaitingTermination,
    /// The remote cluster's kubeconfig (SPEC §31), before `next`.
    ReadingKubeConfig {
        next: cluster::ClusterNext,
    },
    /// A deletion that would delete objects first looks for releases that depend on this
    /// one (SPEC §32); `plan` is what it does once none blocks.
    ListingDependents {
        plan: crate::deletion::Plan,
    },
    /// Running the hooks of a phase (SPEC §32).
    Hooks {
        run: hooks::HookRun,
    },
}

/// What follows a successful status patch.
#[derive(Debug, Clone, PartialEq)]
enum After {
    Done(DoneInfo),
    RemoveFinalizer,
}

/// The terminal batch: metrics, then `Done`.
#[derive(Debug, Clone, PartialEq)]
struct DoneInfo {
    outcome: Outcome,
    reason: Reason,
    requeue: Option<Duration>,
    metrics: Vec<Metric>,
}

impl Phase {
    /// The input that answers this phase; `None` once finished.
    fn awaits(&self) -> Option<InputName> {
        Some(match self {
            Phase::AddingFinalizer => InputName::FinalizerAdded,
            Phase::CheckingDependencies { .. } => InputName::DependenciesChecked,
            Phase::ResolvingSource => InputName::SourceResolved,
            Phase::FetchingArtifact => InputName::ArtifactFetched,
            Phase::Rendering => InputName::Rendered,
            Phase::CheckingServiceAccount => InputName::ServiceAccountChecked,
            Phase::CheckingDrift => InputName::DriftChecked,
            Phase::InspectingOwners => InputName::OwnersInspected,
            Phase::Applying => InputName::Applied,
            Phase::InspectingStale => InputName::StaleInspected,
            Phase::Pruning => InputName::Pruned,
            Phase::PatchingStatus { .. } => InputName::StatusPatched,
            Phase::RemovingFinalizer => InputName::FinalizerRemoved,
            Phase::AssessingHealth { .. } => InputName::HealthRead,
            Phase::AwaitingTermination => InputName::TerminationAwaited,
            Phase::ListingDependents { .. } => InputName::DependentsListed,
            Phase::Hooks { run } => run.step.awaits(),
            Phase::Finished => return None,
            Phase::CheckingServiceAccountForValues => InputName::ServiceAccountChecked,
            Phase::ReadingValues => InputName::ValuesRead,
            Phase::ReadingKubeConfig { .. } => InputName::KubeConfigRead,
        })
    }

    /// Finishing phases are never cut short by the deadline. Nor is the termination wait:
    /// it is bounded by the deadline itself and its answer names what is left (SPEC §12).
    fn can_time_out(&self) -> bool {
        !matches!(
            self,
            Phase::PatchingStatus { .. }
                | Phase::RemovingFinalizer
                | Phase::Finished
                | Phase::AwaitingTermination
        )
    }
}

/// The bound of a finishing effect (status patch, finalizer removal): the deadline never
/// cuts them short, but a hung API call must still end so the release is retried.
pub const FINISH_BOUND: Duration = Duration::from_secs(30);

/// `ts + d`, saturating at the end of time.
pub(crate) fn add(ts: Timestamp, d: Duration) -> Timestamp {
    ts.saturating_add(d).unwrap_or(Timestamp::MAX)
}

impl Attempt {
    /// Starts an attempt from an `Observed` input and returns the first batch. Any other
    /// input gives a finished attempt whose batch is a lone `Done` (reason `InvalidInput`,
    /// no requeue): the caller broke the protocol and nothing was decided.
    pub fn start(cfg: &Config, input: Input) -> (Attempt, Vec<Effect>) {
        let mut a = Attempt {
            cfg: cfg.clone(),
            phase: Phase::Finished,
            start: input.now,
            now: input.now,
            deadline: input.now,
            ctx: Ctx::default(),
            out: Vec::new(),
            eval_deadline: EvalDeadline::new(cfg.health_eval_timeout),
        };
        match input.kind {
            InputKind::Observed { key, object } => a.begin(key, object),
            _ => a.out.push(Effect::Done {
                outcome: Outcome::FailedTransient,
                reason: Reason::InvalidInput,
                requeue_after: None,
            }),
        }
        let batch = std::mem::take(&mut a.out);
        debug_assert!(batch_shape_ok(&batch), "bad batch: {batch:?}");
        (a, batch)
    }

    /// Feeds the result of the awaited effect and returns the next batch. A result that does
    /// not answer the awaited effect is refused and changes nothing.
    #[must_use = "the returned effects must be executed"]
    pub fn step(&mut self, input: Input) -> Result<Vec<Effect>, InputError> {
        let expected = self.phase.awaits().ok_or(InputError::Finished)?;
        let got = input.kind.kind();
        if got != expected {
            return Err(InputError::Unexpected { expected, got });
        }
        // Time never runs backwards inside an attempt.
        self.now = self.now.max(input.now);
        let phase = std::mem::replace(&mut self.phase, Phase::Finished);
        if self.now >= self.deadline && phase.can_time_out() {
            self.timed_out();
        } else if let (Some(cluster), Some(e)) =
            (self.ctx.cluster.as_ref(), input.kind.unreachable())
        {
            // SPEC §31: a remote cluster that does not answer is transient, whatever asked.
            let f = crate::remote::unreachable(cluster, e);
            self.fail(f);
        } else {
            self.dispatch(phase, input.kind);
        }
        let batch = std::mem::take(&mut self.out);
        debug_assert!(batch_shape_ok(&batch), "bad batch: {batch:?}");
        Ok(batch)
    }

    /// The instant after which any input ends the attempt as `ReconcileTimeout`
    /// (start + `spec.timeout`). The interpreter bounds each awaited effect by it.
    pub fn deadline(&self) -> Timestamp {
        self.deadline
    }

    /// Time left before the deadline at `now` (zero once passed): the bound for the awaited
    /// effect the interpreter is about to run.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        Duration::try_from(self.deadline.duration_since(now)).unwrap_or(Duration::ZERO)
    }

    /// How long the interpreter may run the awaited `effect`, started at `now`, before it
    /// answers with that effect's timeout. Finishing effects get [`FINISH_BOUND`] whatever
    /// the deadline (they are never cut short once the deadline passes); the termination
    /// wait runs until its own `until`; every other effect gets what is left before the
    /// deadline.
    pub fn bound(&self, now: Timestamp, effect: &Effect) -> Duration {
        match effect {
            Effect::PatchStatus { .. } | Effect::RemoveFinalizer { .. } => FINISH_BOUND,
            Effect::AwaitTermination { until, .. } => {
                Duration::try_from(until.duration_since(now)).unwrap_or(Duration::ZERO)
            }
            _ => self.remaining(now),
        }
    }

    /// The flag that stops this attempt's `healthCheckExprs` evaluations: the interpreter
    /// runs the step that judges health on a blocking thread and raises it once the
    /// attempt's evaluations have taken `--health-eval-timeout` (SPEC §24).
    pub fn eval_deadline(&self) -> EvalDeadline {
        self.eval_deadline.clone()
    }

    /// True once the attempt has produced `Done`.
    pub fn is_finished(&self) -> bool {
        self.phase == Phase::Finished
    }

    /// Whether `input` answers the awaited effect (cheap routing, no mutation).
    pub fn accepts(&self, input: &Input) -> bool {
        self.phase.awaits() == Some(input.kind.kind())
    }

    fn dispatch(&mut self, phase: Phase, input: InputKind) {
        use InputKind as I;
        match (phase, input) {
            (Phase::AddingFinalizer, I::FinalizerAdded { result }) => {
                self.on_finalizer_added(result)
            }
            (Phase::CheckingDependencies { refs, objects }, I::DependenciesChecked { result }) => {
                self.on_dependencies(refs, objects, result)
            }
            (Phase::ResolvingSource, I::SourceResolved { result }) => self.on_source(result),
            (Phase::FetchingArtifact, I::ArtifactFetched { result }) => self.on_fetch(result),
            (Phase::Rendering, I::Rendered { result }) => self.on_render(result),
            (Phase::CheckingServiceAccount, I::ServiceAccountChecked { result }) => {
                if self.ctx.deleting {
                    self.on_deletion_service_account(result)
                } else {
                    self.on_service_account(result)
                }
            }
            (Phase::CheckingDrift, I::DriftChecked { report }) => self.on_drift(report),
            (Phase::InspectingOwners, I::OwnersInspected { objects }) => self.on_owners(objects),
            (Phase::Applying, I::Applied { report }) => self.on_apply(report),
            (Phase::InspectingStale, I::StaleInspected { objects }) => self.on_inspect(objects),
            (Phase::Pruning, I::Pruned { results }) => self.on_prune(results),
            (Phase::PatchingStatus { after }, I::StatusPatched { result }) => {
                self.on_status_patched(after, result)
            }
            (Phase::RemovingFinalizer, I::FinalizerRemoved { result }) => {
                self.on_finalizer_removed(result)
            }
            (Phase::AssessingHealth { applied, pods_read }, I::HealthRead { objects }) => {
                self.on_health(applied, pods_read, objects)
            }
            (Phase::CheckingServiceAccountForValues, I::ServiceAccountChecked { result }) => {
                self.on_values_service_account(result)
            }
            (
                Phase::ReadingValues,
                I::ValuesRead {
                    values,
                    credentials,
                },
            ) => self.on_values(values, credentials),
            (Phase::AwaitingTermination, I::TerminationAwaited { remaining, error }) => {
                self.on_terminated(remaining, error)
            }
            (Phase::ReadingKubeConfig { next }, I::KubeConfigRead { result }) => {
                self.on_kube_config(next, result)
            }
            (Phase::ListingDependents { plan }, I::DependentsListed { result }) => {
                self.on_dependents(plan, result)
            }
            (Phase::Hooks { run }, I::HealthRead { objects }) => self.on_hooks_read(run, objects),
            (Phase::Hooks { run }, I::Pruned { results }) => self.on_hooks_written(run, results),
            (Phase::Hooks { run }, I::Applied { report }) => self.on_hooks_applied(run, report),
            // `step` matched the input name against the phase, so this arm is never taken;
            // restoring the phase keeps the machine usable if that check ever changes.
            (phase, _) => self.phase = phase,
        }
    }

    fn timed_out(&mut self) {
        self.fail(crate::exits::timeout(self.ctx.timeout));
    }

    fn elapsed(&self) -> Duration {
        Duration::try_from(self.now.duration_since(self.start)).unwrap_or(Duration::ZERO)
    }
}

/// Zero or more fire-and-forget effects, then exactly one awaited effect or `Done`, last.
pub fn batch_shape_ok(batch: &[Effect]) -> bool {
    match batch.split_last() {
        None => false,
        Some((last, rest)) => {
            (last.is_awaited() || matches!(last, Effect::Done { .. }))
                && rest
                    .iter()
                    .all(|e| !e.is_awaited() && !matches!(e, Effect::Done { .. }))
        }
    }
}
