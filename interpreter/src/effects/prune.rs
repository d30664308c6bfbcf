//! `InspectStale` and `Prune`: read the objects a release no longer renders, then delete
//! them with a UID precondition (SPEC §12, §28), as the release's identity.

use opm_core::effect::{Deletion, EffectKind, Impersonation};
use opm_core::input::ObjectResult;
use opm_core::{ApiError, InputKind, ResourceId};

use super::{Cx, deadline_error, failed_reads, within};

/// GETs each target and reports its uid and labels.
pub(crate) async fn inspect(
    cx: &mut Cx<'_>,
    targets: &[ResourceId],
    identity: Option<&Impersonation>,
) -> InputKind {
    let work = async {
        let rt = cx.rt;
        let objects = match rt.clients.for_identity(identity) {
            Ok(client) => crate::steps::prune::inspect(client, &rt.resolver, targets).await,
            Err(e) => failed_reads(targets, e),
        };
        InputKind::StaleInspected { objects }
    };
    within(cx.bound, work, || timed_out_inspect(targets)).await
}

/// DELETEs each object in order, continuing past errors.
pub(crate) async fn delete(
    cx: &mut Cx<'_>,
    deletions: &[Deletion],
    identity: Option<&Impersonation>,
) -> InputKind {
    let work = async {
        let rt = cx.rt;
        let results = match rt.clients.for_identity(identity) {
            Ok(client) => crate::steps::prune::delete(client, &rt.resolver, deletions).await,
            Err(e) => failed_deletes(deletions, e),
        };
        InputKind::Pruned { results }
    };
    within(cx.bound, work, || timed_out_delete(deletions)).await
}

fn failed_deletes(deletions: &[Deletion], e: ApiError) -> Vec<ObjectResult> {
    deletions
        .iter()
        .map(|d| ObjectResult {
            id: d.id.clone(),
            result: Err(e.clone()),
        })
        .collect()
}

/// The answer when it overran its bound.
pub(super) fn timed_out_inspect(targets: &[ResourceId]) -> InputKind {
    InputKind::StaleInspected {
        objects: failed_reads(targets, deadline_error(EffectKind::InspectStale)),
    }
}

/// The answer when it overran its bound.
pub(super) fn timed_out_delete(deletions: &[Deletion]) -> InputKind {
    InputKind::Pruned {
        results: failed_deletes(deletions, deadline_error(EffectKind::Prune)),
    }
}
