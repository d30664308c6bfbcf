//! Names and limits of SPEC §2 and §6. Public contract: spelled exactly as written.

/// The finalizer guarding deletion.
pub const FINALIZER: &str = "releases.opmodel.dev/cleanup";
/// On a deleting release whose ServiceAccount is gone, `"true"` orphans the objects.
pub const ORPHAN_ANNOTATION: &str = "opm.dev/force-delete-orphan";
/// Setting a new value triggers an attempt at once (SPEC §1.4).
pub const REQUESTED_AT_ANNOTATION: &str = "reconcile.opmodel.dev/requestedAt";
/// Per-object prune policy on a rendered object (SPEC §28); stripped before applying.
pub(crate) const PRUNE_ANNOTATION: &str = "releases.opmodel.dev/prune";
/// The value of [`PRUNE_ANNOTATION`] that orphans the object instead of deleting it.
pub(crate) const PRUNE_DISABLED: &str = "disabled";
/// SSA field manager and event reporter.
pub const FIELD_MANAGER: &str = "opm-controller";
/// Flux source API version used when `sourceRef.apiVersion` is empty.
pub const FLUX_SOURCE_API_VERSION: &str = "source.toolkit.fluxcd.io/v1";
/// Supported Flux source kinds.
pub const SOURCE_KINDS: [&str; 3] = ["OCIRepository", "GitRepository", "Bucket"];
/// Most history entries kept.
pub(crate) const HISTORY_CAP: usize = 10;
/// Longest condition message, in bytes.
pub(crate) const CONDITION_MESSAGE_MAX: usize = 32 * 1024;
/// Longest history message, in bytes.
pub(crate) const HISTORY_MESSAGE_MAX: usize = 1024;
/// Longest event note, in bytes (the events.k8s.io/v1 limit).
pub(crate) const EVENT_NOTE_MAX: usize = 1024;

/// Labels stamped on every applied object (SPEC §6).
pub mod labels {
    /// Who manages the object; prune deletes only objects whose value is one of ours (SPEC §9).
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// The owning release's name, for `kubectl get -l`.
    pub const RELEASE_NAME: &str = "module-release.opmodel.dev/name";
    /// The owning release's namespace (cluster-scoped objects have none of their own).
    pub const RELEASE_NAMESPACE: &str = "module-release.opmodel.dev/namespace";
    /// The owning release's UUID: ownership and prune compare this, not the name (SPEC §25).
    pub const RELEASE_UUID: &str = "module-release.opmodel.dev/uuid";
    /// The module component the object was rendered from.
    pub const COMPONENT: &str = "component.opmodel.dev/name";
    /// Every label the operator stamps: removed when an object is orphaned (SPEC §28).
    pub const STAMPED: [&str; 5] = [
        MANAGED_BY,
        RELEASE_NAME,
        RELEASE_NAMESPACE,
        RELEASE_UUID,
        COMPONENT,
    ];
    /// `managed-by` values that mark an object as ours for pruning (SPEC §9).
    pub const OURS: [&str; 3] = ["opm-controller", "opm-cli", "open-platform-model"];
}

/// Condition types.
pub mod conditions {
    /// The summary condition users and `dependsOn` read.
    pub const READY: &str = "Ready";
    /// True while an attempt is under way or a transient failure retries.
    pub const RECONCILING: &str = "Reconciling";
    /// True when only a change to the spec or the cluster can help.
    pub const STALLED: &str = "Stalled";
    /// True when live objects differ from what was applied (SPEC §20).
    pub const DRIFTED: &str = "Drifted";
    /// ModuleRelease only: the module path@version was found and rendered.
    pub const MODULE_RESOLVED: &str = "ModuleResolved";
    /// With `wait`: whether every applied object is healthy (SPEC §26).
    pub const HEALTHY: &str = "Healthy";
}
