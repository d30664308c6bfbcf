//! `AwaitTermination` (SPEC §12 `WaitForTermination`): wait on watch events until each
//! deleted object is gone. The core bounds it by its `until` (the attempt's deadline); the
//! wait itself ends [`MARGIN`] earlier so its answer, naming what is left, arrives in time.
//! Overrunning the bound is no error: what was still there is reported.

use opm_core::InputKind;
use opm_core::effect::{Deletion, Impersonation};

use super::{Cx, On, with_client};
use crate::steps::termination::{MARGIN, await_gone};

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    targets: &[Deletion],
    identity: Option<&Impersonation>,
) -> InputKind {
    let wait = cx.bound.saturating_sub(MARGIN);
    let on = On::of(cx.rt, cx.conn.as_deref());
    with_client(
        cx,
        identity,
        |client| await_gone(client, on.resolver, targets, wait),
        |e| (ids(targets), Some(e)),
        |(remaining, error)| InputKind::TerminationAwaited { remaining, error },
        || timed_out(targets),
    )
    .await
}

fn ids(targets: &[Deletion]) -> Vec<opm_core::ResourceId> {
    targets.iter().map(|d| d.id.clone()).collect()
}

/// The answer when it overran its bound.
pub(super) fn timed_out(targets: &[Deletion]) -> InputKind {
    InputKind::TerminationAwaited {
        remaining: ids(targets),
        error: None,
    }
}
