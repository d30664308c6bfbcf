//! Does a ServiceAccount exist? Read as the operator: the API server would accept an
//! impersonated ServiceAccount that does not exist (group bindings), so existence is checked
//! explicitly (SPEC §15).

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::Api;
use opm_core::ApiError;

use crate::kube::api_error;

pub(crate) async fn exists(client: Client, namespace: &str, name: &str) -> Result<bool, ApiError> {
    Api::<ServiceAccount>::namespaced(client, namespace)
        .get_metadata_opt(name)
        .await
        .map(|o| o.is_some())
        .map_err(|e| api_error::from_kube(&e))
}
