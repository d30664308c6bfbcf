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
pub mod clusters;
pub(crate) mod dependencies;
pub(crate) mod drift;
pub(crate) mod fetch;
pub(crate) mod finalizer;
pub(crate) mod health;
pub(crate) mod kube_config;
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
    /// The remote cluster the effect's objects are in (SPEC §31); `None`: this one.
    pub conn: Option<std::sync::Arc<clusters::ClusterConn>>,
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
    let on = On::of(cx.rt, cx.conn.as_deref());
    let work = async {
        answer(match on.clients.for_identity(identity) {
            Ok(client) => step(client).await,
            Err(e) => failed(e),
        })
    };
    within(cx.bound, work, timed_out).await
}

/// The cluster an effect's objects are read and written in, with what the executors use
/// there: the operator's own cluster, or a remote one (SPEC §31).
pub(crate) struct On<'a> {
    pub clients: &'a crate::kube::impersonate::Clients,
    pub resolver: &'a crate::kube::discovery::Resolver,
    pub live: &'a crate::kube::live_cache::LiveCache,
    pub watch: &'a crate::kube::object_watch::ObjectWatch,
    pub health_reads: &'a crate::steps::health_read::HealthCache,
}

impl<'a> On<'a> {
    /// `conn`'s cluster, or the operator's own when `None`.
    pub(crate) fn of(rt: &'a Runtime, conn: Option<&'a clusters::ClusterConn>) -> Self {
        match conn {
            Some(c) => Self {
                clients: &c.clients,
                resolver: &c.resolver,
                live: &c.live,
                watch: &c.watch,
                health_reads: &c.health_reads,
            },
            None => Self {
                clients: &rt.clients,
                resolver: &rt.resolver,
                live: &rt.live,
                watch: &rt.watch,
                health_reads: &rt.health_reads,
            },
        }
    }
}

/// The answer of an object effect none of whose requests could be sent: every object
/// gets `e` (a remote cluster whose client could not be built, SPEC §31). `None` for
/// effects that do not target a cluster.
pub(crate) fn failed_for(effect: &opm_core::Effect, e: &ApiError) -> Option<InputKind> {
    use opm_core::Effect as E;
    let mut answer = match effect {
        E::CheckServiceAccount { .. } => service_account::timed_out(),
        E::CheckDrift { objects, .. } => drift::timed_out(objects),
        E::Apply { stages, .. } => apply::timed_out(stages),
        E::InspectOwners { targets, .. } => owners::timed_out(targets),
        E::InspectStale { targets, .. } => prune::timed_out_inspect(targets),
        E::Prune { deletions, .. } => prune::timed_out_delete(deletions),
        E::AssessHealth { targets, .. } => health::timed_out(targets),
        E::AwaitTermination { targets, .. } => InputKind::TerminationAwaited {
            remaining: targets.iter().map(|d| d.id.clone()).collect(),
            error: Some(e.clone()),
        },
        _ => return None,
    };
    map_errors(&mut answer, |_| Some(e.clone()));
    Some(answer)
}

/// Replaces each error of `answer` for which `f` gives a replacement.
pub(crate) fn map_errors(answer: &mut InputKind, f: impl Fn(&ApiError) -> Option<ApiError>) {
    let one = |r: &mut ApiError| {
        if let Some(n) = f(r) {
            *r = n;
        }
    };
    match answer {
        InputKind::ServiceAccountChecked { result: Err(e) } => one(e),
        InputKind::DriftChecked { report } => report
            .errors
            .iter_mut()
            .filter_map(|o| o.result.as_mut().err())
            .for_each(one),
        InputKind::Applied { report } => report
            .objects
            .iter_mut()
            .filter_map(|o| o.result.as_mut().err())
            .for_each(one),
        InputKind::OwnersInspected { objects } | InputKind::StaleInspected { objects } => objects
            .iter_mut()
            .filter_map(|o| o.result.as_mut().err())
            .for_each(one),
        InputKind::Pruned { results } => results
            .iter_mut()
            .filter_map(|o| o.result.as_mut().err())
            .for_each(one),
        InputKind::HealthRead { objects } => objects
            .iter_mut()
            .filter_map(|o| o.result.as_mut().err())
            .for_each(one),
        InputKind::TerminationAwaited { error: Some(e), .. } => one(e),
        _ => {}
    }
}

/// After an effect on a remote cluster whose last request got no HTTP answer: its
/// status-less errors are that cluster being unreachable (SPEC §31).
pub(crate) fn unreachable_errors(answer: &mut InputKind) {
    map_errors(answer, |e| match e {
        ApiError::Unavailable { message }
        | ApiError::Timeout { message }
        | ApiError::Other { code: 0, message } => Some(ApiError::Unreachable {
            message: message.clone(),
        }),
        _ => None,
    });
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
