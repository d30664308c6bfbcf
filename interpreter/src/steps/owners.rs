//! The ownership read before a first write (SPEC §25), policy-free: for each target report
//! its uid and labels, or that it is absent; the core decides whether the apply may go on.
//!
//! The managed-object watch ([`ObjectWatch`]) answers for objects it holds (they carry our
//! `managed-by` label, so their uuid label is what matters). It only lists labelled
//! objects, so an object it does not hold may still exist unlabelled — `kube-system/coredns`
//! or a ConfigMap someone created by hand — and is read with one metadata GET under the
//! release's identity. Only objects outside the release's inventory are ever asked for, so
//! an unchanged release sends no request here.

use kube::Client;
use opm_core::input::{LiveMeta, LiveObject};
use opm_core::{ApiError, ResourceId};

use crate::kube::discovery::Resolver;
use crate::kube::dynamic;
use crate::kube::object_watch::ObjectWatch;

/// Reads each target's owner labels, in order.
pub async fn inspect(
    client: Client,
    resolver: &Resolver,
    watch: &ObjectWatch,
    targets: &[ResourceId],
) -> Vec<LiveObject> {
    let mut out = Vec::with_capacity(targets.len());
    for id in targets {
        let result = inspect_one(client.clone(), resolver, watch, id).await;
        out.push(LiveObject {
            id: id.clone(),
            result,
        });
    }
    out
}

async fn inspect_one(
    client: Client,
    resolver: &Resolver,
    watch: &ObjectWatch,
    id: &ResourceId,
) -> Result<Option<LiveMeta>, ApiError> {
    // Resolving also starts the kind's watch, so later reads of this kind are local.
    let api = match dynamic::watched_api_for(client, resolver, watch, id).await {
        Ok(api) => api,
        // A kind the server does not serve (yet: a CRD of this render) has no objects.
        Err(ApiError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if let Some(meta) = watch.owner_labels(id) {
        return Ok(Some(meta));
    }
    crate::steps::prune::live_meta(&api, &id.name).await
}
