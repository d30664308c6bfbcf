//! `AddFinalizer` and `RemoveFinalizer`: one guarded merge patch of the release.

use opm_core::InputKind;
use opm_core::effect::EffectKind;

use super::{Cx, deadline_error, within, wrote};

/// Adds `finalizer`, guarded by the metadata the attempt started from.
pub(crate) async fn add(cx: &mut Cx<'_>, finalizer: &str) -> InputKind {
    let work = async {
        let done = crate::steps::finalizer::set(
            cx.rt.clients.operator(),
            cx.key,
            finalizer,
            true,
            cx.known,
        );
        InputKind::FinalizerAdded {
            result: wrote(cx.rt, cx.key, done.await),
        }
    };
    within(cx.bound, work, timed_out_add).await
}

/// Removes `finalizer` (a finishing effect: the core bounds it apart from the deadline).
pub(crate) async fn remove(cx: &mut Cx<'_>, finalizer: &str) -> InputKind {
    let work = async {
        let done =
            crate::steps::finalizer::set(cx.rt.clients.operator(), cx.key, finalizer, false, None);
        InputKind::FinalizerRemoved {
            result: wrote(cx.rt, cx.key, done.await),
        }
    };
    within(cx.bound, work, timed_out_remove).await
}

/// The answer when it overran its bound.
pub(super) fn timed_out_add() -> InputKind {
    InputKind::FinalizerAdded {
        result: Err(deadline_error(EffectKind::AddFinalizer)),
    }
}

/// The answer when it overran its bound.
pub(super) fn timed_out_remove() -> InputKind {
    InputKind::FinalizerRemoved {
        result: Err(deadline_error(EffectKind::RemoveFinalizer)),
    }
}
