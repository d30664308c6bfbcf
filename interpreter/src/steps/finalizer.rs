//! Adding and removing our finalizer without clobbering anyone else's: every edit is a JSON
//! patch that first `test`s the `resourceVersion` it was computed from, so a concurrent
//! change makes the patch fail and the edit is recomputed from a fresh read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{DynamicObject, Patch, PatchParams};
use opm_core::{ApiError, ReleaseKey};
use serde_json::{Value, json};

use crate::{kube::api_error, kube::releases};

const ATTEMPTS: usize = 5;

/// Adds `finalizer` when `present`, else removes it; a no-op when the list already is
/// so (or, removing, when the release is gone).
pub(crate) async fn set(
    client: Client,
    key: &ReleaseKey,
    finalizer: &str,
    present: bool,
    known: Option<&ObjectMeta>,
) -> Result<Option<String>, ApiError> {
    edit(client, key, known, |list| {
        let has = list.iter().any(|f| f == finalizer);
        match (has, present) {
            (false, true) => Some(
                list.iter()
                    .cloned()
                    .chain([finalizer.to_string()])
                    .collect(),
            ),
            (true, false) => Some(list.iter().filter(|f| *f != finalizer).cloned().collect()),
            _ => None,
        }
    })
    .await
}

/// `known`: the release as the attempt saw it; its version is tried first (no GET), and a
/// stale one only fails the guarded patch's `test`, after which the release is read.
async fn edit(
    client: Client,
    key: &ReleaseKey,
    known: Option<&ObjectMeta>,
    change: impl Fn(&[String]) -> Option<Vec<String>>,
) -> Result<Option<String>, ApiError> {
    let api = releases::dynamic_api(client, key);
    let mut last = None;
    let mut known = known.filter(|m| m.resource_version.is_some()).cloned();
    for _ in 0..ATTEMPTS {
        let current = match known.take() {
            Some(metadata) => DynamicObject {
                types: None,
                metadata,
                data: Value::Null,
            },
            None => match api.get_opt(&key.name).await {
                Ok(Some(obj)) => obj,
                Ok(None) => {
                    return Err(ApiError::NotFound {
                        message: format!("{} {} not found", key.kind.as_str(), key.display()),
                    });
                }
                Err(e) => return Err(api_error::from_kube(&e)),
            },
        };
        let list = current.metadata.finalizers.clone().unwrap_or_default();
        let Some(next) = change(&list) else {
            return Ok(None);
        };
        let rv = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        let patch = guarded_patch(&rv, next);
        match api
            .patch(
                &key.name,
                &PatchParams::default(),
                &Patch::<Value>::Json(patch),
            )
            .await
        {
            Ok(written) => return Ok(written.metadata.resource_version),
            // A failed `test` (someone edited the object meanwhile) comes back as 409 or 422.
            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 409 || s.code == 422) => {
                last = Some(api_error::from_kube(&e));
            }
            Err(e) => return Err(api_error::from_kube(&e)),
        }
    }
    Err(last.unwrap_or(ApiError::Conflict {
        message: "finalizer edit kept conflicting".into(),
    }))
}

/// `test` the resourceVersion, then set the whole list (an empty list removes the field).
fn guarded_patch(resource_version: &str, next: Vec<String>) -> json_patch::Patch {
    let ops = if next.is_empty() {
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "remove", "path": "/metadata/finalizers"}
        ])
    } else {
        json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "add", "path": "/metadata/finalizers", "value": next}
        ])
    };
    serde_json::from_value(ops).expect("static JSON patch shape")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_tests_the_resource_version_first() {
        let p = serde_json::to_value(guarded_patch("42", vec!["a".into(), "b".into()])).unwrap();
        assert_eq!(p[0]["op"], "test");
        assert_eq!(p[0]["value"], "42");
        assert_eq!(p[1]["value"], json!(["a", "b"]));
        let p = serde_json::to_value(guarded_patch("7", vec![])).unwrap();
        assert_eq!(p[1]["op"], "remove");
    }
}
