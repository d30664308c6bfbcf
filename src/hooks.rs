//! Hooks (SPEC §32): rendered objects annotated `releases.opmodel.dev/hook` run in a phase
//! of their own — `pre-apply` before anything else of the release is written, `post-apply`
//! once everything else is healthy, `pre-delete` before deletion prunes anything.
//!
//! Everything here is pure: which objects are hooks (and whether the annotation is one the
//! operator knows), the cap on their number, what the live object of a hook says about it
//! (done, waiting, failed, to be applied, to be recreated) and the messages. The flow that
//! applies, deletes and reads them is `machine/hooks.rs`.
//!
//! Choices SPEC leaves open, as a platform team used to Helm or Argo CD hooks expects them:
//! - The annotation stays on the live object (so `kubectl get -o yaml`, `tree` and the
//!   deletion path can see the phase); the operator adds
//!   `releases.opmodel.dev/hook-render-digest`, the render digest the hook ran for, and a
//!   live hook under another digest is applied again (a Job deleted with a UID precondition
//!   and created anew).
//! - A `pre-delete` hook must be a Job: the deletion path never renders (the source may be
//!   gone), so the Job is created with the release, suspended (`spec.suspend: true`), and
//!   deletion resumes it. Any other kind under `pre-delete` is a `RenderFailed` stall.
//! - A failed Job at the current digest is run again (recreated) by the backoff retry that
//!   follows its `HookFailed`, not by an earlier watch event: Argo CD's
//!   `BeforeHookCreation`, paced by SPEC §5.
//! - A hook not done within the release's `timeout` of its start (a Job's
//!   `status.startTime`, else the object's creation) is `HookFailed`.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::health::{Assessment, HealthStatus};
use crate::object::{DesiredObject, ResourceId};
use crate::outcome::Failure;
use crate::reason::Reason;

/// `releases.opmodel.dev/hook`: the phase a rendered object runs in.
pub const HOOK_ANNOTATION: &str = "releases.opmodel.dev/hook";
/// The render digest a hook was applied for, stamped by the operator.
pub const HOOK_DIGEST_ANNOTATION: &str = "releases.opmodel.dev/hook-render-digest";
/// SPEC §24 default of `--max-hooks`: hooks one render may carry.
pub const DEFAULT_MAX_HOOKS: u64 = 32;

/// When a hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookPhase {
    /// Before anything else of the release is applied.
    PreApply,
    /// After everything else is applied and healthy.
    PostApply,
    /// On deletion, before anything is pruned.
    PreDelete,
}

impl HookPhase {
    /// Every phase, in the order of the annotation's documentation.
    pub const ALL: [HookPhase; 3] = [
        HookPhase::PreApply,
        HookPhase::PostApply,
        HookPhase::PreDelete,
    ];

    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            HookPhase::PreApply => "pre-apply",
            HookPhase::PostApply => "post-apply",
            HookPhase::PreDelete => "pre-delete",
        }
    }

    /// The phase an annotation value names; exact and case-sensitive.
    pub fn parse(s: &str) -> Option<HookPhase> {
        HookPhase::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl std::fmt::Display for HookPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn annotation<'a>(manifest: &'a Value, key: &str) -> Option<&'a Value> {
    manifest.pointer("/metadata/annotations")?.get(key)
}

/// The raw annotation value of an object (rendered or live), if any.
pub(crate) fn raw_phase(manifest: &Value) -> Option<String> {
    annotation(manifest, HOOK_ANNOTATION).map(|v| match v.as_str() {
        Some(s) => s.to_string(),
        None => v.to_string(),
    })
}

/// The phase of an object (rendered or live); `None` when it is no hook or the value is
/// unknown (a rendered object with an unknown value never gets past [`extract`]).
pub fn phase_of(manifest: &Value) -> Option<HookPhase> {
    raw_phase(manifest).and_then(|s| HookPhase::parse(&s))
}

/// Whether `id` is a `batch` Job.
pub fn is_job(id: &ResourceId) -> bool {
    id.group == "batch" && id.kind == "Job"
}

