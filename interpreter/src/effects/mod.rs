//! The executors: one module per effect kind (or pair of kinds that share their inputs).
//! Each holds a `run` that carries out its effect and answers with the core's
//! [`InputKind`], the mapping of its failures to the core's typed errors, and, next to it,
//! `timed_out`: the answer it gives when it overruns the bound the core set
//! ([`opm_core::Attempt::bound`]). Executors decide nothing; the core reads the answer.
//!
//! The driver's dispatch (`driver::execute`) is one line per effect kind.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opm_core::effect::{EffectKind, Impersonation};
use opm_core::input::LiveObject;
use opm_core::{ApiError, InputKind, ReleaseKey, ResourceId};

use crate::cue::secrets::SecretTable;
use crate::effects::runtime::Runtime;

pub(crate) mod apply;
pub(crate) mod dependencies;
pub(crate) mod drift;
pub(crate) mod fetch;
pub(crate) mod finalizer;
pub(crate) mod health;
pub mod local;
pub(crate) mod owners;
pub(crate) mod prune;
pub(crate) mod render;
pub(crate) mod runtime;
pub(crate) mod service_account;
pub(crate) mod source;
pub(crate) mod status;
pub(crate) mod termination;
pub(crate) mod unpersisted;
pub(crate) mod values;

/// What one awaited effect runs with.
pub(crate) struct Cx<'a> {
    pub rt: &'a Runtime,
    pub key: &'a ReleaseKey,
    /// The attempt's Secret strings behind their digests (SPEC §23, §27).
    pub secrets: &'a mut SecretTable,
    /// The release's metadata as read at the attempt's start: the finalizer patch's guard.
    pub known: Option<&'a ObjectMeta>,
    /// How long the effect may take ([`opm_core::Attempt::bound`]).
    pub bound: Duration,
}

/// Runs `work` for at most `bound`; past it, answers with `timed_out()`.
pub(crate) async fn within(
    bound: Duration,
    work: impl Future<Output = InputKind>,
    timed_out: impl FnOnce() -> InputKind,
) -> InputKind {
    tokio::time::timeout(bound, work)
        .await
        .unwrap_or_else(|_| timed_out())
}

/// The shape of an effect that reads or writes its objects as the release's identity: `step`
/// runs with that identity's client; when the client cannot be built, `failed` says what
/// each object got instead. `answer` makes the input of either, and past the bound the
/// answer is `timed_out()`.
pub(crate) async fn with_client<T, Fut: Future<Output = T>>(
    cx: &Cx<'_>,
    identity: Option<&Impersonation>,
    step: impl FnOnce(kube::Client) -> Fut,
    failed: impl FnOnce(ApiError) -> T,
    answer: impl FnOnce(T) -> InputKind,
    timed_out: impl FnOnce() -> InputKind,
) -> InputKind {
    let work = async {
        answer(match cx.rt.clients.for_identity(identity) {
            Ok(client) => step(client).await,
            Err(e) => failed(e),
        })
    };
    within(cx.bound, work, timed_out).await
}

/// The error an effect of `kind` reports when it overran its bound.
pub(crate) fn deadline_error(kind: EffectKind) -> ApiError {
    ApiError::Timeout {
        message: format!("{kind:?} exceeded the attempt deadline"),
    }
}

/// Every target's read failed with `e` (a client that cannot be built, or a timeout).
pub(crate) fn failed_reads(targets: &[ResourceId], e: ApiError) -> Vec<LiveObject> {
    targets
        .iter()
        .map(|id| LiveObject {
            id: id.clone(),
            result: Err(e.clone()),
        })
        .collect()
}

/// The user requests are sent as: the impersonated one, or empty for the operator's own.
pub(crate) fn identity_name(identity: Option<&Impersonation>) -> &str {
    identity.map_or("", |i| i.user.as_str())
}

/// Records the release version one of our writes produced (see [`crate::kube::observed`]).
pub(crate) fn wrote(
    rt: &Runtime,
    key: &ReleaseKey,
    result: Result<Option<String>, ApiError>,
) -> Result<(), ApiError> {
    match &result {
        Ok(Some(rv)) => rt.observed.wrote(key, Some(rv)),
        // Nothing was written.
        Ok(None) => {}
        // The write may have landed: the next attempt reads the release.
        Err(_) => rt.observed.wrote(key, None),
    }
    result.map(|_| ())
}

#[cfg(test)]
mod tests;
