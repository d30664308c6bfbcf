//! The status write: the core's RFC 7386 patch, sent once to the status subresource of the
//! release's kind (SPEC §10). Status writes never bump `generation`.

use kube::Client;
use kube::api::{Patch, PatchParams};
use opm_core::{ApiError, ReleaseKey};
use serde_json::{Value, json};

use crate::{kube::api_error, kube::releases};

/// Returns the release's new `resourceVersion`.
pub(crate) async fn patch(
    client: Client,
    key: &ReleaseKey,
    patch: &Value,
) -> Result<Option<String>, ApiError> {
    let api = releases::dynamic_api(client, key);
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": patch })),
    )
    .await
    .map(|written| written.metadata.resource_version)
    .map_err(|e| api_error::from_kube(&e))
}
