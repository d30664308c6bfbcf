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
    Ok(DependencyReport {
        releases,
        objects: Vec::new(),
    })
}

/// Releases read per page of the cluster-wide list: what the list holds in memory at once,
/// whatever the fleet's size.
const PAGE: u32 = 250;

/// Every release of both kinds, in every namespace, that has a `dependsOn`: the ones a
/// deleting release may have to wait for (SPEC §32), with their own `dependsOn` so that the
/// core sees cycles. Listed as the operator, page by page (only the snapshots are kept),
/// whatever label selector its watches use: a dependent another operator instance
/// reconciles still needs its dependency.
pub async fn dependents(client: Client) -> Result<DependencyReport, ApiError> {
    let mut releases = Vec::new();
    list_paged(
        Api::<ModuleRelease>::all(client.clone()),
        ReleaseObject::ModuleRelease,
        &mut releases,
    )
    .await?;
    list_paged(
        Api::<Release>::all(client),
        ReleaseObject::Release,
        &mut releases,
    )
    .await?;
    Ok(DependencyReport {
        releases,
        objects: Vec::new(),
    })
}

/// Lists `api` page by page, adding a snapshot of each release that has a `dependsOn`.
async fn list_paged<K>(
    api: Api<K>,
    wrap: fn(K) -> ReleaseObject,
    into: &mut Vec<ReleaseSnapshot>,
) -> Result<(), ApiError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let page = api.list(&lp).await.map_err(|e| api_error::from_kube(&e))?;
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        into.extend(
            page.items
                .into_iter()
                .map(wrap)
                .filter(|o| !o.common().depends_on.is_empty())
                .map(|o| snapshot(&o)),
        );
        if token.is_none() {
            return Ok(());
        }
    }
}
