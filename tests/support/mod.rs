//! A small driver for scenario tests: a release fixture, canned effect results (happy by
//! default, overridable per effect), and a loop that feeds the machine until `Done`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use opm_core::api::{
    Condition, ModuleRef, ModuleRelease, ModuleReleaseSpec, Release, ReleaseSpec, ReleaseStatus,
    SourceRef,
};
use opm_core::effect::{Effect, EffectKind, Event, EventType, Metric};
use opm_core::input::{
    ApiError, AppliedObject, ApplyAction, ApplyReport, DependencyReport, DriftReport, FetchError,
    FetchedArtifact, LiveMeta, LiveObject, ObjectResult, RenderError, RenderOutput, SourceArtifact,
    SourceError,
};
use opm_core::trace::{Recorder, TraceHeader, replay};
use opm_core::{Attempt, Config, Input, InputKind, Outcome, ReleaseObject};
use serde_json::{Value, json};

pub const FINALIZER: &str = "releases.opmodel.dev/cleanup";

pub fn t0() -> Timestamp {
    "2026-03-01T10:00:00Z".parse().unwrap()
}

pub fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("demo".into()),
        generation: Some(1),
        uid: Some(format!("uid-{name}")),
        finalizers: Some(vec![FINALIZER.into()]),
        ..Default::default()
    }
}

/// A ModuleRelease `demo/web` of `example.com/modules/web@v0` v0.2.1 with our finalizer.
pub fn module_release() -> ModuleRelease {
    ModuleRelease {
        metadata: meta("web"),
        spec: ModuleReleaseSpec {
            module: ModuleRef {
                path: "example.com/modules/web@v0".into(),
                version: "v0.2.1".into(),
                secret_ref: None,
            },
            values: Some(json!({"replicas": 2})),
            values_from: Vec::new(),
            common: Default::default(),
        },
        status: None,
    }
}

/// A Release `demo/app` from OCIRepository `demo/repo`, path `./app`, with our finalizer.
pub fn release() -> Release {
    Release {
        metadata: meta("app"),
        spec: ReleaseSpec {
            source_ref: SourceRef {
                api_version: String::new(),
                kind: "OCIRepository".into(),
                name: "repo".into(),
                namespace: String::new(),
            },
            path: "./app".into(),
            common: Default::default(),
        },
        status: None,
    }
}

pub const ARTIFACT_DIGEST: &str =
    "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// The exported value of the example module: a Deployment, a Service and a ConfigMap.
pub fn exported(extra: Value) -> Value {
    let mut components = json!({
        "web": {
            "deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 2}},
            "service": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}
        },
        "config": {
            "cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config"}, "data": {"message": "hello"}}
        }
    });
    if let (Some(c), Some(e)) = (components.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            c.insert(k.clone(), v.clone());
        }
    }
    json!({"kind": "ModuleRelease", "metadata": {"name": "web", "namespace": "demo"}, "components": components})
}

/// Canned results for each awaited effect.
#[derive(Clone, Debug)]
pub struct Canned {
    pub finalizer_added: Result<(), ApiError>,
    pub finalizer_removed: Result<(), ApiError>,
    pub deps: Result<DependencyReport, ApiError>,
    /// The releases with a `dependsOn` a deleting release sees (SPEC §32); default: none.
    pub dependents: Result<DependencyReport, ApiError>,
    pub source: Result<SourceArtifact, SourceError>,
    pub fetch: Option<Result<FetchedArtifact, FetchError>>,
    pub render: Result<RenderOutput, RenderError>,
    pub sa_exists: Result<bool, ApiError>,
    pub drift: DriftReport,
    pub apply_action: ApplyAction,
    /// Apply failures by object name.
    pub apply_errors: BTreeMap<String, ApiError>,
    /// Live state by object name; default: present, ours.
    pub live: BTreeMap<String, Result<Option<LiveMeta>, ApiError>>,
    pub prune_errors: BTreeMap<String, ApiError>,
    /// Answers to the ownership read before a first write, by object name; default: absent.
    pub owners: BTreeMap<String, Result<Option<LiveMeta>, ApiError>>,
    pub patch: Result<(), ApiError>,
    /// Time each awaited effect takes.
    pub latency: Duration,
    /// Extra time taken by one effect kind.
    pub slow: Option<(EffectKind, Duration)>,
    /// Deleted objects (by name) still there when a termination wait ends.
    pub still_terminating: Vec<String>,
    /// `valuesFrom` contents by object name; default: the object is missing.
    pub values: BTreeMap<String, Result<opm_core::values_from::ValuesContent, ApiError>>,
    /// The `module.secretRef` read.
    pub credentials: Result<opm_core::values_from::CredentialsContent, ApiError>,
    /// Health reads by `Kind/name` or object name; default: the object as its controller reports it once
    /// rolled out ([`rolled_out`]).
    pub health: BTreeMap<String, Result<Option<Value>, ApiError>>,
    /// Pods listed for a workload, by its name.
    pub pods: BTreeMap<String, Vec<Value>>,
    /// The kubeconfig Secret's read (SPEC §31); default: missing.
    pub kube_config: Result<opm_core::remote::KubeConfigFacts, opm_core::remote::KubeConfigError>,
}

