//! Flux source objects whose `status.artifact` the test sets itself, standing in for a
//! running source-controller (which the tests do not install).

use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use crate::error::Result;

pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
pub const SOURCE_VERSION: &str = "v1";

/// The Flux source kinds a `Release` can reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    OciRepository,
    GitRepository,
    Bucket,
}

impl SourceKind {
    pub fn kind(self) -> &'static str {
        match self {
            SourceKind::OciRepository => "OCIRepository",
            SourceKind::GitRepository => "GitRepository",
            SourceKind::Bucket => "Bucket",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            SourceKind::OciRepository => "ocirepositories",
            SourceKind::GitRepository => "gitrepositories",
            SourceKind::Bucket => "buckets",
        }
    }

    /// The dynamic API resource for this kind.
    pub fn api_resource(self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(SOURCE_GROUP, SOURCE_VERSION, self.kind());
        ApiResource::from_gvk_with_plural(&gvk, self.plural())
    }

    /// A plausible spec (the objects are never reconciled by Flux here).
    fn spec(self, name: &str) -> Value {
        match self {
            SourceKind::OciRepository => json!({
                "url": format!("oci://registry.invalid/{name}"),
                "interval": "10m",
                "ref": {"tag": "latest"},
            }),
            SourceKind::GitRepository => json!({
                "url": format!("https://git.invalid/{name}.git"),
                "interval": "10m",
                "ref": {"branch": "main"},
            }),
            SourceKind::Bucket => json!({
                "bucketName": name,
                "endpoint": "s3.invalid",
                "interval": "10m",
            }),
        }
    }
}

/// What a source-controller publishes in `status.artifact`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Where the artifact is downloaded from (e.g. an [`crate::ArtifactServer`] URL).
    pub url: String,
    /// e.g. `latest@sha256:<hex>` (OCI) or `main@sha1:<hex>` (Git).
    pub revision: String,
    /// `sha256:<hex>` of the served bytes.
    pub digest: String,
    /// Relative storage path, informational.
    pub path: String,
    pub size: Option<u64>,
}

impl Artifact {
    /// An artifact for `bytes` served at `url`, with an OCI-style revision derived from
    /// the digest.
    pub fn for_bytes(url: impl Into<String>, bytes: &[u8]) -> Self {
        let digest = crate::archive::sha256_digest(bytes);
        Artifact {
            url: url.into(),
            revision: format!("latest@{digest}"),
            path: format!("artifacts/{}.tar.gz", &digest["sha256:".len()..]),
            digest,
            size: Some(bytes.len() as u64),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "url": self.url,
            "revision": self.revision,
            "digest": self.digest,
            "path": self.path,
            "lastUpdateTime": now_rfc3339(),
        });
        if let Some(size) = self.size {
            v["size"] = json!(size);
        }
        v
    }
}

fn api(client: &Client, ns: &str, kind: SourceKind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &kind.api_resource())
}

/// Creates source `ns/name` of `kind` with a plausible spec and no status.
pub async fn create_source(
    client: &Client,
    ns: &str,
    kind: SourceKind,
    name: &str,
) -> Result<DynamicObject> {
    let ar = kind.api_resource();
    let mut obj = DynamicObject::new(name, &ar).within(ns);
    obj.data = json!({ "spec": kind.spec(name) });
    Ok(api(client, ns, kind)
        .create(&PostParams::default(), &obj)
        .await?)
}

/// Sets `status.artifact` and a `Ready=True` condition through the status subresource,
/// as source-controller does after a successful fetch.
pub async fn set_artifact(
    client: &Client,
    ns: &str,
    kind: SourceKind,
    name: &str,
    artifact: &Artifact,
) -> Result<DynamicObject> {
    let api = api(client, ns, kind);
    let current = api.get(name).await?;
    let generation = current.metadata.generation.unwrap_or(1);
    let status = json!({
        "status": {
            "observedGeneration": generation,
            "artifact": artifact.to_json(),
            "conditions": [ready_condition(
                generation,
                "True",
                "Succeeded",
                &format!("stored artifact for revision '{}'", artifact.revision),
            )],
        }
    });
    Ok(api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?)
}

/// Marks the source not ready (`Ready=False`) and removes its artifact, as
/// source-controller reports a failed fetch of a never-fetched source.
pub async fn set_not_ready(
    client: &Client,
    ns: &str,
    kind: SourceKind,
    name: &str,
    reason: &str,
    message: &str,
) -> Result<DynamicObject> {
    let api = api(client, ns, kind);
    let current = api.get(name).await?;
    let generation = current.metadata.generation.unwrap_or(1);
    let status = json!({
        "status": {
            "observedGeneration": generation,
            "artifact": null,
            "conditions": [ready_condition(generation, "False", reason, message)],
        }
    });
    Ok(api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?)
}

/// Creates the source and publishes `artifact` on it in one go.
pub async fn create_source_with_artifact(
    client: &Client,
    ns: &str,
    kind: SourceKind,
    name: &str,
    artifact: &Artifact,
) -> Result<DynamicObject> {
    create_source(client, ns, kind, name).await?;
    set_artifact(client, ns, kind, name, artifact).await
}

/// Reads `ns/name` of `kind`.
pub async fn get_source(
    client: &Client,
    ns: &str,
    kind: SourceKind,
    name: &str,
) -> Result<DynamicObject> {
    Ok(api(client, ns, kind).get(name).await?)
}

fn ready_condition(generation: i64, status: &str, reason: &str, message: &str) -> Value {
    json!({
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": now_rfc3339(),
    })
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}
