//! `CheckDependencies`: the `dependsOn` releases, read as the operator (SPEC §14).

use opm_core::effect::EffectKind;
use opm_core::{InputKind, ReleaseKey};

use super::{Cx, deadline_error, within};

pub(crate) async fn run(cx: &mut Cx<'_>, namespace: &str, refs: &[ReleaseKey]) -> InputKind {
    let work = async {
        InputKind::DependenciesChecked {
            result: crate::steps::deps::check(cx.rt.clients.operator(), namespace, refs).await,
        }
    };
    within(cx.bound, work, timed_out).await
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::DependenciesChecked {
        result: Err(deadline_error(EffectKind::CheckDependencies)),
    }
}
