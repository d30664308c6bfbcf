//! Who the dry-run runs as: the user, or with `--as-release` the release's ServiceAccount
//! exactly as the operator impersonates it.

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::Api;
use opm_core::ReleaseObject;

use super::DiffOpts;
use crate::connect::Session;
use crate::error::{CliError, Result};
use crate::releases;

/// The client and the name of the identity the dry-run runs as.
pub(super) async fn check_identity(
    s: &Session,
    obj: &ReleaseObject,
    opts: &DiffOpts,
) -> Result<(Client, String)> {
    if !opts.as_release {
        let who = match &s.config.auth_info.impersonate {
            Some(u) => u.clone(),
            None => "your kubeconfig user".into(),
        };
        return Ok((s.client.clone(), who));
    }
    let key = obj.key();
    let sa = opm_core::impersonation::effective_service_account(
        obj.common().service_account_name.as_deref(),
        opts.service_account.as_deref(),
    )
    .ok_or_else(|| {
        CliError::Usage(format!(
            "{} has no spec.serviceAccountName: pass --service-account NAME (the operator's --default-service-account)",
            releases::describe(&key)
        ))
    })?;
    let found = Api::<ServiceAccount>::namespaced(s.client.clone(), &key.namespace)
        .get_opt(&sa)
        .await
        .map_err(|e| CliError::api(format!("reading ServiceAccount {}/{sa}", key.namespace), &e))?;
    if found.is_none() {
        return Err(CliError::Other(format!(
            "ServiceAccount {}/{sa} not found: the operator would stall with ImpersonationFailed",
            key.namespace
        )));
    }
    let who = opm_core::impersonation::impersonation(&key.namespace, &sa).user;
    Ok((s.impersonating(&key.namespace, &sa)?, who))
}
