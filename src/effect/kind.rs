//! Effect kinds without their payloads: the names metrics, logs and the executors' table
//! use for an effect.

use serde::{Deserialize, Serialize};

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
