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

/// One object whose health is read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HealthTarget {
    /// An applied object, or one a `healthChecks` entry names.
    pub id: ResourceId,
    /// Also read its newest pods: it has been waiting long enough, or it failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pods: bool,
}

/// Effect names without payloads: for fault schedules and batch-shape checks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub enum EffectKind {
    /// The finalizer write before the first change to a release.
    AddFinalizer,
    /// The finalizer removal that ends a deletion.
    RemoveFinalizer,
    /// The read of the releases a release depends on.
    CheckDependencies,
    /// The read of a Release's Flux source.
    ResolveSource,
    /// The list of the releases that may depend on a deleting one.
    ListDependents,
    /// The download of a Release's artifact.
    FetchArtifact,
    /// The `cue export` run.
    Render,
    /// The check that the identity to impersonate exists.
    CheckServiceAccount,
    /// The dry-run comparison with live objects.
    CheckDrift,
    /// The server-side apply of the render.
    Apply,
    /// The ownership read before a first write.
    InspectOwners,
    /// The read of stale objects before they are pruned.
    InspectStale,
    /// The deletion (or orphaning) of stale objects.
    Prune,
    /// The status write.
    PatchStatus,
    /// An event, sent without waiting.
    EmitEvent,
    /// A metric sample, recorded without waiting.
    RecordMetric,
    /// The end of the attempt.
    Done,
    /// The read of objects to judge their health.
    AssessHealth,
    /// The read of `valuesFrom` objects and registry credentials.
    ReadValues,
    /// The wait for deleted objects to be gone.
    AwaitTermination,
    /// The read of a remote cluster's kubeconfig Secret.
    ReadKubeConfig,
}

impl EffectKind {
    /// Every kind the machine waits on (all but events, metrics and `Done`): the kinds a
    /// fault schedule can fail, so the fault bench checks it reached each of them.
    pub const AWAITED: [EffectKind; 18] = [
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
        EffectKind::ReadKubeConfig,
        EffectKind::ListDependents,
    ];
}

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

/// A Flux source to read: `source.toolkit.fluxcd.io/v1` unless `api_version` says otherwise.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceLocator {
    /// `sourceRef.apiVersion`, or the Flux v1 default when the release gives none.
    pub api_version: String,
    /// `OCIRepository`, `GitRepository` or `Bucket`; other kinds stall before the read.
    pub kind: String,
    /// `sourceRef.namespace`, else the release's own (SPEC §16).
    pub namespace: String,
    /// The source object's name, from `sourceRef.name`.
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
        /// The CUE module import path, e.g. `example.com/modules/web@v0`.
        path: String,
        /// The exact module version to pull, e.g. `v0.2.1`.
        version: String,
        /// The merged values (`valuesFrom`, then `spec.values`) to unify with `#config`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        values: Option<Value>,
        /// The release's name, given to `#release` so the module can name its objects.
        release_name: String,
        /// The release's namespace, given to `#release` for the objects' namespace.
        release_namespace: String,
        /// `sha256:` of the `module.secretRef` credentials the pull uses (SPEC §27); the
        /// interpreter holds the bytes. The render cache keys on it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credentials: Option<String>,
    },
    /// Export the release package at `path` inside the artifact with `artifact_digest`.
    Artifact {
        /// The fetched artifact's digest: the key of the artifact cache and the render cache.
        artifact_digest: String,
        /// Where to download the artifact again if it has left the cache.
        artifact_url: String,
        /// `spec.path` inside the artifact, the directory holding `release.cue`.
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
    /// The release's namespace: a release can only act as a ServiceAccount of its own.
    pub namespace: String,
    /// The effective ServiceAccount's name, from the spec or the operator's default.
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
    /// The object to delete, or to strip of the release labels when orphaned.
    pub id: ResourceId,
    /// The object's uid when it was read, the precondition of its deletion.
    pub uid: String,
    /// Keep the object and drop its release labels: it is annotated `prune: disabled`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub orphan: bool,
    /// Keep the object and resume it (`spec.suspend: false`, the uid as precondition): a
    /// `pre-delete` hook Job, started by the deletion (SPEC §32).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
}

/// `Normal` or `Warning`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Progress worth a line in the event list: applied, pruned, no-op, suspended.
    Normal,
    /// A failure or a refusal the user may have to act on.
    Warning,
}

/// An event regarding the release, reported by `opm-controller`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Whether the event reports progress or a problem.
    pub event_type: EventType,
    /// Why it happened, as in the tables of SPEC §4, §12 and §13.
    pub reason: Reason,
    /// The step that acted (`Apply`, `Prune`, `Render`, ...), the event's `action`.
    pub action: String,
    /// The message shown to users; it never carries a secret string (SPEC §23).
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
        /// The `outcome` label the counter is moved under.
        outcome: Outcome,
        /// How long the attempt took, observed into the duration histogram.
        duration: Duration,
    },
    /// `opm_controller_apply_resources_total{action}` += each count.
    ApplyResources {
        /// Objects the apply created.
        created: u64,
        /// Existing objects the apply changed, recreated ones included.
        updated: u64,
        /// Objects a dry-run showed as already right, so not written.
        unchanged: u64,
    },
    /// `opm_controller_prune_resources_total` += count.
    PruneResources {
        /// Stale objects the prune deleted.
        count: u64,
    },
    /// `opm_controller_inventory_size` = count.
    InventorySize {
        /// Entries in the inventory the release now holds.
        count: u64,
    },
    /// `opm_controller_release_healthy` = 1 when every object is healthy, else 0.
    ReleaseHealthy {
        /// Every applied and checked object is `Current`.
        healthy: bool,
    },
    /// `opm_controller_health_wait_seconds`: from the apply to healthy.
    HealthWait {
        /// Time from the apply to every object healthy.
        duration: Duration,
    },
}

/// The cluster an object effect is sent to. Effects carry `Option<RemoteCluster>`, where
/// `None` (also what older traces replay as) is the cluster the operator runs in.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct RemoteCluster {
    /// `sha256:` of the kubeconfig bytes: the interpreter keeps one client and one set of
    /// watches per digest, so a changed kubeconfig gets fresh ones.
    pub digest: String,
    /// The server URL of the kubeconfig's current context, without credentials: what
    /// status, metrics and `kubectl opm` name the cluster by.
    pub server: String,
}
