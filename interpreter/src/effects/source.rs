//! `ResolveSource`: the Flux source's artifact, from the watch when it holds the source,
//! else one GET as the operator.

use opm_core::effect::{EffectKind, SourceLocator};
use opm_core::{InputKind, SourceError};

use super::{Cx, deadline_error, within};

pub(crate) async fn run(cx: &mut Cx<'_>, src: &SourceLocator) -> InputKind {
    let work = async {
        let watched = cx
            .rt
            .observed
            .source(&src.api_version, &src.kind, &src.namespace, &src.name);
        InputKind::SourceResolved {
            result: match watched {
                Some(watched) => crate::steps::source::artifact_of(&watched.data),
                None => crate::steps::source::resolve(cx.rt.clients.operator(), src).await,
            },
        }
    };
    within(cx.bound, work, timed_out).await
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::SourceResolved {
        result: Err(SourceError::Api {
            error: deadline_error(EffectKind::ResolveSource),
        }),
    }
}
