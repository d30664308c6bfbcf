//! What the machine asks for. Each effect carries everything needed to execute it, so the
//! interpreter makes no decisions: it performs the request and reports the result.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::ReleaseStatus;
use crate::object::{DesiredObject, ReleaseKey, ResourceId};
use crate::outcome::Outcome;
use crate::reason::Reason;

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
    AddFinalizer { finalizer: String },
    /// Remove `finalizer` from the release. Awaited: `FinalizerRemoved`.
    RemoveFinalizer { finalizer: String },
    /// List the releases of both kinds in `namespace` and read every ref in `refs` (as the
    /// operator). Awaited: `DependenciesChecked`.
    CheckDependencies {
        namespace: String,
        refs: Vec<ReleaseKey>,
    },
    /// Read a Flux source (as the operator). Awaited: `SourceResolved`.
    ResolveSource { source: SourceLocator },
    /// Download, verify against `digest` and unpack the artifact (cached by digest).
    /// Awaited: `ArtifactFetched`.
    FetchArtifact {
        url: String,
        digest: String,
        revision: String,
    },
    /// Run `cue export` for the request. Awaited: `Rendered`.
    Render { request: RenderRequest },
    /// Does ServiceAccount `namespace/name` exist (read as the operator)? Awaited:
    /// `ServiceAccountChecked`.
    CheckServiceAccount { namespace: String, name: String },
    /// Server-side dry-run apply of each object as `identity`, compared with the live object
    /// on the fields `field_manager` manages. Awaited: `DriftChecked`.
    CheckDrift {
        objects: Vec<DesiredObject>,
        field_manager: String,
        identity: Option<Impersonation>,
    },
    /// Server-side apply, stage by stage, as `identity`. Within a stage objects may run
    /// concurrently; wait for CRDs of a stage to be Established before the next stage; skip
    /// the write when a dry-run shows no change; stop after a stage with a failure. A CRD
    /// not Established within 60s is reported as that CRD's `Timeout` error.
    /// Awaited: `Applied`.
    Apply {
        stages: Vec<ApplyStage>,
        field_manager: String,
        force: bool,
        identity: Option<Impersonation>,
    },
    /// Read each target's labels (from the managed-object watch when it holds the object,
    /// else one GET as `identity`) before its first write, for the ownership check of
    /// SPEC §25. Awaited: `OwnersInspected`.
    InspectOwners {
        targets: Vec<ResourceId>,
        identity: Option<Impersonation>,
    },
    /// GET each target as `identity` and report uid and labels. Awaited: `StaleInspected`.
    InspectStale {
        targets: Vec<ResourceId>,
        identity: Option<Impersonation>,
    },
    /// DELETE each object, in order, with a UID precondition, as `identity`, continuing
    /// past errors. Awaited: `Pruned`.
    Prune {
        deletions: Vec<Deletion>,
        identity: Option<Impersonation>,
    },
    /// One merge patch to the status subresource. `patch` is the RFC 7386 patch from the
    /// persisted status; `status` is the full result. Awaited: `StatusPatched`.
    PatchStatus {
        patch: Value,
        status: Box<ReleaseStatus>,
    },
    /// Wait, on watch events (no polling), until each deleted object is gone: absent, or
    /// present with another UID (a successor). Bounded by the attempt's deadline; at the
    /// bound, report what is left. Awaited: `TerminationAwaited` (SPEC §12
    /// `WaitForTermination`).
    AwaitTermination {
        targets: Vec<Deletion>,
        identity: Option<Impersonation>,
        /// The attempt's deadline: stop waiting shortly before it and report what is left.
        until: jiff::Timestamp,
    },
    /// Fire and forget: an events.k8s.io/v1 event regarding the release.
    EmitEvent { event: Event },
    /// Fire and forget: a metric sample for the release's series.
    RecordMetric { metric: Metric },
    /// The attempt is over. `requeue_after` is exact; the interpreter adds ±5 % jitter to
    /// success requeues only. `reason` names the exit (e.g. `ApplyFailed`).
    Done {
        outcome: Outcome,
        reason: Reason,
        requeue_after: Option<Duration>,
    },
    /// Read, as `identity`, each `valuesFrom` object of `namespace` in order and, when
    /// `credentials` names one, the `module.secretRef` Secret (SPEC §27). Strings from a
    /// Secret come back as digests (SPEC §23). Awaited: `ValuesRead`.
    ReadValues {
        namespace: String,
        refs: Vec<crate::api::values_from::ValuesReference>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<String>,
        identity: Option<Impersonation>,
    },
    /// Read each target's JSON (from the managed-object watch when it holds it, else one
    /// GET as `identity`), without `metadata.managedFields`; for a target with `pods`, also
    /// LIST the pods its `spec.selector` selects in its namespace (as `identity`, at most
    /// [`HEALTH_POD_LIMIT`], newest first). Awaited: `HealthRead` (SPEC §26).
    AssessHealth {
        targets: Vec<HealthTarget>,
        identity: Option<Impersonation>,
    },
}

/// At most this many pods are read to explain one workload (SPEC §26 "one bounded LIST").
pub const HEALTH_POD_LIMIT: usize = 5;

/// One object whose health is read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HealthTarget {
    pub id: ResourceId,
    /// Also read its newest pods: it has been waiting long enough, or it failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pods: bool,
}

