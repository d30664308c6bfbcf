//! `CheckDependencies`: the `dependsOn` releases, read as the operator (SPEC §14);
//! `ListDependents`: the releases that may depend on a deleting one (SPEC §32).

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
