//! `CheckServiceAccount`: does the release's ServiceAccount exist (read as the operator)?

use opm_core::InputKind;
use opm_core::effect::EffectKind;

use super::{Cx, deadline_error, within};

pub(crate) async fn run(cx: &mut Cx<'_>, namespace: &str, name: &str) -> InputKind {
    let work = async {
        // In a remote cluster, as the kubeconfig's identity (SPEC §31).
        let client = super::On::of(cx.rt, cx.conn.as_deref()).clients.operator();
        InputKind::ServiceAccountChecked {
            result: crate::steps::service_account::exists(client, namespace, name).await,
        }
    };
    within(cx.bound, work, timed_out).await
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::ServiceAccountChecked {
        result: Err(deadline_error(EffectKind::CheckServiceAccount)),
    }
}