/// Effect names without payloads: for fault schedules and batch-shape checks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub enum EffectKind {
    AddFinalizer,
    RemoveFinalizer,
    CheckDependencies,
    ResolveSource,
    FetchArtifact,
    Render,
    CheckServiceAccount,
    CheckDrift,
    Apply,
    InspectOwners,
    InspectStale,
    Prune,
    PatchStatus,
    EmitEvent,
    RecordMetric,
    Done,
    AssessHealth,
    ReadValues,
    AwaitTermination,
}

impl EffectKind {
    /// Every kind the machine waits on (all but events, metrics and `Done`): the kinds a
    /// fault schedule can fail, so the fault bench checks it reached each of them.
    pub const AWAITED: [EffectKind; 16] = [
        EffectKind::AddFinalizer,
        EffectKind::RemoveFinalizer,
        EffectKind::CheckDependencies,
        EffectKind::ResolveSource,
        EffectKind::FetchArtifact,
        EffectKind::Render,
        EffectKind::CheckServiceAccount,
        EffectKind::CheckDrift,
        EffectKind::Apply,
        EffectKind::InspectOwners,
        EffectKind::InspectStale,
        EffectKind::Prune,
        EffectKind::PatchStatus,
        EffectKind::AssessHealth,
        EffectKind::ReadValues,
        EffectKind::AwaitTermination,
    ];
}

impl Effect {
    pub fn kind(&self) -> EffectKind {
        match self {
            Effect::AddFinalizer { .. } => EffectKind::AddFinalizer,
            Effect::RemoveFinalizer { .. } => EffectKind::RemoveFinalizer,
            Effect::CheckDependencies { .. } => EffectKind::CheckDependencies,
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
        }
    }

    /// The name of the input that answers this effect (`InputKind::name`), if awaited.
    pub fn answered_by(&self) -> Option<&'static str> {
        Some(match self {
            Effect::AddFinalizer { .. } => "finalizerAdded",
            Effect::RemoveFinalizer { .. } => "finalizerRemoved",
            Effect::CheckDependencies { .. } => "dependenciesChecked",
            Effect::ResolveSource { .. } => "sourceResolved",
            Effect::FetchArtifact { .. } => "artifactFetched",
            Effect::Render { .. } => "rendered",
            Effect::CheckServiceAccount { .. } => "serviceAccountChecked",
            Effect::CheckDrift { .. } => "driftChecked",
            Effect::Apply { .. } => "applied",
            Effect::InspectOwners { .. } => "ownersInspected",
            Effect::InspectStale { .. } => "staleInspected",
            Effect::Prune { .. } => "pruned",
            Effect::PatchStatus { .. } => "statusPatched",
            Effect::AssessHealth { .. } => "healthRead",
            Effect::ReadValues { .. } => "valuesRead",
            Effect::AwaitTermination { .. } => "terminationAwaited",
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

/// A Flux source to read: `source.toolkit.fluxcd.io/v1` unless `api_version` says otherwise.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceLocator {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// What to evaluate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(
    tag = "source",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum RenderRequest {
    /// Synthesise a release package importing `path@version` (package: last path element
    /// without `@vN`), unify with `values` and `#release`, export.
    Module {
        path: String,
        version: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        values: Option<Value>,
        release_name: String,
        release_namespace: String,
        /// `sha256:` of the `module.secretRef` credentials the pull uses (SPEC §27); the
        /// interpreter holds the bytes. The render cache keys on it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<String>,
    },
    /// Export the release package at `path` inside the artifact with `artifact_digest`.
    Artifact {
        artifact_digest: String,
        artifact_url: String,
        path: String,
    },
}

/// Objects applied together; stages run in order.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApplyStage {
    /// 1: CRDs, Namespaces, ClusterRoles; 2: `*Class` kinds; 3: everything else.
    pub stage: u8,
    /// Objects in apply order (stage 3: RBAC, config, services, workloads, webhooks last).
    pub objects: Vec<DesiredObject>,
}

/// The ServiceAccount identity requests are sent as (SPEC §15).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Impersonation {
    pub namespace: String,
    pub service_account: String,
    /// `system:serviceaccount:<ns>:<sa>`, the only impersonation header sent: the API
    /// server adds the ServiceAccount's groups itself, so the operator needs no right to
    /// impersonate groups (SPEC §15). Older traces also carry a `groups` list; it is ignored.
    pub user: String,
}

/// One DELETE with a UID precondition; with `orphan`, instead of deleting, remove the
/// release labels (SPEC §6) from the object (its `prune: disabled` policy, SPEC §28).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Deletion {
    pub id: ResourceId,
    pub uid: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub orphan: bool,
}

/// `Normal` or `Warning`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An event regarding the release, reported by `opm-controller`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub event_type: EventType,
    pub reason: Reason,
    pub action: String,
    pub note: String,
}

/// Metric samples; the interpreter adds the release's kind/name/namespace labels.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Metric {
    /// `opm_controller_reconcile_total{outcome}` +1 and the duration histogram.
    Reconcile {
        outcome: Outcome,
        duration: Duration,
    },
    /// `opm_controller_apply_resources_total{action}` += each count.
    ApplyResources {
        created: u64,
        updated: u64,
        unchanged: u64,
    },
    /// `opm_controller_prune_resources_total` += count.
    PruneResources { count: u64 },
    /// `opm_controller_inventory_size` = count.
    InventorySize { count: u64 },
    /// `opm_controller_release_healthy` = 1 when every object is healthy, else 0.
    ReleaseHealthy { healthy: bool },
    /// `opm_controller_health_wait_seconds`: from the apply to healthy.
    HealthWait { duration: Duration },
}
