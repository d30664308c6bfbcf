//! Executes one effect against the world, exactly as the interpreter would against a real
//! cluster, and returns the result input. Fire-and-forget effects are recorded (events,
//! metrics) and answered with `None`.
//!
//! A fault hitting a per-object effect (drift check, apply, stale GET, prune) fails the
//! first object; an apply then stops after that object's stage, as the interpreter does.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use opm_core::effect::{Effect, Event, Impersonation, Metric, RenderRequest};
use opm_core::input::{
    ApiError, AppliedObject, ApplyAction, ApplyReport, DependencyReport, DriftReport, FetchError,
    FetchedArtifact, GroupKind, InputKind, LiveMeta, LiveObject, ObjectResult, RenderError,
    RenderOutput, SourceError,
};
use opm_core::object::{ReleaseKey, ResourceId};
use opm_core::outcome::Outcome;
use opm_core::triggers;

use super::faults::FaultError;
use super::rbac::Verb;
use super::{SourceId, World, add};

/// An event the core emitted, with when and for whom.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedEvent {
    /// The virtual time it was emitted.
    pub at: Timestamp,
    /// The release it regards.
    pub key: ReleaseKey,
    /// The event as the core emitted it.
    pub event: Event,
}

/// The operator's metrics, per release (SPEC §21). Cleared by an operator restart; a
/// release's series go away when the release does.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Metrics {
    /// `opm_controller_reconcile_total`: attempts by (release, outcome).
    pub reconcile_total: BTreeMap<(ReleaseKey, Outcome), u64>,
    /// Total attempt time per release: the sum of the duration histogram.
    pub reconcile_duration: BTreeMap<ReleaseKey, Duration>,
    /// By (release, `created`|`updated`|`unchanged`).
    pub apply_resources: BTreeMap<(ReleaseKey, &'static str), u64>,
    /// `opm_controller_prune_resources_total`: objects pruned per release.
    pub prune_resources: BTreeMap<ReleaseKey, u64>,
    /// `opm_controller_inventory_size`: the last inventory size reported per release.
    pub inventory_size: BTreeMap<ReleaseKey, u64>,
    /// `opm_controller_release_healthy`.
    pub release_healthy: BTreeMap<ReleaseKey, bool>,
    /// `opm_controller_health_wait_seconds`: the waits observed, per release.
    pub health_waits: BTreeMap<ReleaseKey, Vec<Duration>>,
}

impl Metrics {
    /// Single-key series are looked up before inserting, so a release's key is copied
    /// only the first time: this runs for every metric of every attempt.
    pub(crate) fn record(&mut self, key: &ReleaseKey, m: &Metric) {
        match m {
            Metric::Reconcile { outcome, duration } => {
                *self
                    .reconcile_total
                    .entry((key.clone(), *outcome))
                    .or_default() += 1;
                match self.reconcile_duration.get_mut(key) {
                    Some(d) => *d += *duration,
                    None => {
                        self.reconcile_duration.insert(key.clone(), *duration);
                    }
                }
            }
            Metric::ApplyResources {
                created,
                updated,
                unchanged,
            } => {
                for (a, n) in [
                    ("created", created),
                    ("updated", updated),
                    ("unchanged", unchanged),
                ] {
                    *self.apply_resources.entry((key.clone(), a)).or_default() += n;
                }
            }
            Metric::PruneResources { count } => match self.prune_resources.get_mut(key) {
                Some(v) => *v += count,
                None => {
                    self.prune_resources.insert(key.clone(), *count);
                }
            },
            Metric::InventorySize { count } => match self.inventory_size.get_mut(key) {
                Some(v) => *v = *count,
                None => {
                    self.inventory_size.insert(key.clone(), *count);
                }
            },
            Metric::ReleaseHealthy { healthy } => match self.release_healthy.get_mut(key) {
                Some(v) => *v = *healthy,
                None => {
                    self.release_healthy.insert(key.clone(), *healthy);
                }
            },
            Metric::HealthWait { duration } => match self.health_waits.get_mut(key) {
                Some(v) => v.push(*duration),
                None => {
                    self.health_waits.insert(key.clone(), vec![*duration]);
                }
            },
        }
    }

    /// Removes every series of a release.
    pub fn forget(&mut self, key: &ReleaseKey) {
        self.reconcile_total.retain(|(k, _), _| k != key);
        self.reconcile_duration.remove(key);
        self.apply_resources.retain(|(k, _), _| k != key);
        self.prune_resources.remove(key);
        self.inventory_size.remove(key);
        self.release_healthy.remove(key);
        self.health_waits.remove(key);
    }