/// A canned live object with the status its controller writes once it has rolled out.
pub fn rolled_out(id: &opm_core::ResourceId) -> Value {
    let status = match id.kind.as_str() {
        "Deployment" => json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
            "readyReplicas": 2, "availableReplicas": 2,
            "conditions": [{"type": "Available", "status": "True"},
                           {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}),
        "Job" => json!({"conditions": [{"type": "Complete", "status": "True"}]}),
        _ => json!({}),
    };
    json!({"apiVersion": id.api_version(), "kind": id.kind,
           "metadata": {"name": id.name, "namespace": id.namespace, "generation": 1},
           "spec": {"replicas": 2}, "status": status})
}

pub fn ours(uuid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_string(),
            "opm-controller".to_string(),
        ),
        (
            "module-release.opmodel.dev/uuid".to_string(),
            uuid.to_string(),
        ),
    ])
}

impl Default for Canned {
    fn default() -> Self {
        Canned {
            finalizer_added: Ok(()),
            finalizer_removed: Ok(()),
            deps: Ok(DependencyReport::default()),
            dependents: Ok(DependencyReport::default()),
            source: Ok(SourceArtifact {
                url: "http://127.0.0.1:9/app.tar.gz".into(),
                revision: "v1@sha256:1111".into(),
                digest: ARTIFACT_DIGEST.into(),
            }),
            fetch: None,
            render: Ok(RenderOutput {
                bytes: 0,
                value: exported(json!({})),
                cluster_scoped: vec![],
                platform: String::new(),
            }),
            sa_exists: Ok(true),
            drift: DriftReport::default(),
            apply_action: ApplyAction::Created,
            apply_errors: BTreeMap::new(),
            live: BTreeMap::new(),
            prune_errors: BTreeMap::new(),
            owners: BTreeMap::new(),
            patch: Ok(()),
            latency: Duration::from_secs(1),
            slow: None,
            health: BTreeMap::new(),
            pods: BTreeMap::new(),
            kube_config: Err(opm_core::remote::KubeConfigError::SecretNotFound),
            values: BTreeMap::new(),
            credentials: Ok(opm_core::values_from::CredentialsContent::Found {
                digest: opm_core::digest::sha256(b"{}"),
            }),
            still_terminating: Vec::new(),
        }
    }
}

