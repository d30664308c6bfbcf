//! `PatchStatus`: one merge patch to the status subresource (a finishing effect: the core
//! bounds it apart from the deadline).

use opm_core::InputKind;
use opm_core::api::ReleaseStatus;
use opm_core::effect::EffectKind;
use serde_json::Value;

use super::{Cx, deadline_error, within, wrote};

pub(crate) async fn run(cx: &mut Cx<'_>, patch: &Value, status: &ReleaseStatus) -> InputKind {
    let work = async {
        let patched = crate::steps::status::patch(cx.rt.clients.operator(), cx.key, patch).await;
        let result = wrote(cx.rt, cx.key, patched);
        if result.is_ok() {
            cx.rt.metrics.observe_status(cx.key, status);
        }
        InputKind::StatusPatched { result }
    };
    within(cx.bound, work, timed_out).await
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::StatusPatched {
        result: Err(deadline_error(EffectKind::PatchStatus)),
    }
}
