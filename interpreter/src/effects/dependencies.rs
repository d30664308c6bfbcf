//! `CheckDependencies`: the `dependsOn` releases, read as the operator (SPEC §14);
//! `ListDependents`: the releases that may depend on a deleting one (SPEC §32).

use opm_core::effect::{EffectKind, HealthTarget, Impersonation};
use opm_core::input::HealthObject;
use opm_core::{InputKind, ReleaseKey, ResourceId};

use super::{Cx, deadline_error, within};

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    namespace: &str,
    refs: &[ReleaseKey],
    objects: &[ResourceId],
    identity: Option<&Impersonation>,
) -> InputKind {
    let rt = cx.rt;
    let work = async {
        let mut result = crate::steps::deps::check(rt.clients.operator(), namespace, refs).await;
        if let Ok(report) = &mut result
            && !objects.is_empty()
        {
            report.objects = read_objects(rt, objects, identity).await;
        }
        InputKind::DependenciesChecked { result }
    };
    within(cx.bound, work, timed_out).await
}

/// Each object a `dependsOn` entry names (SPEC §32), read as the release's identity through
/// the same reads (and cache) as health checks.
async fn read_objects(
    rt: &crate::effects::runtime::Runtime,
    objects: &[ResourceId],
    identity: Option<&Impersonation>,
) -> Vec<HealthObject> {
    // An entry's namespace defaults to the release's; a cluster-scoped kind (a CRD) is
    // read without it. A kind not served (yet) is left as is: the read says it is absent.
    let mut targets: Vec<HealthTarget> = Vec::with_capacity(objects.len());
    for id in objects {
        let mut id = id.clone();
        if let Ok(r) = rt.resolver.resolve(&id.group, &id.version, &id.kind).await
            && !r.namespaced
        {
            id.namespace.clear();
        }
        targets.push(HealthTarget { id, pods: false });
    }
    let reader = identity.map(|i| i.user.clone()).unwrap_or_default();
    match rt.clients.for_identity(identity) {
        Ok(client) => {
            let at = crate::steps::health_read::Readers {
                resolver: &rt.resolver,
                watch: &rt.watch,
                cache: &rt.health_reads,
                reader: &reader,
            };
            let mut read = crate::steps::health_read::read(client, at, &targets).await;
            // Answered under the ids the core asked for.
            for (r, id) in read.iter_mut().zip(objects) {
                r.id = id.clone();
            }
            read
        }
        Err(e) => objects
            .iter()
            .map(|id| HealthObject {
                id: id.clone(),
                result: Err(e.clone()),
                pods: Vec::new(),
            })
            .collect(),
    }
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::DependenciesChecked {
        result: Err(deadline_error(EffectKind::CheckDependencies)),
    }
}

/// `ListDependents`: every release with a `dependsOn`, in every namespace.
pub(crate) async fn dependents(cx: &mut Cx<'_>) -> InputKind {
    let work = async {
        InputKind::DependentsListed {
            result: crate::steps::deps::dependents(cx.rt.clients.operator()).await,
        }
    };
    within(cx.bound, work, timed_out_dependents).await
}

/// The answer of `ListDependents` when it overran its bound.
pub(super) fn timed_out_dependents() -> InputKind {
    InputKind::DependentsListed {
        result: Err(deadline_error(EffectKind::ListDependents)),
    }
}
