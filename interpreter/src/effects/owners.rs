//! `InspectOwners`: each target's labels before its first write, for the ownership check
//! of SPEC §25 (from the managed-object watch when it holds the object).

use opm_core::effect::{EffectKind, Impersonation};
use opm_core::{InputKind, ResourceId};

use super::{Cx, On, deadline_error, failed_reads, with_client};

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    targets: &[ResourceId],
    identity: Option<&Impersonation>,
) -> InputKind {
    let on = On::of(cx.rt, cx.conn.as_deref());
    with_client(
        cx,
        identity,
        |client| crate::steps::owners::inspect(client, on.resolver, Some(on.watch), targets),
        |e| failed_reads(targets, e),
        |objects| InputKind::OwnersInspected { objects },
        || timed_out(targets),
    )
    .await
}

/// The answer when it overran its bound.
pub(super) fn timed_out(targets: &[ResourceId]) -> InputKind {
    InputKind::OwnersInspected {
        objects: failed_reads(targets, deadline_error(EffectKind::InspectOwners)),
    }
}
