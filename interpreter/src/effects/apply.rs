//! `Apply`: server-side apply stage by stage as the release's identity (SPEC §19). A
//! client that cannot be built fails the first stage's objects with its error.

use opm_core::effect::{ApplyStage, EffectKind, Impersonation};
use opm_core::input::{AppliedObject, ApplyReport};
use opm_core::{ApiError, InputKind};

use super::{Cx, On, deadline_error, identity_name, within};
use crate::steps::apply::{self as ssa, ApplyCtx};

/// The request as the core wrote it.
struct Request<'a> {
    stages: &'a [ApplyStage],
    field_manager: &'a str,
    force: bool,
    identity: Option<&'a Impersonation>,
}

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    stages: &[ApplyStage],
    field_manager: &str,
    force: bool,
    identity: Option<&Impersonation>,
) -> InputKind {
    let req = Request {
        stages,
        field_manager,
        force,
        identity,
    };
    within(cx.bound, apply(cx, req), || timed_out(stages)).await
}

async fn apply(cx: &mut Cx<'_>, req: Request<'_>) -> InputKind {
    let conn = cx.conn.clone();
    let on = On::of(cx.rt, conn.as_deref());
    let mut report = match on.clients.for_identity(req.identity) {
        Ok(client) => {
            let ctx = ApplyCtx {
                client,
                operator: on.clients.operator(),
                resolver: on.resolver,
                secrets: cx.secrets,
                field_manager: req.field_manager,
                force: req.force,
                live: on.live,
                watch: on.watch,
                identity: identity_name(req.identity),
            };
            ssa::apply(&ctx, req.stages).await
        }
        Err(e) => failed(req.stages, e),
    };
    // SPEC §23: an API error may echo a Secret value.
    for o in &mut report.objects {
        if let Err(e) = &mut o.result {
            cx.secrets.scrub_api_error(e);
        }
    }
    InputKind::Applied { report }
}

/// The first stage's objects all failed with `e` (no later stage was started).
fn failed(stages: &[ApplyStage], e: ApiError) -> ApplyReport {
    ApplyReport {
        objects: stages
            .first()
            .map(|s| {
                s.objects
                    .iter()
                    .map(|o| AppliedObject {
                        id: o.id.clone(),
                        result: Err(e.clone()),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The answer when it overran its bound.
pub(super) fn timed_out(stages: &[ApplyStage]) -> InputKind {
    InputKind::Applied {
        report: failed(stages, deadline_error(EffectKind::Apply)),
    }
}
