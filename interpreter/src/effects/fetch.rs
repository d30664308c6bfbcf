//! `FetchArtifact`: download, verify and unpack, through the artifact cache (SPEC §17).
//! [`crate::effects::local`] maps the download's errors to the core's `FetchError`.

use opm_core::{FetchError, InputKind};

use super::{Cx, within};

pub(crate) async fn run(cx: &mut Cx<'_>, url: &str, digest: &str) -> InputKind {
    let work = async {
        let fetched = cx.rt.local.fetch(url, digest).await;
        InputKind::ArtifactFetched {
            result: fetched.map(|(fetched, observed)| {
                cx.rt.metrics.record_fetch(cx.key, observed);
                fetched
            }),
        }
    };
    within(cx.bound, work, timed_out).await
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::ArtifactFetched {
        result: Err(FetchError::Timeout),
    }
}
