//! Identities of Kubernetes objects the release manages, and the release object itself.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{InventoryEntry, ModuleRelease, Release, ReleaseCommon, ReleaseStatus};

/// A managed object's identity plus its API version (SPEC §8: identity = group, kind,
/// namespace, name; the version is carried but not part of staleness).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceId {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The object's kind.
    pub kind: String,
    /// Empty for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// API version without the group (`v1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}

impl ResourceId {
    /// The staleness identity: (group, kind, namespace, name).
    pub fn identity(&self) -> (&str, &str, &str, &str) {
        (&self.group, &self.kind, &self.namespace, &self.name)
    }

    /// `apiVersion` as written in manifests (`apps/v1`, `v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `Kind/namespace/name`, or `Kind/name` when cluster-scoped: used in messages.
    pub fn display(&self) -> String {
        if self.namespace.is_empty() {
            format!("{}/{}", self.kind, self.name)
        } else {
            format!("{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// The identity an inventory entry records, to compare a stale entry with live objects.
    pub fn from_entry(e: &InventoryEntry) -> Self {
        Self {
            group: e.group.clone(),
            kind: e.kind.clone(),
            namespace: e.namespace.clone(),
            name: e.name.clone(),
            version: e.v.clone(),
        }
    }
}

/// Splits an `apiVersion` into (group, version).
pub fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.rsplit_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// One rendered object ready to apply: identity, component and the full manifest (labels
/// stamped, namespace defaulted).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DesiredObject {
    /// Which object it is.
    pub id: ResourceId,
    /// The module component it came from (the component label and the inventory).
    pub component: String,
    /// The object as sent to the API server.
    pub manifest: Value,
    /// Per-object policies the core read from the render and the ignore rules (SPEC §28).
    #[serde(default, skip_serializing_if = "ObjectPolicy::is_default")]
    pub policy: ObjectPolicy,
}

impl DesiredObject {
    /// Its inventory entry, as recorded after a full success (SPEC §8).
    pub fn inventory_entry(&self) -> InventoryEntry {
        InventoryEntry {
            group: self.id.group.clone(),
            kind: self.id.kind.clone(),
            namespace: self.id.namespace.clone(),
            name: self.id.name.clone(),
            v: self.id.version.clone(),
            component: self.component.clone(),
            prune: String::new(),
        }
    }
}

/// Which of the two release kinds.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default,
)]
pub enum Kind {
    /// A module pulled from an OCI registry (`releases.opmodel.dev` ModuleRelease).
    #[default]
    ModuleRelease,
    /// A release package inside a Flux source artifact.
    Release,
}

impl Kind {
    /// The CRD kind, as in `kind:` and in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ModuleRelease => "ModuleRelease",
            Kind::Release => "Release",
        }
    }

    /// The kind named `s`, if it is one of ours.
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "ModuleRelease" => Some(Kind::ModuleRelease),
            "Release" => Some(Kind::Release),
            _ => None,
        }
    }
}

/// Names a release: kind, namespace, name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseKey {
    /// Which CRD.
    pub kind: Kind,
    /// The release's namespace.
    pub namespace: String,
    /// The release's name.
    pub name: String,
}

impl ReleaseKey {
    /// `namespace/name`, as messages name a release.
    pub fn display(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The observed release object, of either kind. JSON: `{"moduleRelease": {…}}` or
/// `{"release": {…}}` around the object as the API server returns it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum ReleaseObject {
    /// A ModuleRelease as read from the API server.
    ModuleRelease(ModuleRelease),
    /// A Release as read from the API server.
    Release(Release),
}

impl ReleaseObject {
    /// Which kind it is.
    pub fn kind(&self) -> Kind {
        match self {
            ReleaseObject::ModuleRelease(_) => Kind::ModuleRelease,
            ReleaseObject::Release(_) => Kind::Release,
        }
    }

    /// Its metadata: generation, finalizers, deletion timestamp.
    pub fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            ReleaseObject::ModuleRelease(o) => &o.metadata,
            ReleaseObject::Release(o) => &o.metadata,
        }
    }

    /// The spec fields both kinds share.
    pub fn common(&self) -> &ReleaseCommon {
        match self {
            ReleaseObject::ModuleRelease(o) => &o.spec.common,
            ReleaseObject::Release(o) => &o.spec.common,
        }
    }

    /// Its persisted status: the only memory between attempts.
    pub fn status(&self) -> Option<&ReleaseStatus> {
        match self {
            ReleaseObject::ModuleRelease(o) => o.status.as_ref(),
            ReleaseObject::Release(o) => o.status.as_ref(),
        }
    }

    /// The key that names it in queues, traces and metrics.
    pub fn key(&self) -> ReleaseKey {
        ReleaseKey {
            kind: self.kind(),
            namespace: self.meta().namespace.clone().unwrap_or_default(),
            name: self.meta().name.clone().unwrap_or_default(),
        }
    }
}

/// How an object is applied (Flux's `ssa` values).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SsaPolicy {
    /// Apply, taking fields as the release's `force` settings say.
    #[default]
    Override,
    /// Apply without taking fields other managers own (never forced).
    Merge,
    /// Create when absent; never update.
    IfNotPresent,
    /// Never write (nor check for drift).
    Ignore,
}

impl SsaPolicy {
    pub(crate) fn parse(s: &str) -> Option<SsaPolicy> {
        Some(match s {
            "Override" => SsaPolicy::Override,
            "Merge" => SsaPolicy::Merge,
            "IfNotPresent" => SsaPolicy::IfNotPresent,
            "Ignore" => SsaPolicy::Ignore,
            _ => return None,
        })
    }
}

/// What the core decided for one object, carried with it into drift check and apply.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectPolicy {
    #[serde(default, skip_serializing_if = "is_override")]
    /// How the object is applied (`releases.opmodel.dev/ssa`).
    pub ssa: SsaPolicy,
    /// `releases.opmodel.dev/force: enabled`: an immutable-field error deletes and
    /// recreates the object (UID precondition).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// JSON pointers of `driftDetection.ignore` rules that match this object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
}

fn is_override(s: &SsaPolicy) -> bool {
    *s == SsaPolicy::Override
}

impl ObjectPolicy {
    /// No annotation or rule applies: the effect carries no policy at all.
    pub fn is_default(&self) -> bool {
        *self == ObjectPolicy::default()
    }
}
