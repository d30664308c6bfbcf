//! What starts an attempt besides its own requeue: the rules both the live controllers and
//! the simulated world follow, so `opm-sim` and the operator agree on what happens next.
//!
//! * a dependency turning Ready re-triggers its dependents at once (SPEC §14):
//!   [`retriggers_dependents`], per status write, with [`crate::deps::names`] to find them;
//! * a ServiceAccount appearing re-triggers, [`SERVICE_ACCOUNT_SETTLE`] later, the releases
//!   of its namespace stalled for want of one (SPEC §15): [`waits_for_service_account`];
//! * a release going away re-triggers the deleting releases it depended on that wait for
//!   their dependents (SPEC §32): [`waits_for_dependents`];
//! * a release's metric series are forgotten when an attempt ends with it gone (SPEC §21):
//!   [`forgets_series`];
//! * a release's metadata starts an attempt only through the parts in [`AttemptTrigger`]
//!   (generation, deletion, the on-demand annotation; finalizers and every annotation while
//!   deleting), so a status write never triggers a reconcile of its own: [`starts_attempt`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::ReleaseStatus;
use crate::constants::{REQUESTED_AT_ANNOTATION, conditions};
use crate::reason::Reason;

/// How long after a ServiceAccount appears the releases waiting for it are retried. A new
/// ServiceAccount usually comes with the RoleBinding that gives it its rights a moment
/// later; an attempt before that would stall as forbidden for 30 minutes.
pub const SERVICE_ACCOUNT_SETTLE: Duration = Duration::from_secs(3);

/// Whether the status has `Ready=True`.
pub fn is_ready(status: Option<&ReleaseStatus>) -> bool {
    ready_condition(status).is_some_and(|c| c.status == "True")
}

fn ready_condition(status: Option<&ReleaseStatus>) -> Option<&crate::api::Condition> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == conditions::READY)
}

/// Whether a status write re-triggers the release's dependents: it turned the release
/// Ready (SPEC §14 "a dependency turning Ready"). `was_ready` is [`is_ready`] of the status
/// the write replaced. A write that keeps it Ready, or any status that is not `Ready=True`
/// (a suspended release, a soft failure), re-triggers nothing: those dependents are still
/// blocked and come back on their own requeue.
pub fn retriggers_dependents(was_ready: bool, written: Option<&ReleaseStatus>) -> bool {
    !was_ready && is_ready(written)
}

/// Whether a release with this status waits for a ServiceAccount to appear: its Ready
/// reason is `ImpersonationFailed` (no ServiceAccount to apply as) or `DeletionSAMissing`
/// (none to delete as). A ServiceAccount appearing in its namespace re-triggers it, after
/// [`SERVICE_ACCOUNT_SETTLE`]; other releases of the namespace are not disturbed.
pub fn waits_for_service_account(status: Option<&ReleaseStatus>) -> bool {
    ready_condition(status).is_some_and(|c| {
        c.reason == Reason::ImpersonationFailed.as_str()
            || c.reason == Reason::DeletionSAMissing.as_str()
    })
}

/// Whether a release with this status is a deletion waiting for its dependents (SPEC §32):
/// its Ready reason is `DependentsExist`. A dependent going away (its `Delete` event)
/// re-triggers the releases it depended on that wait so, at once.
pub fn waits_for_dependents(status: Option<&ReleaseStatus>) -> bool {
    ready_condition(status).is_some_and(|c| c.reason == Reason::DependentsExist.as_str())
}

/// Whether a release with this status waits for the Platform (SPEC §30): its Ready reason is
/// `PlatformNotReady`. The Platform turning Ready (or getting a new digest) re-triggers it
/// at once, with every release that rendered through the Platform.
pub fn waits_for_platform(status: Option<&ReleaseStatus>) -> bool {
    ready_condition(status).is_some_and(|c| c.reason == Reason::PlatformNotReady.as_str())
}

/// Whether an attempt's end forgets the release's metric series (SPEC §21 "series of a
/// deleted release are removed"): it found the release gone, or it removed the finalizer of
/// a deleting release (`Deleted`), after which no attempt follows. Forgotten at the end, so
/// the attempt's own last metrics do not bring the series back.
pub fn forgets_series(found: bool, reason: Reason) -> bool {
    !found || reason == Reason::Deleted
}

/// The parts of a release's metadata whose change starts an attempt. Two copies of a
/// release start an attempt between them when their views differ ([`starts_attempt`]); the
/// live controllers hash the view as their watch predicate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttemptTrigger<'a> {
    uid: Option<&'a str>,
    /// `metadata.generation`: every spec change.
    generation: Option<i64>,
    deleting: bool,
    /// While live: only the on-demand annotation (`reconcile.opmodel.dev/requestedAt`).
    /// While deleting: every annotation (e.g. the orphan annotation) and the finalizers.
    /// Our own finalizer edit while live must not start a second attempt.
    annotations: Annotations<'a>,
    finalizers: Option<&'a [String]>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Annotations<'a> {
    RequestedAt(Option<&'a str>),
    All(Option<&'a BTreeMap<String, String>>),
}

/// The view of `meta` that decides whether a change starts an attempt.
pub fn attempt_trigger(meta: &ObjectMeta) -> AttemptTrigger<'_> {
    let deleting = meta.deletion_timestamp.is_some();
    let annotations = if deleting {
        Annotations::All(meta.annotations.as_ref().filter(|a| !a.is_empty()))
    } else {
        Annotations::RequestedAt(
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(REQUESTED_AT_ANNOTATION))
                .map(String::as_str),
        )
    };
    AttemptTrigger {
        uid: meta.uid.as_deref(),
        generation: meta.generation,
        deleting,
        annotations,
        finalizers: deleting.then(|| meta.finalizers.as_deref().unwrap_or_default()),
    }
}

/// Whether the change of a release's metadata from `before` to `after` starts an attempt.
pub fn starts_attempt(before: &ObjectMeta, after: &ObjectMeta) -> bool {
    attempt_trigger(before) != attempt_trigger(after)
}

#[cfg(test)]
mod tests;