impl Canned {
    fn respond(&self, effect: &Effect, uuid: &str) -> InputKind {
        match effect {
            Effect::AddFinalizer { .. } => InputKind::FinalizerAdded {
                result: self.finalizer_added.clone(),
            },
            Effect::RemoveFinalizer { .. } => InputKind::FinalizerRemoved {
                result: self.finalizer_removed.clone(),
            },
            Effect::CheckDependencies { .. } => InputKind::DependenciesChecked {
                result: self.deps.clone(),
            },
            Effect::ListDependents { .. } => InputKind::DependentsListed {
                result: self.dependents.clone(),
            },
            Effect::ResolveSource { .. } => InputKind::SourceResolved {
                result: self.source.clone(),
            },
            Effect::FetchArtifact { digest, .. } => InputKind::ArtifactFetched {
                result: self.fetch.clone().unwrap_or(Ok(FetchedArtifact {
                    digest: digest.clone(),
                    size: 1024,
                })),
            },
            Effect::Render { .. } => InputKind::Rendered {
                result: self.render.clone(),
            },
            Effect::CheckServiceAccount { .. } => InputKind::ServiceAccountChecked {
                result: self.sa_exists.clone(),
            },
            Effect::CheckDrift { .. } => InputKind::DriftChecked {
                report: self.drift.clone(),
            },
            Effect::Apply { stages, .. } => {
                let mut objects = Vec::new();
                for stage in stages {
                    let mut failed = false;
                    for o in &stage.objects {
                        let result = match self.apply_errors.get(&o.id.name) {
                            Some(e) => {
                                failed = true;
                                Err(e.clone())
                            }
                            None => Ok(self.apply_action),
                        };
                        objects.push(AppliedObject {
                            id: o.id.clone(),
                            result,
                        });
                    }
                    if failed {
                        break;
                    }
                }
                InputKind::Applied {
                    report: ApplyReport { objects },
                }
            }
            Effect::InspectOwners { targets, .. } => InputKind::OwnersInspected {
                objects: targets
                    .iter()
                    .map(|id| LiveObject {
                        id: id.clone(),
                        result: self.owners.get(&id.name).cloned().unwrap_or(Ok(None)),
                    })
                    .collect(),
            },
            Effect::InspectStale { targets, .. } => InputKind::StaleInspected {
                objects: targets
                    .iter()
                    .map(|id| LiveObject {
                        id: id.clone(),
                        result: self.live.get(&id.name).cloned().unwrap_or_else(|| {
                            Ok(Some(LiveMeta {
                                uid: format!("live-{}", id.name),
                                labels: ours(uuid),
                            }))
                        }),
                    })
                    .collect(),
            },
            Effect::Prune { deletions, .. } => InputKind::Pruned {
                results: deletions
                    .iter()
                    .map(|d| ObjectResult {
                        id: d.id.clone(),
                        result: self
                            .prune_errors
                            .get(&d.id.name)
                            .cloned()
                            .map_or(Ok(()), Err),
                    })
                    .collect(),
            },
            Effect::PatchStatus { .. } => InputKind::StatusPatched {
                result: self.patch.clone(),
            },
            Effect::AssessHealth { targets, .. } => InputKind::HealthRead {
                objects: targets
                    .iter()
                    .map(|t| opm_core::input::HealthObject {
                        id: t.id.clone(),
                        result: self
                            .health
                            .get(&format!("{}/{}", t.id.kind, t.id.name))
                            .or_else(|| self.health.get(&t.id.name))
                            .cloned()
                            .unwrap_or_else(|| Ok(Some(rolled_out(&t.id)))),
                        pods: if t.pods {
                            self.pods.get(&t.id.name).cloned().unwrap_or_default()
                        } else {
                            Vec::new()
                        },
                    })
                    .collect(),
            },
            Effect::ReadValues {
                refs, credentials, ..
            } => InputKind::ValuesRead {
                values: refs
                    .iter()
                    .map(|r| {
                        self.values
                            .get(&r.name)
                            .cloned()
                            .unwrap_or(Ok(opm_core::values_from::ValuesContent::ObjectMissing))
                    })
                    .collect(),
                credentials: credentials.as_ref().map(|_| self.credentials.clone()),
            },
            Effect::AwaitTermination { targets, .. } => InputKind::TerminationAwaited {
                remaining: targets
                    .iter()
                    .filter(|d| self.still_terminating.contains(&d.id.name))
                    .map(|d| d.id.clone())
                    .collect(),
                error: None,
            },
            Effect::ReadKubeConfig { .. } => InputKind::KubeConfigRead {
                result: self.kube_config.clone(),
            },
            other => panic!("not awaited: {other:?}"),
        }
    }
}

/// Everything observable about one attempt.
#[derive(Clone, Debug)]
pub struct Run {
    pub inputs: Vec<Input>,
    pub effects: Vec<Effect>,
    pub outcome: Outcome,
    pub reason: String,
    pub requeue: Option<Duration>,
    /// The status written (None: no status write).
    pub written: Option<ReleaseStatus>,
    /// The status after the attempt (written, or the persisted one).
    pub status: ReleaseStatus,
    pub trace: Vec<String>,
    pub finished_at: Timestamp,
}