/// The digest a live hook was applied for.
pub fn live_digest(live: &Value) -> Option<&str> {
    annotation(live, HOOK_DIGEST_ANNOTATION).and_then(Value::as_str)
}

/// A tenant's value, quoted and cut to 64 characters (a long value must not flood a
/// condition).
fn quote_short(raw: &str) -> String {
    let cut: String = raw.chars().take(64).collect();
    if cut.len() < raw.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

/// Checks the hooks of a render and prepares them: an unknown phase, a `pre-delete` hook
/// that is not a Job, or more than `max_hooks` hooks is a `RenderFailed` stall naming the
/// object (or the count and the cap). Each hook is stamped with `render_digest`; a
/// `pre-delete` Job is created suspended.
pub fn extract(
    objects: &mut [DesiredObject],
    max_hooks: u64,
    render_digest: &str,
) -> Result<(), Failure> {
    let mut count: u64 = 0;
    for o in objects.iter() {
        let Some(raw) = raw_phase(&o.manifest) else {
            continue;
        };
        let phase = HookPhase::parse(&raw).ok_or_else(|| {
            Failure::stalled(
                Reason::RenderFailed,
                format!(
                    "{}: annotation {HOOK_ANNOTATION}: {} is not one of pre-apply, post-apply, pre-delete",
                    o.id.display(),
                    quote_short(&raw)
                ),
            )
        })?;
        if phase == HookPhase::PreDelete && !is_job(&o.id) {
            return Err(Failure::stalled(
                Reason::RenderFailed,
                format!(
                    "{}: annotation {HOOK_ANNOTATION}: pre-delete is only for a Job (batch/v1): \
                     deletion resumes the Job it created suspended",
                    o.id.display()
                ),
            ));
        }
        count += 1;
    }
    if count > max_hooks {
        return Err(Failure::stalled(
            Reason::RenderFailed,
            format!("rendered {count} hooks; the cap is {max_hooks} (--max-hooks)"),
        ));
    }
    for o in objects.iter_mut() {
        let Some(phase) = phase_of(&o.manifest) else {
            continue;
        };
        if let Some(a) = o
            .manifest
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.insert(
                HOOK_DIGEST_ANNOTATION.to_string(),
                Value::String(render_digest.to_string()),
            );
        }
        if phase == HookPhase::PreDelete
            && let Some(m) = o.manifest.as_object_mut()
        {
            let spec = m
                .entry("spec")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(s) = spec.as_object_mut() {
                s.insert("suspend".to_string(), Value::Bool(true));
            }
        }
    }
    Ok(())
}

/// The hooks of `phase` among the rendered objects, in render order.
pub fn of_phase(objects: &[DesiredObject], phase: HookPhase) -> Vec<&DesiredObject> {
    objects
        .iter()
        .filter(|o| phase_of(&o.manifest) == Some(phase))
        .collect()
}

/// Whether a rendered object is applied in the main apply: everything but `pre-apply` and
/// `post-apply` hooks (a `pre-delete` Job is created, suspended, with the release).
pub(crate) fn in_main_apply(o: &DesiredObject) -> bool {
    !matches!(
        phase_of(&o.manifest),
        Some(HookPhase::PreApply | HookPhase::PostApply)
    )
}

/// What one read of a hook says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Current at this digest (a Job: `Complete`).
    Done,
    /// Absent, or applied for another render: apply it.
    Apply,
    /// A Job to delete (with this uid) and create anew: another render's, or failed and
    /// its retry is due.
    Recreate {
        /// The uid of the live Job, the deletion's precondition.
        uid: String,
    },
    /// A `pre-delete` Job still suspended: resume it (uid as precondition).
    Resume {
        /// The uid of the live Job.
        uid: String,
    },
    /// Running; why, in the health rules' words.
    Waiting(String),
    /// Failed, or not done within the timeout: the message says which.
    Failed(String),
}

