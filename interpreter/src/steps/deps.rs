//! The dependency check's read: every release of both kinds in the namespace, plus each
//! cross-namespace ref that exists, as snapshots the core judges (SPEC §14).

use kube::Client;
use kube::api::{Api, ListParams};
use opm_core::api::{ModuleRelease, Release, ReleaseStatus};
use opm_core::input::{DependencyReport, ReleaseSnapshot};
use opm_core::{ApiError, ReleaseKey, ReleaseObject};

use crate::{kube::api_error, kube::releases};

/// Lists both kinds in `namespace` and reads every ref of `refs` outside it.
pub(crate) async fn check(
    client: Client,
    namespace: &str,
    refs: &[ReleaseKey],
) -> Result<DependencyReport, ApiError> {
    let lp = ListParams::default();
    let mrs = Api::<ModuleRelease>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .map_err(|e| api_error::from_kube(&e))?;
    let rels = Api::<Release>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .map_err(|e| api_error::from_kube(&e))?;
    let mut releases: Vec<ReleaseSnapshot> = mrs
        .items
        .into_iter()
        .map(ReleaseObject::ModuleRelease)
        .chain(rels.items.into_iter().map(ReleaseObject::Release))
        .map(|o| snapshot(&o))
        .collect();
    for r in refs.iter().filter(|r| r.namespace != namespace) {
        match releases::read(client.clone(), r).await {
            Ok(Some(o)) => releases.push(snapshot(&o)),
            Ok(None) => {}
            Err(e) => return Err(api_error::from_kube(&e)),
        }
    }
    Ok(DependencyReport { releases })
}

/// A release as the dependency check sees it.
pub(crate) fn snapshot(obj: &ReleaseObject) -> ReleaseSnapshot {
    let key = obj.key();
    let status: Option<&ReleaseStatus> = obj.status();
    let ready = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone())
        .unwrap_or_default();
    let depends_on = obj
        .common()
        .depends_on
        .iter()
        .map(|d| opm_core::deps::key_of(&key, d))
        .collect();
    ReleaseSnapshot {
        generation: obj.meta().generation.unwrap_or_default(),
        observed_generation: status.map(|s| s.observed_generation).unwrap_or_default(),
        ready,
        depends_on,
        key,
    }
}
