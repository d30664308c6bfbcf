//! `AssessHealth`: each target's JSON and, when asked, its newest pods (SPEC §26), read
//! through the health cache and the managed-object watch.

use opm_core::effect::{EffectKind, HealthTarget, Impersonation};
use opm_core::input::HealthObject;
use opm_core::{ApiError, InputKind};

use super::{Cx, On, deadline_error, with_client};

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    targets: &[HealthTarget],
    identity: Option<&Impersonation>,
) -> InputKind {
    let on = On::of(cx.rt, cx.conn.as_deref());
    let reader = identity.map(|i| i.user.clone()).unwrap_or_default();
    let reader = reader.as_str();
    with_client(
        cx,
        identity,
        |client| {
            let at = crate::steps::health_read::Readers {
                resolver: on.resolver,
                watch: on.watch,
                cache: on.health_reads,
                reader,
            };
            crate::steps::health_read::read(client, at, targets)
        },
        |e| failed(targets, e),
        |objects| InputKind::HealthRead { objects },
        || timed_out(targets),
    )
    .await
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
