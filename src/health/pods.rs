//! Why a workload's pods are not ready, in a user's words ("pod web-7d4 ImagePullBackOff:
//! image not found"). SPEC §26 has the workload's message gain this once it has been
//! `InProgress` for a while, from the newest pods (one bounded LIST the interpreter makes).

use serde_json::Value;

use super::access::{at, condition, str_at};

/// What is wrong with one pod's containers.
pub(super) struct Problem {
    /// The pod itself cannot recover without a change (a crash loop).
    pub fatal: bool,
    pub text: String,
}

/// Waiting reasons a user acts on; `true` = the pod will not get better by waiting.
const WAITING: &[(&str, bool)] = &[
    ("CrashLoopBackOff", true),
    ("ImagePullBackOff", false),
    ("ErrImagePull", false),
    ("InvalidImageName", true),
    ("CreateContainerConfigError", false),
    ("CreateContainerError", false),
    ("RunContainerError", false),
];

const MESSAGE_MAX: usize = 200;

fn short(s: &str) -> String {
    crate::conditions::truncate(s.trim(), MESSAGE_MAX)
}

pub(super) fn container_problem(pod: &Value) -> Option<Problem> {
    for list in ["initContainerStatuses", "containerStatuses"] {
        let Some(statuses) = at(pod, &["status", list]).and_then(Value::as_array) else {
            continue;
        };
        for c in statuses {
            let Some(reason) = str_at(c, &["state", "waiting", "reason"]) else {
                continue;
            };
            if let Some((_, fatal)) = WAITING.iter().find(|(r, _)| *r == reason) {
                let message = str_at(c, &["state", "waiting", "message"]).unwrap_or("");
                let text = if message.is_empty() {
                    reason.to_string()
                } else {
                    format!("{reason}: {}", short(message))
                };
                return Some(Problem {
                    fatal: *fatal,
                    text,
                });
            }
        }
    }
    None
}

/// The first problem among `pods` (newest first), as "pod NAME REASON: message".
pub fn pod_detail(pods: &[Value]) -> Option<String> {
    let name = |p: &Value| str_at(p, &["metadata", "name"]).unwrap_or("?").to_string();
    for p in pods {
        if let Some(problem) = container_problem(p) {
            return Some(format!("pod {} {}", name(p), problem.text));
        }
        if let Some(c) = condition(p, "PodScheduled").filter(|c| c.status == "False") {
            let reason = if c.reason.is_empty() {
                "Unschedulable"
            } else {
                c.reason
            };
            return Some(format!("pod {} {reason}: {}", name(p), short(c.message)));
        }
        if str_at(p, &["status", "phase"]) == Some("Failed") {
            let reason = str_at(p, &["status", "reason"]).unwrap_or("Failed");
            return Some(format!("pod {} {reason}", name(p)));
        }
    }
    None
}
