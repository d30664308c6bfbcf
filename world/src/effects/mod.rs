//! Executes one effect against the world, exactly as the interpreter would against a real
//! cluster, and returns the result input: one file per effect kind, named as in
//! `interpreter/src/effects/`, each answering with the core's typed input. Fire-and-forget
//! effects are recorded (events, metrics) and answered with `None`.
//!
//! A fault hitting a per-object effect (drift check, apply, stale GET, prune) fails the
//! first object; an apply then stops after that object's stage, as the interpreter does.

mod apply;
mod dependencies;
mod drift;
mod fetch;
mod finalizer;
mod health;
mod kube_config;
mod metrics;
mod owners;
mod prune;
mod render;
mod service_account;
mod source;
mod status;
mod termination;
mod values;

use jiff::Timestamp;
use serde_json::Value;

use opm_core::effect::{Effect, Event, Impersonation};
use opm_core::input::{ApiError, GroupKind, InputKind};
use opm_core::object::{ReleaseKey, ResourceId};

pub use metrics::Metrics;

use super::faults::FaultError;
use super::rbac::Verb;
use super::{World, add};
use crate::cluster::Cluster;

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

/// Per-attempt executor state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Current {
    pub deadline: Option<Timestamp>,
    /// A fault (error, delay or deadline) hit one of the attempt's effects.
    pub faulted: bool,
    pub deleted: Vec<ResourceId>,
    pub status_mismatches: u32,
}

/// What an executor receives besides the [`Cluster`] it acts on (as the interpreter's
/// executors receive their context): the virtual time, the attempt's record, and the
/// notes the world outside the cluster acts on once the effect is answered.
pub(crate) struct Cx<'a> {
    pub(crate) now: Timestamp,
    pub(crate) current: &'a mut Current,
    pub(crate) notes: Notes,
}

/// What an effect did that the world outside the cluster must know.
#[derive(Default)]
pub(crate) struct Notes {
    /// Writes to the store: objects created, changed, pruned, orphaned or resumed.
    pub(crate) store_writes: u64,
    /// Changes no resource version covers (a CRD making its kind cluster-scoped).
    pub(crate) epoch: u64,
    /// Releases a write re-triggers, and why.
    pub(crate) triggers: Vec<(ReleaseKey, &'static str)>,
    /// Releases whose Ready transition re-triggers the releases that depend on them.
    pub(crate) dependents_of: Vec<ReleaseKey>,
    /// Releases that rendered through the Platform.
    pub(crate) opm_releases: Vec<ReleaseKey>,
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
        let mut fault =
            self.schedule
                .faults
                .take(effect.kind(), key, self.now, &mut self.schedule.rng);
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

    /// Runs `effect` on the cluster, then acts on what it noted: the counters the memo
    /// reads, and the watch events its writes cause (as the operator's watches would).
    fn perform_here(
        &mut self,
        key: &ReleaseKey,
        effect: &Effect,
        fault: Option<FaultError>,
    ) -> InputKind {
        let mut cx = Cx {
            now: self.now,
            current: &mut self.current,
            notes: Notes::default(),
        };
        let answer = self.cluster.perform(&mut cx, key, effect, fault);
        let Notes {
            store_writes,
            epoch,
            triggers,
            dependents_of,
            opm_releases,
        } = cx.notes;
        self.store_writes += store_writes;
        self.epoch += epoch;
        for k in opm_releases {
            self.note_opm_release(&k);
        }
        for (k, why) in triggers {
            self.trigger(&k, why);
        }
        for k in dependents_of {
            self.trigger_dependents(&k);
        }
        answer
    }
}

impl Cluster {
    /// One executor per effect kind, each answering with the core's typed input.
    fn perform(
        &mut self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        effect: &Effect,
        fault: Option<FaultError>,
    ) -> InputKind {
        let api_err = fault.as_ref().and_then(FaultError::as_api);
        let fault = fault.as_ref();
        match effect {
            Effect::AddFinalizer { finalizer } => self.add_finalizer(key, finalizer, api_err),
            Effect::RemoveFinalizer { finalizer } => {
                self.remove_finalizer(cx, key, finalizer, api_err)
            }
            Effect::ListDependents { .. } => self.list_dependents(api_err),
            Effect::CheckDependencies {
                namespace,
                refs,
                objects,
                identity,
            } => self.check_dependencies(
                namespace,
                refs,
                objects,
                identity.as_ref(),
                api_err,
                cx.now,
            ),
            Effect::ResolveSource { source } => self.resolve_source(source, fault),
            Effect::FetchArtifact { url, digest, .. } => self.fetch_artifact(url, digest, fault),
            Effect::Render { request } => self.render_effect(cx, key, request, fault),
            Effect::CheckServiceAccount {
                namespace, name, ..
            } => self.check_service_account(namespace, name, api_err),
            Effect::AwaitTermination { targets, .. } => self.await_termination(targets, api_err),
            Effect::PatchStatus { patch, status } => {
                self.patch_status_effect(cx, key, patch, status, api_err)
            }
            Effect::ReadValues {
                namespace,
                refs,
                credentials,
                identity,
            } => self.read_values(
                namespace,
                refs,
                credentials.as_deref(),
                identity.as_ref(),
                api_err,
            ),
            Effect::ReadKubeConfig {
                namespace,
                name,
                key: secret_key,
                ..
            } => self.read_kube_config(namespace, name, secret_key.as_deref(), api_err),
            Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. } => {
                unreachable!("fire-and-forget effects have no result")
            }
            _ => self.perform_on_objects(cx, effect, api_err),
        }
    }