impl Run {
    pub fn events(&self) -> Vec<Event> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::EmitEvent { event } => Some(event.clone()),
                _ => None,
            })
            .collect()
    }

    /// `(type, reason, action, note)` of each event.
    pub fn event_tuples(&self) -> Vec<(EventType, String, String, String)> {
        self.events()
            .into_iter()
            .map(|e| (e.event_type, e.reason.to_string(), e.action, e.note))
            .collect()
    }

    pub fn kinds(&self) -> Vec<EffectKind> {
        self.effects.iter().map(Effect::kind).collect()
    }

    pub fn awaited(&self) -> Vec<EffectKind> {
        self.effects
            .iter()
            .filter(|e| e.is_awaited())
            .map(Effect::kind)
            .collect()
    }

    pub fn find(&self, kind: EffectKind) -> Option<&Effect> {
        self.effects.iter().find(|e| e.kind() == kind)
    }

    pub fn metrics(&self) -> Vec<Metric> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::RecordMetric { metric } => Some(metric.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn cond(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// `(status, reason, message)` of a condition.
    pub fn cond3(&self, type_: &str) -> Option<(String, String, String)> {
        self.cond(type_)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    }

    pub fn cond_types(&self) -> Vec<String> {
        self.status
            .conditions
            .iter()
            .map(|c| c.type_.clone())
            .collect()
    }
}

pub fn time(ts: Timestamp) -> Time {
    Time(ts)
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Runs one attempt to `Done`, checking the batch shape, and replays its trace.
pub fn run(cfg: &Config, object: ReleaseObject, canned: &Canned, start: Timestamp) -> Run {
    let key = object.key();
    let uuid = opm_core::render_value::release_uuid(key.kind, &key.namespace, &key.name);
    let persisted = object.status().cloned().unwrap_or_default();
    let mut recorder = Recorder::new(&TraceHeader::new(cfg, key.clone()));
    let first = Input::new(
        start,
        InputKind::Observed {
            key,
            object: Some(Box::new(object)),
        },
    );
    recorder.input(&first);
    let mut inputs = vec![first.clone()];
    let (mut attempt, mut batch) = Attempt::start(cfg, first);
    let mut effects = Vec::new();
    let mut now = start;
    let mut written = None;
    let mut decided = None;
    for _ in 0..64 {
        recorder.effects(&batch);
        assert!(
            opm_core::machine::batch_shape_ok(&batch),
            "bad batch {batch:?}"
        );
        effects.extend(batch.iter().cloned());
        let last = batch.last().cloned().expect("non-empty batch");
        if let Effect::Done {
            outcome,
            reason,
            requeue_after,
        } = last
        {
            assert!(attempt.is_finished());
            let trace = recorder.lines().to_vec();
            replay(trace.iter().map(String::as_str)).expect("trace replays");
            let status = written.clone().unwrap_or(persisted);
            let finished_at = decided.unwrap_or(now);
            return Run {
                inputs,
                effects,
                outcome,
                reason: reason.to_string(),
                requeue: requeue_after,
                written,
                status,
                trace,
                finished_at,
            };
        }
        if let Effect::PatchStatus { status, .. } = &last {
            decided = Some(now);
            if canned.patch.is_ok() {
                written = Some((**status).clone());
            }
        }
        let mut d = canned.latency;
        if let Some((k, extra)) = canned.slow
            && last.kind() == k
        {
            d += extra;
        }
        now = now.checked_add(d).unwrap();
        let input = Input::new(now, canned.respond(&last, &uuid));
        assert_eq!(last.answered_by(), Some(input.kind.kind()));
        recorder.input(&input);
        inputs.push(input.clone());
        batch = attempt.step(input).expect("input accepted");
    }
    panic!("attempt did not finish within 64 steps");
}

/// Shorthands for the two kinds.
pub fn run_mr(cfg: &Config, mr: ModuleRelease, canned: &Canned) -> Run {
    run(cfg, ReleaseObject::ModuleRelease(mr), canned, t0())
}

pub fn run_rel(cfg: &Config, rel: Release, canned: &Canned) -> Run {
    run(cfg, ReleaseObject::Release(rel), canned, t0())
}

/// A module release that already succeeded once: status from a first happy run.
pub fn applied_module_release(canned: &Canned) -> (ModuleRelease, Run) {
    let first = run_mr(&operator_cfg(), module_release(), canned);
    assert_eq!(first.outcome, Outcome::Applied);
    let mut mr = module_release();
    mr.status = Some(first.status.clone());
    (mr, first)
}

pub fn ev(
    t: EventType,
    reason: &str,
    action: &str,
    note: &str,
) -> (EventType, String, String, String) {
    (t, reason.into(), action.into(), note.into())
}

pub fn c3(status: &str, reason: &str, message: &str) -> Option<(String, String, String)> {
    Some((status.into(), reason.into(), message.into()))
}

/// Asserts a stall: outcome, Stalled+Ready, no Reconciling, one Warning, 30m requeue,
/// counter +1, failure history entry, nextRetryAt.
pub fn assert_stall(r: &Run, reason: &str, action: &str, message: &str) {
    assert_eq!(r.outcome, Outcome::FailedStalled, "{r:#?}");
    assert_eq!(r.reason, reason);
    assert_eq!(r.requeue, Some(secs(1800)));
    assert_eq!(r.cond3("Stalled"), c3("True", reason, message));
    assert_eq!(r.cond3("Ready"), c3("False", reason, message));
    assert_eq!(r.cond("Reconciling"), None);
    assert_eq!(
        r.event_tuples(),
        vec![ev(EventType::Warning, reason, action, message)]
    );
    assert_failure_ledger(r, message, secs(1800));
    assert_eq!(
        r.metrics().first(),
        Some(&Metric::Reconcile {
            outcome: Outcome::FailedStalled,
            duration: r.finished_at.duration_since(t0()).try_into().unwrap()
        })
    );
}

/// Asserts a transient failure with `n` consecutive failures.
pub fn assert_transient(r: &Run, reason: &str, action: &str, message: &str, n: i64) {
    let backoff = opm_core::backoff::compute_backoff(n);
    assert_eq!(r.outcome, Outcome::FailedTransient, "{r:#?}");
    assert_eq!(r.reason, reason);
    assert_eq!(r.requeue, Some(backoff));
    assert_eq!(r.cond3("Ready"), c3("False", reason, message));
    assert_eq!(r.cond("Stalled"), None);
    assert_eq!(
        r.cond3("Reconciling"),
        c3("True", "Progressing", "Reconciliation in progress")
    );
    let warnings: Vec<_> = r
        .event_tuples()
        .into_iter()
        .filter(|e| e.0 == EventType::Warning)
        .collect();
    assert_eq!(
        warnings,
        vec![ev(EventType::Warning, reason, action, message)]
    );
    assert_eq!(r.status.failure_counters.reconcile, n);
    assert_failure_ledger(r, message, backoff);
}

fn assert_failure_ledger(r: &Run, message: &str, requeue: Duration) {
    let s = &r.status;
    let h = &s.history[0];
    assert_eq!(h.action, "reconcile");
    assert_eq!(h.message, message.chars().take(1024).collect::<String>());
    assert_eq!(h.started_at, Some(time(t0())));
    assert_eq!(h.finished_at, Some(time(r.finished_at)));
    assert_eq!(
        s.next_retry_at,
        Some(time(r.finished_at.checked_add(requeue).unwrap()))
    );
    assert_eq!(s.last_attempted_action, "reconcile");
    assert_eq!(s.last_attempted_at, Some(time(t0())));
    assert_eq!(s.observed_generation, 1);
    assert!(s.failure_counters.reconcile >= 1);
    assert!(s.last_applied_render_digest.is_empty() || s.inventory.is_some());
}

/// Asserts a soft-blocked exit: Normal event, 30s, counters and history untouched.
pub fn assert_soft(r: &Run, reason: &str, action: &str, message: &str, before: &ReleaseStatus) {
    assert_eq!(r.outcome, Outcome::FailedTransient);
    assert_eq!(r.reason, reason);
    assert_eq!(r.requeue, Some(secs(30)));
    assert_eq!(r.cond3("Ready"), c3("False", reason, message));
    assert_eq!(r.cond("Stalled"), None);
    assert_eq!(
        r.event_tuples(),
        vec![ev(EventType::Normal, reason, action, message)]
    );
    assert_eq!(r.status.failure_counters, before.failure_counters);
    assert_eq!(r.status.history, before.history);
    assert_eq!(
        r.status.next_retry_at,
        Some(time(r.finished_at.checked_add(secs(30)).unwrap()))
    );
    assert_eq!(
        r.metrics(),
        vec![Metric::Reconcile {
            outcome: Outcome::FailedTransient,
            duration: r.finished_at.duration_since(t0()).try_into().unwrap()
        }]
    );
}

/// The operator identity allowed everywhere (`--allow-operator-identity=cluster`), for
/// scenarios about something other than tenancy (SPEC §15: tests/tenancy_rules.rs).
pub fn operator_cfg() -> Config {
    Config::default().with_operator_identity(opm_core::AllowOperatorIdentity::Cluster)
}
