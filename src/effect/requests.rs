//! The requests inside the awaited effects: which source, which render, whose identity,
//! which cluster, which objects to delete or read. Everything the interpreter needs to
//! perform an effect without deciding anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::object::{DesiredObject, ResourceId};

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
