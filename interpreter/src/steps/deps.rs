//! The dependency check's read: every release of both kinds in the namespace, plus each
//! cross-namespace ref that exists, as snapshots the core judges (SPEC §14).

use kube::Client;
use kube::api::{Api, ListParams};
use opm_core::api::{ModuleRelease, Release};
use opm_core::deps::snapshot;
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
