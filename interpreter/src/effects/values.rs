//! `ReadValues` (SPEC §27): the `valuesFrom` objects and the module's credentials Secret,
//! as the release's identity. Secret strings come back as digests; an API error is
//! scrubbed of any Secret value it echoes (SPEC §23).

use opm_core::InputKind;
use opm_core::api::values_from::ValuesReference;
use opm_core::effect::{EffectKind, Impersonation};

use super::{Cx, deadline_error, within};

/// The request as the core wrote it.
struct Request<'a> {
    namespace: &'a str,
    refs: &'a [ValuesReference],
    credentials: Option<&'a str>,
    identity: Option<&'a Impersonation>,
}

pub(crate) async fn run(
    cx: &mut Cx<'_>,
    namespace: &str,
    refs: &[ValuesReference],
    credentials: Option<&str>,
    identity: Option<&Impersonation>,
) -> InputKind {
    let req = Request {
        namespace,
        refs,
        credentials,
        identity,
    };
    within(cx.bound, read(cx, req), || timed_out(refs, credentials)).await
}

async fn read(cx: &mut Cx<'_>, req: Request<'_>) -> InputKind {
    let client = cx.rt.clients.for_identity(req.identity);
    let secrets = &mut *cx.secrets;
    let max_bytes = cx.rt.config.max_values_bytes;
    let mut seen = Vec::new();
    let mut read = crate::steps::values_from::read(
        client,
        req.namespace,
        req.refs,
        req.credentials,
        secrets,
        max_bytes,
        &mut seen,
    )
    .await;
    // What this read saw, for the values watch (SPEC §27): it opens for these objects
    // under this identity, from these versions.
    let user = req.identity.map(|i| i.user.clone()).unwrap_or_default();
    for (kind, name, version) in seen {
        cx.rt.values_reads.record(
            crate::steps::values_from::ReadKey {
                user: user.clone(),
                kind,
                namespace: req.namespace.to_string(),
                name,
            },
            version,
        );
    }
    if let InputKind::ValuesRead {
        values,
        credentials,
    } = &mut read
    {
        for e in values
            .iter_mut()
            .filter_map(|r| r.as_mut().err())
            .chain(credentials.iter_mut().filter_map(|r| r.as_mut().err()))
        {
            secrets.scrub_api_error(e);
        }
    }
    read
}

/// The answer when it overran its bound.
pub(super) fn timed_out(refs: &[ValuesReference], credentials: Option<&str>) -> InputKind {
    let e = deadline_error(EffectKind::ReadValues);
    InputKind::ValuesRead {
        values: refs.iter().map(|_| Err(e.clone())).collect(),
        credentials: credentials.map(|_| Err(e)),
    }
}
