//! `InspectStale` and `Prune`: read the objects a release no longer renders, then delete
//! them with a UID precondition (SPEC §12, §28), as the release's identity.

use opm_core::effect::{Deletion, EffectKind, Impersonation};
use opm_core::input::ObjectResult;
use opm_core::{ApiError, InputKind, ResourceId};

use super::{Cx, On, deadline_error, failed_reads, with_client};

/// GETs each target and reports its uid and labels.
pub(crate) async fn inspect(
    cx: &mut Cx<'_>,
    targets: &[ResourceId],
    identity: Option<&Impersonation>,
) -> InputKind {
    let on = On::of(cx.rt, cx.conn.as_deref());
    with_client(
        cx,
        identity,
        |client| crate::steps::prune::inspect(client, on.resolver, targets),
        |e| failed_reads(targets, e),
        |objects| InputKind::StaleInspected { objects },
        || timed_out_inspect(targets),
    )
    .await
}

/// DELETEs each object in order, continuing past errors.
pub(crate) async fn delete(
    cx: &mut Cx<'_>,
    deletions: &[Deletion],
    identity: Option<&Impersonation>,
) -> InputKind {
    let on = On::of(cx.rt, cx.conn.as_deref());
    with_client(
        cx,
        identity,
        |client| crate::steps::prune::delete(client, on.resolver, deletions),
        |e| failed_deletes(deletions, e),
        |results| InputKind::Pruned { results },
        || timed_out_delete(deletions),
    )
    .await
}

/// Every deletion failed with `e`.
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