    /// The executors of the effects on a release's objects (SPEC §19, §20, §25, §26, §9).
    fn perform_on_objects(
        &mut self,
        cx: &mut Cx<'_>,
        effect: &Effect,
        api_err: Option<ApiError>,
    ) -> InputKind {
        match effect {
            Effect::CheckDrift {
                objects,
                field_manager,
                identity,
                ..
            } => self.check_drift(objects, field_manager, identity.as_ref(), api_err),
            Effect::Apply {
                stages,
                field_manager,
                force,
                identity,
                ..
            } => self.apply(
                cx,
                stages,
                field_manager,
                *force,
                identity.as_ref(),
                api_err,
            ),
            Effect::InspectOwners {
                targets, identity, ..
            } => self.inspect_owners(targets, identity.as_ref(), api_err),
            Effect::InspectStale {
                targets, identity, ..
            } => self.inspect_stale(targets, identity.as_ref(), api_err),
            Effect::Prune {
                deletions,
                identity,
                ..
            } => self.prune(cx, deletions, identity.as_ref(), api_err),
            Effect::AssessHealth {
                targets, identity, ..
            } => self.read_health(targets, identity.as_ref(), api_err, cx.now),
            _ => unreachable!("not an effect on objects: {:?}", effect.kind()),
        }
    }

    /// A `CustomResourceDefinition` with `scope: Cluster` makes its kind cluster-scoped.
    fn register_crd(&mut self, cx: &mut Cx<'_>, manifest: &Value) {
        if manifest.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return;
        }
        let spec = &manifest["spec"];
        if spec["scope"].as_str() == Some("Cluster")
            && let (Some(g), Some(k)) = (spec["group"].as_str(), spec["names"]["kind"].as_str())
        {
            cx.notes.epoch += 1;
            self.store.add_cluster_scoped(GroupKind {
                group: g.to_string(),
                kind: k.to_string(),
            });
        }
    }

    /// Whether `identity` may `verb` the object `id` (RBAC, SPEC §15).
    pub(crate) fn authorize(
        &self,
        identity: Option<&Impersonation>,
        verb: Verb,
        id: &ResourceId,
    ) -> Result<(), ApiError> {
        let cluster = self.store.is_cluster_scoped(&id.group, &id.kind);
        self.rbac.authorize(identity, verb, id, cluster)
    }
}
