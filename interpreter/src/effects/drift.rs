//! `CheckDrift`: server-side dry-runs as the release's identity, compared with the live
//! objects (SPEC §19). A client that cannot be built fails every object with its error.

use opm_core::effect::{EffectKind, Impersonation};
use opm_core::input::{DriftReport, ObjectResult};
use opm_core::object::DesiredObject;
use opm_core::{ApiError, InputKind};

use super::{Cx, On, deadline_error, identity_name, within};
use crate::steps::drift::{self as check, DriftCtx};

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    objects: &[DesiredObject],
    field_manager: &str,
    identity: Option<&Impersonation>,
) -> InputKind {
    let bound = cx.bound;
    within(bound, drift(cx, objects, field_manager, identity), || {
        timed_out(objects)
    })
    .await
}

async fn drift(
    cx: &mut Cx<'_>,
    objects: &[DesiredObject],
    field_manager: &str,
    identity: Option<&Impersonation>,
) -> InputKind {
    let rt = cx.rt;
    let conn = cx.conn.clone();
    let on = On::of(rt, conn.as_deref());
    let mut report = match on.clients.for_identity(identity) {
        Ok(client) => {
            let ctx = DriftCtx {
                client,
                resolver: on.resolver,
                secrets: cx.secrets,
                live: on.live,
                watch: on.watch,
                stats: &rt.drift_stats,
                field_manager,
                identity: identity_name(identity),
            };
            check::check(&ctx, objects).await
        }
        Err(e) => failed(objects, e),
    };
    // SPEC §23: an API error may echo a Secret value.
    for o in &mut report.errors {
        if let Err(e) = &mut o.result {
            cx.secrets.scrub_api_error(e);
        }
    }
    InputKind::DriftChecked { report }
}

/// Every object failed with `e`.
fn failed(objects: &[DesiredObject], e: ApiError) -> DriftReport {
    DriftReport {
        drifted: Vec::new(),
        errors: objects
            .iter()
            .map(|o| ObjectResult {
                id: o.id.clone(),
                result: Err(e.clone()),
            })
            .collect(),
        details: Vec::new(),
    }
}

/// The answer when it overran its bound.
pub(super) fn timed_out(objects: &[DesiredObject]) -> InputKind {
    InputKind::DriftChecked {
        report: failed(objects, deadline_error(EffectKind::CheckDrift)),
    }
}
