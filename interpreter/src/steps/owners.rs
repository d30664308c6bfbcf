//! The ownership read before a first write (SPEC §25), policy-free: for each target report
//! its uid and labels, or that it is absent; the core decides whether the apply may go on.
//!
//! The managed-object watch ([`ObjectWatch`]) answers for objects it holds (they carry our
//! `managed-by` label, so their uuid label is what matters). It only lists labelled
//! objects, so an object it does not hold may still exist unlabelled — `kube-system/coredns`
//! or a ConfigMap someone created by hand — and is read with one metadata GET under the
//! release's identity. Only objects outside the release's inventory are ever asked for, so
//! an unchanged release sends no request here.

use std::collections::BTreeMap;

use kube::Client;
use opm_core::input::{LiveMeta, LiveObject};
use opm_core::{ApiError, ResourceId};

use crate::kube::discovery::Resolver;
use crate::kube::object_watch::ObjectWatch;
use crate::kube::{api_error, dynamic};

/// Reads each target's owner labels, in order: from `watch` when it holds the object, else
/// with one metadata GET (always, without a watch).
pub(crate) async fn inspect(
    client: Client,
    resolver: &Resolver,
    watch: Option<&ObjectWatch>,
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
    watch: Option<&ObjectWatch>,
    id: &ResourceId,
) -> Result<Option<LiveMeta>, ApiError> {
    // Resolving through the watch also starts the kind's watch, so later reads of this
    // kind are local.
    let api = match watch {
        Some(watch) => dynamic::watched_api_for(client, resolver, watch, id).await,
        None => dynamic::api_for(client, resolver, id).await,
    };
    let api = match api {
        Ok(api) => api,
        // A kind the server does not serve (yet: a CRD of this render) has no objects.
        Err(ApiError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    if let Some(meta) = watch.and_then(|w| w.owner_labels(id)) {
        return Ok(Some(meta));
    }
    live_meta(&api, &id.name).await
}

/// One metadata GET: the uid and labels of `name`, or `None` when it does not exist. The
/// ownership read (SPEC §25) and the prune guard (§9) both decide from exactly this.
pub(crate) async fn live_meta(
    api: &kube::Api<kube::api::DynamicObject>,
    name: &str,
) -> Result<Option<LiveMeta>, ApiError> {
    match api.get_metadata_opt(name).await {
        Ok(Some(obj)) => Ok(Some(LiveMeta {
            uid: obj.metadata.uid.unwrap_or_default(),
            labels: obj
                .metadata
                .labels
                .unwrap_or_default()
                .into_iter()
                .collect::<BTreeMap<_, _>>(),
        })),
        Ok(None) => Ok(None),
        Err(e) => Err(api_error::from_kube(&e)),
    }
}