/// What decides a verdict besides the object.
#[derive(Clone, Debug)]
pub(crate) struct Judging<'a> {
    /// This render's digest.
    pub render_digest: &'a str,
    /// The attempt's clock.
    pub now: Timestamp,
    /// The release's `timeout`: a hook not done this long after its start failed.
    pub timeout: Duration,
    /// The backoff after a `HookFailed` has passed: a failed Job is run again.
    pub retry_due: bool,
    /// The read is the one right after this attempt wrote the hooks: nothing is applied
    /// again, whatever it shows (an object read back unchanged is waited for).
    pub after_write: bool,
}

fn ts(v: Option<&Value>) -> Option<Timestamp> {
    v?.as_str()?.parse().ok()
}

/// When the hook started: a Job's `status.startTime` (reset when a suspended Job is
/// resumed), else its creation.
pub fn started(live: &Value) -> Option<Timestamp> {
    ts(live.pointer("/status/startTime"))
        .or_else(|| ts(live.pointer("/metadata/creationTimestamp")))
}

fn uid(live: &Value) -> String {
    live.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn suspended(live: &Value) -> bool {
    live.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
}

/// The verdict on a `pre-apply` or `post-apply` hook from its live JSON (`None`: absent)
/// and that JSON's health assessment.
pub(crate) fn judge_apply_phase(
    id: &ResourceId,
    live: Option<&Value>,
    assessment: &Assessment,
    j: &Judging<'_>,
) -> Verdict {
    let Some(live) = live else {
        return if j.after_write {
            Verdict::Waiting("not found".to_string())
        } else {
            Verdict::Apply
        };
    };
    if live_digest(live) != Some(j.render_digest) {
        // Read back before the write shows (a watch cache behind): never the old run's
        // verdict.
        if j.after_write {
            return Verdict::Waiting("not yet updated".to_string());
        }
        return if is_job(id) {
            Verdict::Recreate { uid: uid(live) }
        } else {
            Verdict::Apply
        };
    }
    let verdict = judge_running(live, assessment, j);
    match verdict {
        Verdict::Failed(_) if j.retry_due && !j.after_write && is_job(id) => {
            Verdict::Recreate { uid: uid(live) }
        }
        v => v,
    }
}

/// The verdict on a `pre-delete` Job of the inventory (`None`: absent, nothing to run).
pub(crate) fn judge_pre_delete(
    live: Option<&Value>,
    assessment: &Assessment,
    j: &Judging<'_>,
) -> Verdict {
    let Some(live) = live else {
        return Verdict::Done;
    };
    if suspended(live) {
        return if j.after_write {
            Verdict::Waiting("resuming".to_string())
        } else {
            Verdict::Resume { uid: uid(live) }
        };
    }
    judge_running(live, assessment, j)
}

fn judge_running(live: &Value, assessment: &Assessment, j: &Judging<'_>) -> Verdict {
    match assessment.status {
        HealthStatus::Current => Verdict::Done,
        HealthStatus::Failed => Verdict::Failed(assessment.message.clone()),
        HealthStatus::InProgress | HealthStatus::Unknown => {
            let start = started(live).unwrap_or(j.now);
            let waited = Duration::try_from(j.now.duration_since(start)).unwrap_or(Duration::ZERO);
            if waited >= j.timeout {
                Verdict::Failed(format!(
                    "not done within the timeout ({}): {}",
                    crate::duration::format(j.timeout),
                    assessment.message
                ))
            } else {
                Verdict::Waiting(assessment.message.clone())
            }
        }
    }
}

/// The `HookFailed` message: every failed hook of the phase, named.
pub(crate) fn failed_message(phase: HookPhase, failed: &[(ResourceId, String)]) -> String {
    let parts: Vec<String> = failed
        .iter()
        .map(|(id, why)| format!("{} ({why})", id.display()))
        .collect();
    format!(
        "{phase} hook failed: {}; the rest of the {phase} phase is not applied",
        parts.join(", ")
    )
}

/// The `Progressing` message while hooks run.
pub(crate) fn waiting_message(phase: HookPhase, waiting: &[(ResourceId, String)]) -> String {
    let parts: Vec<String> = waiting
        .iter()
        .map(|(id, why)| format!("{} ({why})", id.display()))
        .collect();
    format!(
        "waiting for {} {phase} hook(s): {}",
        waiting.len(),
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests;