    /// `opm_controller_reconcile_total` summed over releases, by outcome.
    pub fn total_by_outcome(&self) -> BTreeMap<Outcome, u64> {
        let mut out = BTreeMap::new();
        for ((_, o), n) in &self.reconcile_total {
            *out.entry(*o).or_default() += n;
        }
        out
    }
}

/// The length of `value` serialised as compact JSON, as `cue export` would report it,
/// counted without building the text: every render of every attempt asks for it.
fn serialized_len(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    serde_json::to_writer(&mut n, value).map_or(0, |()| n.0)
}

/// Per-attempt executor state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Current {
    pub deadline: Option<Timestamp>,
    /// A fault (error, delay or deadline) hit one of the attempt's effects.
    pub faulted: bool,
    pub deleted: Vec<ResourceId>,
    pub status_mismatches: u32,
}

impl World {
    /// Performs `effect` for the release `key` at [`World::now`] and returns the input that
    /// answers it (`None` for fire-and-forget effects and `Done`). A delay fault moves the
    /// clock; an awaited effect that overruns the attempt's deadline reports `Timeout`.
    pub fn execute(&mut self, key: &ReleaseKey, effect: &Effect) -> Option<InputKind> {
        match effect {
            Effect::EmitEvent { event } => {
                if self.retention == super::Retention::Timeline {
                    return None;
                }
                self.events.push(RecordedEvent {
                    at: self.now,
                    key: key.clone(),
                    event: event.clone(),
                });
                return None;
            }
            Effect::RecordMetric { metric } => {
                self.metrics.record(key, metric);
                return None;
            }
            Effect::Done { .. } => return None,
            _ => {}
        }
        let mut fault = self
            .faults
            .take(effect.kind(), key, self.now, &mut self.rng);
        self.current.faulted |= fault.is_some();
        if let Some(FaultError::Delay { duration }) = fault {
            self.now = add(self.now, duration);
            fault = None;
        }
        if self.current.deadline.is_some_and(|d| self.now >= d) {
            self.current.faulted = true;
            fault = Some(FaultError::api(ApiError::Timeout {
                message: "context deadline exceeded".into(),
            }));
        }
        Some(self.perform(key, effect, fault))
    }

    fn perform(
        &mut self,
        key: &ReleaseKey,
        effect: &Effect,
        fault: Option<FaultError>,
    ) -> InputKind {
        // SPEC §31: an object effect for a remote cluster runs against that cluster's store.
        if let Some(cluster) = effect.cluster().cloned() {
            return self.in_cluster(&cluster, |w, unreachable| {
                let fault = unreachable.map(FaultError::api).or(fault);
                w.perform_here(key, effect, fault)
            });
        }
        self.perform_here(key, effect, fault)
    }

