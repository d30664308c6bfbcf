//! Reading a Flux source (`source.toolkit.fluxcd.io/v1` unless the ref says otherwise) as
//! the operator, through the dynamic API so no Flux types are compiled in (SPEC §16).

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use opm_core::effect::SourceLocator;
use opm_core::input::{SourceArtifact, SourceError};
use serde_json::Value;

use crate::kube::api_error;

/// The plural resource name of a Flux source kind.
pub fn plural(kind: &str) -> String {
    match kind {
        "OCIRepository" => "ocirepositories".into(),
        "GitRepository" => "gitrepositories".into(),
        "Bucket" => "buckets".into(),
        other => format!("{}s", other.to_lowercase()),
    }
}

/// The API resource for a source kind at `api_version`.
pub fn api_resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = opm_core::object::split_api_version(api_version);
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, &version, kind),
        &plural(kind),
    )
}

/// Reads the source and returns its advertised artifact.
pub async fn resolve(client: Client, src: &SourceLocator) -> Result<SourceArtifact, SourceError> {
    let ar = api_resource(&src.api_version, &src.kind);
    let api: Api<DynamicObject> = Api::namespaced_with(client, &src.namespace, &ar);
    match api.get_opt(&src.name).await {
        Ok(Some(obj)) => artifact_of(&obj.data),
        Ok(None) => Err(SourceError::NotFound),
        // The source kind is not served at all (Flux CRDs absent): the source cannot exist.
        Err(e) if api_error::is_not_found(&e) => Err(SourceError::NotFound),
        Err(e) => Err(SourceError::Api {
            error: api_error::from_kube(&e),
        }),
    }
}

/// Ready = condition `Ready=True`; then `status.artifact` must carry url, revision, digest.
pub fn artifact_of(data: &Value) -> Result<SourceArtifact, SourceError> {
    let status = data.get("status");
    let ready = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    let is_ready = ready.and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True");
    if !is_ready {
        let message = ready
            .and_then(|c| c.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("no Ready condition")
            .to_string();
        return Err(SourceError::NotReady { message });
    }
    let artifact = status.and_then(|s| s.get("artifact"));
    let field = |name: &str| {
        artifact
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    match (field("url"), field("revision"), field("digest")) {
        (Some(url), Some(revision), Some(digest)) => Ok(SourceArtifact {
            url,
            revision,
            digest,
        }),
        _ => Err(SourceError::NoArtifact),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ready_source_with_artifact() {
        let d = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
            "artifact": {"url": "http://a/b.tgz", "revision": "v1@sha256:ab", "digest": "sha256:ab"}}});
        assert_eq!(artifact_of(&d).unwrap().url, "http://a/b.tgz");
    }

    #[test]
    fn not_ready_carries_the_source_message_and_missing_artifact_is_named() {
        let d = json!({"status": {"conditions": [{"type": "Ready", "status": "False", "message": "pulling"}]}});
        assert_eq!(
            artifact_of(&d),
            Err(SourceError::NotReady {
                message: "pulling".into()
            })
        );
        let d = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(artifact_of(&d), Err(SourceError::NoArtifact));
        assert_eq!(plural("OCIRepository"), "ocirepositories");
    }
}
