//! What the machine asks for. Each effect carries everything needed to execute it, so the
//! interpreter makes no decisions: it performs the request and reports the result.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::ReleaseStatus;
use crate::input::InputName;
use crate::object::{DesiredObject, ReleaseKey, ResourceId};
use crate::outcome::Outcome;
use crate::reason::Reason;

mod kind;
mod requests;
mod signals;

pub use kind::EffectKind;
pub use requests::{
    ApplyStage, Deletion, HealthTarget, Impersonation, RemoteCluster, RenderRequest, SourceLocator,
};
pub use signals::{Event, EventType, Metric};

/// One request from the core. See the crate docs for the drain rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Effect {
    /// Add `finalizer` to the release (merge patch, guarded against clobbering). Awaited:
    /// `FinalizerAdded`.
    AddFinalizer {
        /// The operator's finalizer (SPEC §2), which keeps the release until its deletion
        /// path has run.
        finalizer: String,
    },
    /// Remove `finalizer` from the release. Awaited: `FinalizerRemoved`.
    RemoveFinalizer {
        /// The finalizer to drop once the deletion path is done, letting the API server
        /// delete the release.
        finalizer: String,
    },
    /// List the releases of both kinds in `namespace` and read every ref in `refs` (as the
    /// operator). Awaited: `DependenciesChecked`.
    CheckDependencies {
        /// The release's namespace, listed whole so that cycles within it are seen (SPEC §14).
        namespace: String,
        /// The release's `dependsOn`, defaults filled in, read even in other namespaces.
        refs: Vec<ReleaseKey>,
        /// Entries naming any other object (SPEC §32), each read (GET) as `identity`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        objects: Vec<ResourceId>,
        /// The effective ServiceAccount the objects are read as; `None`: the operator's own
        /// identity, allowed only with `--allow-operator-identity` (SPEC §15).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<Impersonation>,
    },
    /// List the releases of both kinds in every namespace (as the operator) and report
    /// those with a `dependsOn`: the deleting `release` waits for the ones that depend on
    /// it (SPEC §32). Awaited: `DependentsListed`.
    ListDependents {
        /// The release being deleted.
        release: ReleaseKey,
    },
    /// Read a Flux source (as the operator). Awaited: `SourceResolved`.
    ResolveSource {
        /// The Flux object named by `sourceRef`, with its namespace and API version settled.
        source: SourceLocator,
    },
    /// Download, verify against `digest` and unpack the artifact (cached by digest).
    /// Awaited: `ArtifactFetched`.
    FetchArtifact {
        /// Where the source says the artifact is (http or https only, SPEC §17).
        url: String,
        /// The source's `sha256:` digest: the download must match it exactly, and the cache
        /// keeps the artifact under it.
        digest: String,
        /// The source's revision of the artifact, carried for traces and logs; the download
        /// does not use it.
        revision: String,
    },
    /// Run `cue export` for the request. Awaited: `Rendered`.
    Render {
        /// Which package to evaluate: a module from the registry or a path in an artifact.
        request: RenderRequest,
    },
    /// Does ServiceAccount `namespace/name` exist (read as the operator)? Awaited:
    /// `ServiceAccountChecked`.
    CheckServiceAccount {
        /// The release's namespace, the only place its ServiceAccount may live (SPEC §15).
        namespace: String,
        /// The effective ServiceAccount: `spec.serviceAccountName`, else the operator's
        /// `--default-service-account`.
        name: String,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// Server-side dry-run apply of each object as `identity`, compared with the live object
    /// on the fields `field_manager` manages. Awaited: `DriftChecked`.
    CheckDrift {
        /// The rendered objects, labels stamped, whose live state is compared (SPEC §20).
        objects: Vec<DesiredObject>,
        /// The SSA manager whose fields count: only what the operator applied can drift.
        field_manager: String,
        /// The effective ServiceAccount to send these requests as; `None`: the operator's own
        /// identity, allowed only with `--allow-operator-identity` (SPEC §15).
        identity: Option<Impersonation>,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// Server-side apply, stage by stage, as `identity`. Within a stage objects may run
    /// concurrently; wait for CRDs of a stage to be Established before the next stage; skip
    /// the write when a dry-run shows no change; stop after a stage with a failure. A CRD
    /// not Established within 60s is reported as that CRD's `Timeout` error.
    /// Awaited: `Applied`.
    Apply {
        /// The objects to write, grouped so that CRDs and classes exist before their users.
        stages: Vec<ApplyStage>,
        /// The SSA manager the writes are made as, so later drift checks know our fields.
        field_manager: String,
        /// Take fields other managers own: `rollout.forceConflicts`, or a drift correction.
        force: bool,
        /// The effective ServiceAccount to send these requests as; `None`: the operator's own
        /// identity, allowed only with `--allow-operator-identity` (SPEC §15).
        identity: Option<Impersonation>,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// Read each target's labels (from the managed-object watch when it holds the object,
    /// else one GET as `identity`) before its first write, for the ownership check of
    /// SPEC §25. Awaited: `OwnersInspected`.
    InspectOwners {
        /// Objects about to be written that are not in the release's inventory yet.
        targets: Vec<ResourceId>,
        /// The identity the GETs are sent as, the same one the apply will use.
        identity: Option<Impersonation>,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// GET each target as `identity` and report uid and labels. Awaited: `StaleInspected`.
    InspectStale {
        /// The stale set, whose live labels the prune guards check first (SPEC §9).
        targets: Vec<ResourceId>,
        /// The identity the GETs are sent as, the same one the prune will use.
        identity: Option<Impersonation>,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// DELETE each object, in order, with a UID precondition, as `identity`, continuing
    /// past errors (an `orphan` one loses its release labels, a `resume` one, a suspended
    /// `pre-delete` hook Job, is resumed instead). Also how a hook Job is deleted before
    /// it is created again (SPEC §32). Awaited: `Pruned`.
    Prune {
        /// The objects that passed the guards, in reverse apply order.
        deletions: Vec<Deletion>,
        /// The effective ServiceAccount to send these requests as; `None`: the operator's own
        /// identity, allowed only with `--allow-operator-identity` (SPEC §15).
        identity: Option<Impersonation>,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// One merge patch to the status subresource. `patch` is the RFC 7386 patch from the
    /// persisted status; `status` is the full result. Awaited: `StatusPatched`.
    PatchStatus {
        /// What is sent: only the changes from the persisted status (SPEC §10).
        patch: Value,
        /// The status once the patch lands, read by the interpreter for its Ready state and
        /// gauges without reading the release again.
        status: Box<ReleaseStatus>,
    },
    /// Wait, on watch events (no polling), until each deleted object is gone: absent, or
    /// present with another UID (a successor). Bounded by the attempt's deadline; at the
    /// bound, report what is left. Awaited: `TerminationAwaited` (SPEC §12
    /// `WaitForTermination`).
    AwaitTermination {
        /// The deleted objects with the UIDs they had, so that a successor counts as gone.
        targets: Vec<Deletion>,
        /// The identity the watches and reads are made as, the one the deletions used.
        identity: Option<Impersonation>,
        /// The attempt's deadline: stop waiting shortly before it and report what is left.
        until: jiff::Timestamp,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
    /// Fire and forget: an events.k8s.io/v1 event regarding the release.
    EmitEvent {
        /// What to report on the release, for users reading its events.
        event: Event,
    },
    /// Fire and forget: a metric sample for the release's series.
    RecordMetric {
        /// Which series to move and by how much.
        metric: Metric,
    },
    /// The attempt is over. `requeue_after` is exact; the interpreter adds ±5 % jitter to
    /// success requeues only. `reason` names the exit (e.g. `ApplyFailed`).
    Done {
        /// How the attempt ended, as the reconcile metric and logs count it.
        outcome: Outcome,
        /// Which exit ended it, for logs and traces.
        reason: Reason,
        /// When to run the next attempt; `None`: only a watch event starts one.
        requeue_after: Option<Duration>,
    },
    /// Read, as `identity`, each `valuesFrom` object of `namespace` in order and, when
    /// `credentials` names one, the `module.secretRef` Secret (SPEC §27). Strings from a
    /// Secret come back as digests (SPEC §23). Awaited: `ValuesRead`.
    ReadValues {
        /// The release's namespace: `valuesFrom` objects and the secretRef live there.
        namespace: String,
        /// `spec.valuesFrom`, in the order its values are merged.
        refs: Vec<crate::api::values_from::ValuesReference>,
        /// The Secret with the registry credentials for the module pull, when there is one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<String>,
        /// The effective ServiceAccount to send these requests as; `None`: the operator's own
        /// identity, allowed only with `--allow-operator-identity` (SPEC §15).
        identity: Option<Impersonation>,
    },
    /// Read, as the operator in its own cluster, key `key` (or `value`, then `value.yaml`)
    /// of Secret `namespace/name`; at most `max_bytes` of it are parsed. Report the
    /// kubeconfig's digest, server and the fields that run a command or name a file, and
    /// keep its bytes under the digest for the clients of that cluster (SPEC §31).
    /// Awaited: `KubeConfigRead`.
    ReadKubeConfig {
        /// The release's namespace, where the Secret must be.
        namespace: String,
        /// `spec.kubeConfig.secretRef.name`.
        name: String,
        /// `spec.kubeConfig.secretRef.key`, when given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// `--max-kubeconfig-bytes`: a larger value is reported as `TooLarge`, unparsed.
        max_bytes: u64,
    },
    /// Read each target's JSON (from the managed-object watch when it holds it, else one
    /// GET as `identity`), without `metadata.managedFields`; for a target with `pods`, also
    /// LIST the pods its `spec.selector` selects in its namespace (as `identity`, at most
    /// [`HEALTH_POD_LIMIT`], newest first). Awaited: `HealthRead` (SPEC §26).
    AssessHealth {
        /// The applied objects and `healthChecks` entries; the answer keeps this order.
        targets: Vec<HealthTarget>,
        /// The identity for the GETs the watch cannot serve and for the pod LISTs.
        identity: Option<Impersonation>,
        /// The cluster the requests go to; `None`: the operator's own (SPEC §31).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cluster: Option<RemoteCluster>,
    },
}

/// At most this many pods are read to explain one workload (SPEC §26 "one bounded LIST").
pub const HEALTH_POD_LIMIT: usize = 5;

impl Effect {
    /// The cluster an object effect is sent to: `Some` only for a remote one.
    pub fn cluster(&self) -> Option<&RemoteCluster> {
        match self {
            Effect::CheckServiceAccount { cluster, .. }
            | Effect::CheckDrift { cluster, .. }
            | Effect::Apply { cluster, .. }
            | Effect::InspectOwners { cluster, .. }
            | Effect::InspectStale { cluster, .. }
            | Effect::Prune { cluster, .. }
            | Effect::AwaitTermination { cluster, .. }
            | Effect::AssessHealth { cluster, .. } => cluster.as_ref(),
            _ => None,
        }
    }

    /// This effect without its payload, as fault schedules and batch checks name it.
    pub fn kind(&self) -> EffectKind {
        match self {
            Effect::AddFinalizer { .. } => EffectKind::AddFinalizer,
            Effect::RemoveFinalizer { .. } => EffectKind::RemoveFinalizer,
            Effect::CheckDependencies { .. } => EffectKind::CheckDependencies,
            Effect::ListDependents { .. } => EffectKind::ListDependents,
            Effect::ResolveSource { .. } => EffectKind::ResolveSource,
            Effect::FetchArtifact { .. } => EffectKind::FetchArtifact,
            Effect::Render { .. } => EffectKind::Render,
            Effect::CheckServiceAccount { .. } => EffectKind::CheckServiceAccount,
            Effect::CheckDrift { .. } => EffectKind::CheckDrift,
            Effect::Apply { .. } => EffectKind::Apply,
            Effect::InspectOwners { .. } => EffectKind::InspectOwners,
            Effect::InspectStale { .. } => EffectKind::InspectStale,
            Effect::Prune { .. } => EffectKind::Prune,
            Effect::PatchStatus { .. } => EffectKind::PatchStatus,
            Effect::AwaitTermination { .. } => EffectKind::AwaitTermination,
            Effect::EmitEvent { .. } => EffectKind::EmitEvent,
            Effect::RecordMetric { .. } => EffectKind::RecordMetric,
            Effect::Done { .. } => EffectKind::Done,
            Effect::AssessHealth { .. } => EffectKind::AssessHealth,
            Effect::ReadValues { .. } => EffectKind::ReadValues,
            Effect::ReadKubeConfig { .. } => EffectKind::ReadKubeConfig,
        }
    }

    /// The input that answers this effect, if awaited.
    pub fn answered_by(&self) -> Option<InputName> {
        Some(match self {
            Effect::AddFinalizer { .. } => InputName::FinalizerAdded,
            Effect::RemoveFinalizer { .. } => InputName::FinalizerRemoved,
            Effect::CheckDependencies { .. } => InputName::DependenciesChecked,
            Effect::ListDependents { .. } => InputName::DependentsListed,
            Effect::ResolveSource { .. } => InputName::SourceResolved,
            Effect::FetchArtifact { .. } => InputName::ArtifactFetched,
            Effect::Render { .. } => InputName::Rendered,
            Effect::CheckServiceAccount { .. } => InputName::ServiceAccountChecked,
            Effect::CheckDrift { .. } => InputName::DriftChecked,
            Effect::Apply { .. } => InputName::Applied,
            Effect::InspectOwners { .. } => InputName::OwnersInspected,
            Effect::InspectStale { .. } => InputName::StaleInspected,
            Effect::Prune { .. } => InputName::Pruned,
            Effect::PatchStatus { .. } => InputName::StatusPatched,
            Effect::AssessHealth { .. } => InputName::HealthRead,
            Effect::ReadValues { .. } => InputName::ValuesRead,
            Effect::AwaitTermination { .. } => InputName::TerminationAwaited,
            Effect::ReadKubeConfig { .. } => InputName::KubeConfigRead,
            Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. } => {
                return None;
            }
        })
    }

    /// True when the machine waits for this effect's result input.
    pub fn is_awaited(&self) -> bool {
        !matches!(
            self,
            Effect::EmitEvent { .. } | Effect::RecordMetric { .. } | Effect::Done { .. }
        )
    }
}