    fn perform_here(
        &mut self,
        key: &ReleaseKey,
        effect: &Effect,
        fault: Option<FaultError>,
    ) -> InputKind {
        let api_err = fault.as_ref().and_then(FaultError::as_api);
        match effect {
            Effect::AddFinalizer { finalizer } => InputKind::FinalizerAdded {
                result: match api_err {
                    Some(e) => Err(e),
                    None => self.releases.add_finalizer(key, finalizer),
                },
            },
            Effect::RemoveFinalizer { finalizer } => InputKind::FinalizerRemoved {
                result: match api_err {
                    Some(e) => Err(e),
                    None => self.remove_release_finalizer(key, finalizer),
                },
            },
            Effect::ListDependents { .. } => InputKind::DependentsListed {
                result: match api_err {
                    Some(e) => Err(e),
                    None => Ok(self.dependents_report()),
                },
            },
            Effect::CheckDependencies {
                namespace,
                refs,
                objects,
                identity,
            } => InputKind::DependenciesChecked {
                result: match api_err {
                    Some(e) => Err(e),
                    None => {
                        let mut report = self.dependency_report(namespace, refs);
                        report.objects = self.read_objects(objects, identity.as_ref());
                        Ok(report)
                    }
                },
            },
            Effect::ResolveSource { source } => {
                let id = SourceId::new(&source.kind, &source.namespace, &source.name);
                InputKind::SourceResolved {
                    result: match fault.as_ref().and_then(FaultError::as_source) {
                        Some(e) => Err(e),
                        None => self.resolve(&id),
                    },
                }
            }
            Effect::FetchArtifact { url, digest, .. } => InputKind::ArtifactFetched {
                result: match fault.as_ref().and_then(FaultError::as_fetch) {
                    Some(e) => Err(e),
                    None => self.fetch(url, digest),
                },
            },
            Effect::Render { request } => InputKind::Rendered {
                result: match fault.as_ref().and_then(FaultError::as_render) {
                    Some(e) => Err(e),
                    None => self.render(key, request),
                },
            },
            Effect::CheckServiceAccount {
                namespace, name, ..
            } => InputKind::ServiceAccountChecked {
                result: match api_err {
                    Some(e) => Err(e),
                    None => Ok(self.rbac.account_exists(namespace, name)),
                },
            },
            Effect::CheckDrift {
                objects,
                field_manager,
                identity,
                ..
            } => {
                let mut report = DriftReport::default();
                for (i, o) in objects.iter().enumerate() {
                    let res = match (&api_err, i) {
                        (Some(e), 0) => Err(e.clone()),
                        _ => self.authorize(identity.as_ref(), Verb::Apply, &o.id),
                    };
                    match res {
                        Err(e) => report.errors.push(ObjectResult {
                            id: o.id.clone(),
                            result: Err(e),
                        }),
                        Ok(())
                            if self.store.drifted(
                                &o.id,
                                &self.shaped(o, field_manager),
                                field_manager,
                            ) =>
                        {
                            report.drifted.push(o.id.clone())
                        }
                        Ok(()) => {}
                    }
                }
                InputKind::DriftChecked { report }
            }
            Effect::Apply {
                stages,
                field_manager,
                force,
                identity,
                ..
            } => {
                let mut report = ApplyReport::default();
                let mut injected = api_err;
                for stage in stages {
                    let mut failed = false;
                    for o in &stage.objects {
                        let result = match injected.take() {
                            Some(e) => Err(e),
                            None => self
                                .authorize(identity.as_ref(), Verb::Apply, &o.id)
                                .and_then(|()| self.apply_object(o, field_manager, *force)),
                        };
                        if result.is_ok() {
                            self.register_crd(&o.manifest);
                        }
                        if matches!(result, Ok(ApplyAction::Created | ApplyAction::Updated)) {
                            self.store_writes += 1;
                            self.note_applied(&o.id);
                        }
                        failed |= result.is_err();
                        report.objects.push(AppliedObject {
                            id: o.id.clone(),
                            result,
                        });
                    }
                    if failed {
                        break;
                    }
                }
                InputKind::Applied { report }
            }
            Effect::InspectOwners {
                targets, identity, ..
            } => InputKind::OwnersInspected {
                objects: self.inspect(targets, identity.as_ref(), api_err.as_ref()),
            },
            Effect::InspectStale {
                targets, identity, ..
            } => InputKind::StaleInspected {
                objects: self.inspect(targets, identity.as_ref(), api_err.as_ref()),
            },
            Effect::Prune {
                deletions,
                identity,
                ..
            } => {
                let mut results = Vec::with_capacity(deletions.len());
                for (i, d) in deletions.iter().enumerate() {
                    let result = match (&api_err, i) {
                        (Some(e), 0) => Err(e.clone()),
                        _ if d.orphan => self
                            .authorize(identity.as_ref(), Verb::Apply, &d.id)
                            .and_then(|()| {
                                self.store.remove_labels(
                                    &d.id,
                                    Some(&d.uid),
                                    &opm_core::constants::labels::STAMPED,
                                )
                            }),
                        _ => self
                            .authorize(identity.as_ref(), Verb::Delete, &d.id)
                            .and_then(|()| self.store.delete(&d.id, Some(&d.uid))),
                    };
                    if result.is_ok() {
                        self.store_writes += 1;
                    }
                    if result.is_ok() && !d.orphan {
                        self.current.deleted.push(d.id.clone());
                    }
                    results.push(ObjectResult {
                        id: d.id.clone(),
                        result,
                    });
                }
                InputKind::Pruned { results }
            }
            // Deletion in the simulated store is immediate: what is left is what a fault
            // kept, or a successor-free object still under the same UID.
            Effect::AwaitTermination { targets, .. } => {
                let remaining = targets
                    .iter()
                    .filter(|d| {
                        api_err.is_some() || self.store.get(&d.id).is_some_and(|o| o.uid == d.uid)
                    })
                    .map(|d| d.id.clone())
                    .collect();
                InputKind::TerminationAwaited {
                    remaining,
                    error: api_err,
                }
            }
            Effect::PatchStatus { patch, status } => {
                let result = match api_err {
                    Some(e) => Err(e),
                    None => self.patch_status(key, patch, status),
                };
                InputKind::StatusPatched { result }
            }
            // The simulated world keeps no ConfigMap or Secret data for values: each
            // reference it may read is reported missing (its RBAC and faults still apply).
            Effect::ReadValues {
                namespace,
                refs,
                credentials,
                identity,
            } => {
                let read = |kind: &str, name: &str| {
                    let id = ResourceId {
                        group: String::new(),
                        kind: kind.to_string(),
                        namespace: namespace.clone(),
                        name: name.to_string(),
                        version: "v1".to_string(),
                    };
                    match &api_err {
                        Some(e) => Err(e.clone()),
                        None => self.authorize(identity.as_ref(), Verb::Get, &id),
                    }
                };
                let values = refs
                    .iter()
                    .map(|r| {
                        read(r.kind.as_str(), &r.name)
                            .map(|()| opm_core::values_from::ValuesContent::ObjectMissing)
                    })
                    .collect();
                let credentials = credentials.as_ref().map(|name| {
                    read("Secret", name)
                        .map(|()| opm_core::values_from::CredentialsContent::ObjectMissing)
                });
                InputKind::ValuesRead {
                    values,
                    credentials,
                }
            }
            // Answered before `perform` is called.
            Effect::ReadKubeConfig {
                namespace,
                name,
                key: secret_key,
                ..
            } => InputKind::KubeConfigRead {
                result: match api_err {
                    Some(error) => Err(opm_core::remote::KubeConfigError::Api { error }),
                    None => self.read_kubeconfig(namespace, name, secret_key.as_deref()),
                },
            },
            Effect::AssessHealth {
                targets, identity, ..
            } => self.read_health(targets, identity.as_ref(), api_err),
            Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. } => {
                unreachable!("fire-and-forget effects have no result")
            }
        }
    }

    pub(super) fn authorize(
        &self,
        identity: Option<&Impersonation>,
        verb: Verb,
        id: &ResourceId,
    ) -> Result<(), ApiError> {
        let cluster = self.store.is_cluster_scoped(&id.group, &id.kind);
        self.rbac.authorize(identity, verb, id, cluster)
    }

    /// A `CustomResourceDefinition` with `scope: Cluster` makes its kind cluster-scoped.
    fn register_crd(&mut self, manifest: &Value) {
        if manifest.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return;
        }
        let spec = &manifest["spec"];
        if spec["scope"].as_str() == Some("Cluster")
            && let (Some(g), Some(k)) = (spec["group"].as_str(), spec["names"]["kind"].as_str())
        {
            self.epoch += 1;
            self.store.add_cluster_scoped(GroupKind {
                group: g.to_string(),
                kind: k.to_string(),
            });
        }
    }

    /// Every release with a `dependsOn`, in every namespace (SPEC §32), as the interpreter
    /// lists them.
    fn dependents_report(&self) -> DependencyReport {
        DependencyReport {
            releases: self
                .releases
                .with_depends_on()
                .map(|(_, r)| opm_core::deps::snapshot(&r.object))
                .collect(),
            objects: Vec::new(),
        }
    }

    /// Removes the finalizer; when that lets the release go, the releases it depended on
    /// are re-triggered (a deletion waiting for its dependents, SPEC §32), as the
    /// operator's watch does on the release's `Delete` event.
    fn remove_release_finalizer(
        &mut self,
        key: &ReleaseKey,
        finalizer: &str,
    ) -> Result<(), ApiError> {
        let refs: Vec<ReleaseKey> = self
            .releases
            .get(key)
            .map(|o| opm_core::deps::release_keys(key, &o.common().depends_on))
            .unwrap_or_default();
        self.releases.remove_finalizer(key, finalizer)?;
        if self.releases.get(key).is_none() {
            for dep in refs {
                if triggers::waits_for_dependents(self.releases.get(&dep).and_then(|o| o.status()))
                {
                    self.trigger(&dep, "dependentGone");
                }
            }
        }
        Ok(())
    }

    fn dependency_report(&self, namespace: &str, refs: &[ReleaseKey]) -> DependencyReport {
        let mut keys: BTreeSet<ReleaseKey> = self
            .releases
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        keys.extend(
            refs.iter()
                .filter(|r| self.releases.get(r).is_some())
                .cloned(),
        );
        DependencyReport {
            releases: keys
                .iter()
                .filter_map(|k| self.releases.snapshot(k))
                .collect(),
            objects: Vec::new(),
        }
    }

    fn resolve(&self, id: &SourceId) -> Result<opm_core::input::SourceArtifact, SourceError> {
        let Some(src) = self.catalog.sources.get(id) else {
            return Err(SourceError::NotFound);
        };
        if !src.ready {
            return Err(SourceError::NotReady {
                message: src.message.clone(),
            });
        }
        src.artifact.clone().ok_or(SourceError::NoArtifact)
    }

    fn fetch(&self, url: &str, digest: &str) -> Result<FetchedArtifact, FetchError> {
        let Some(a) = self.catalog.served(url) else {
            return Err(FetchError::Http { status: 404 });
        };
        if a.digest != digest {
            return Err(FetchError::DigestMismatch {
                expected: digest.to_string(),
                actual: a.digest.clone(),
            });
        }
        if let Some(e) = &a.broken {
            return Err(e.clone());
        }
        Ok(FetchedArtifact {
            digest: a.digest.clone(),
            size: a.size,
        })
    }

    fn render(
        &mut self,
        key: &ReleaseKey,
        request: &RenderRequest,
    ) -> Result<RenderOutput, RenderError> {
        // SPEC §30: an OPM module or instance renders through the Ready Platform (its digest
        // goes with the output into the config digest) or waits for one.
        let platform = if self.catalog.renders_through_platform(request) {
            self.note_opm_release(key);
            self.platform_ready()
                .map_err(|message| RenderError::PlatformNotReady { message })?
        } else {
            String::new()
        };
        let value = match request {
            RenderRequest::Module {
                path,
                version,
                values,
                release_name,
                release_namespace,
                ..
            } => self.catalog.render_module(
                path,
                version,
                release_name,
                release_namespace,
                values.as_ref(),
            )?,
            RenderRequest::Artifact {
                artifact_digest,
                path,
                ..
            } => self.catalog.render_artifact(artifact_digest, path)?,
        };
        // Report the cluster-scoped kinds the value uses, as discovery would for them.
        let mut cluster_scoped = BTreeSet::new();
        if let Some(comps) = value.get("components").and_then(Value::as_object) {
            for obj in comps
                .values()
                .filter_map(Value::as_object)
                .flat_map(|c| c.values())
            {
                let (Some(av), Some(kind)) = (obj["apiVersion"].as_str(), obj["kind"].as_str())
                else {
                    continue;
                };
                let (group, _) = opm_core::object::split_api_version(av);
                if self.store.is_cluster_scoped(&group, kind) {
                    cluster_scoped.insert(GroupKind {
                        group,
                        kind: kind.to_string(),
                    });
                }
            }
        }
        Ok(RenderOutput {
            bytes: serialized_len(&value),
            value,
            cluster_scoped: cluster_scoped.into_iter().collect(),
            platform,
        })
    }

    /// The live metadata of each target, read as `identity`; an injected error fails the
    /// first (both owner and stale inspections read this way).
    fn inspect(
        &self,
        targets: &[ResourceId],
        identity: Option<&Impersonation>,
        injected: Option<&ApiError>,
    ) -> Vec<LiveObject> {
        targets
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let result = match (injected, i) {
                    (Some(e), 0) => Err(e.clone()),
                    _ => self.authorize(identity, Verb::Get, id).map(|()| {
                        self.store.get(id).map(|o| LiveMeta {
                            uid: o.uid.clone(),
                            labels: o.labels(),
                        })
                    }),
                };
                LiveObject {
                    id: id.clone(),
                    result,
                }
            })
            .collect()
    }

    fn patch_status(
        &mut self,
        key: &ReleaseKey,
        patch: &Value,
        claimed: &opm_core::api::ReleaseStatus,
    ) -> Result<(), ApiError> {
        let was_ready = triggers::is_ready(self.releases.get(key).and_then(|o| o.status()));
        let stored = self.releases.patch_status_in_place(key, patch)?;
        let mismatch = stored != claimed;
        let retrigger = triggers::retriggers_dependents(was_ready, Some(stored));
        if mismatch {
            self.current.status_mismatches += 1;
        }
        if retrigger {
            self.trigger_dependents(key);
        }
        Ok(())
    }
}
