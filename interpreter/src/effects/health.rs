//! `AssessHealth`: each target's JSON and, when asked, its newest pods (SPEC §26), read
//! through the health cache and the managed-object watch.

use opm_core::effect::{EffectKind, HealthTarget, Impersonation};
use opm_core::input::HealthObject;
use opm_core::{ApiError, InputKind};

use super::{Cx, deadline_error, within};

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    targets: &[HealthTarget],
    identity: Option<&Impersonation>,
) -> InputKind {
    let work = async {
        let rt = cx.rt;
        let objects = match rt.clients.for_identity(identity) {
            Ok(client) => {
                let (resolver, watch, cache) = (&rt.resolver, &rt.watch, &rt.health_reads);
                crate::steps::health_read::read(client, resolver, watch, cache, targets).await
            }
            Err(e) => failed(targets, e),
        };
        InputKind::HealthRead { objects }
    };
    within(cx.bound, work, || timed_out(targets)).await
}

/// Every target failed with `e`, no pods read.
fn failed(targets: &[HealthTarget], e: ApiError) -> Vec<HealthObject> {
    targets
        .iter()
        .map(|t| HealthObject {
            id: t.id.clone(),
            result: Err(e.clone()),
            pods: Vec::new(),
        })
        .collect()
}

/// The answer when it overran its bound.
pub(super) fn timed_out(targets: &[HealthTarget]) -> InputKind {
    InputKind::HealthRead {
        objects: failed(targets, deadline_error(EffectKind::AssessHealth)),
    }
}
