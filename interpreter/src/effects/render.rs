//! `Render`: `cue export` of the request, one fair turn of the render gate a `cue` run
//! (SPEC §24; renders of one module version may share a run, see
//! [`crate::cue::render::batch`]). `cue` sees the real Secret strings; the answer carries their digests again
//! (SPEC §23, §27). [`crate::effects::local`] maps the renderer's errors to the core's `RenderError`.

use opm_core::effect::RenderRequest;
use opm_core::input::RenderOutput;
use opm_core::{InputKind, RenderError};
use std::sync::Arc;

use super::{Cx, within};
use crate::cue::render::RenderGate;
use crate::ops::admission::{Admission, Slot};

pub(crate) async fn run(cx: &mut Cx<'_>, request: &RenderRequest) -> InputKind {
    let bound = cx.bound;
    within(bound, render(cx, request), timed_out).await
}

async fn render(cx: &mut Cx<'_>, request: &RenderRequest) -> InputKind {
    let (rt, key, secrets) = (cx.rt, cx.key, &mut *cx.secrets);
    let started = std::time::Instant::now();
    // SPEC §27: `cue` sees the real Secret strings behind the digests in the values, and
    // the credentials behind their digest; the core and the trace never do.
    let request = secrets.restore_request(request);
    let credentials = match &request {
        RenderRequest::Module {
            credentials: Some(d),
            ..
        } => secrets.credentials(d).map(|b| (d.clone(), b.to_vec())),
        _ => None,
    };
    let deadline = started + cx.bound;
    let rendered = rt
        .local
        .render_fair(
            &request,
            credentials,
            &Gate(&rt.render_gate),
            &key.namespace,
            deadline,
        )
        .await;
    rt.metrics.record_render(key, started.elapsed());
    let result = match rendered {
        Ok((mut value, bytes, platform)) => {
            if !platform.is_empty() {
                rt.local.opm.note_release(key);
            }
            secrets.redact_render(&mut value);
            secrets.redact_render_strings(&mut value);
            let cluster_scoped = rt
                .resolver
                .cluster_scoped(&opm_core::desired::exported_objects(&value))
                .await;
            Ok(RenderOutput {
                value,
                cluster_scoped,
                bytes,
                platform,
            })
        }
        Err(e) => {
            if matches!(e, RenderError::PlatformNotReady { .. }) {
                rt.local.opm.note_release(key);
            }
            Err(secrets.scrub_render_error(e))
        }
    };
    InputKind::Rendered { result }
}

/// The runtime's render gate as the renderer's [`RenderGate`]: one fair turn of
/// `--max-concurrent-renders` per `cue` run, at most half of them for one namespace.
pub(crate) struct Gate<'a>(pub(crate) &'a Arc<Admission>);

impl RenderGate for Gate<'_> {
    type Turn = Slot;

    fn turn(&self, namespace: &str) -> impl Future<Output = Slot> + Send {
        self.0.acquire(namespace)
    }
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::Rendered {
        result: Err(RenderError::Timeout {
            message: "render exceeded the attempt deadline".into(),
        }),
    }
}
