//! From per-object verdicts to `status.health` and the condition messages of SPEC §4
//! ("waiting for N of M resources: Kind/ns/name (why)").

use jiff::Timestamp;

use super::{Assessment, HealthStatus};
use crate::api::{HealthObjectStatus, HealthReport};
use crate::conditions::k8s_time;
use crate::object::ResourceId;

/// At most this many objects are named in `status.health.objects` and in a message.
pub const MAX_NAMED: usize = 10;

/// One assessed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// The object.
    pub id: ResourceId,
    /// Its verdict and why.
    pub assessment: Assessment,
    /// Why its newest pods are not ready, when they were read.
    pub pods: Option<String>,
}

impl Judged {
    fn why(&self) -> String {
        match &self.pods {
            Some(p) => format!("{}; {p}", self.assessment.message),
            None => self.assessment.message.clone(),
        }
    }
}

/// The verdict of a release's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// What goes into `status.health`.
    pub report: HealthReport,
    /// Every object `Current` (vacuously true for none).
    pub all_current: bool,
    /// At least one object `Failed`.
    pub any_failed: bool,
    total: usize,
    /// Non-current objects, worst first, with why.
    pending: Vec<(HealthStatus, String)>,
}

fn display(id: &ResourceId) -> String {
    if id.namespace.is_empty() {
        format!("{}/{}", id.kind, id.name)
    } else {
        format!("{}/{}/{}", id.kind, id.namespace, id.name)
    }
}

/// Summarises `judged`; `previous` gives each still-unhealthy object its `since`.
pub fn summarize(judged: &[Judged], previous: Option<&HealthReport>, now: Timestamp) -> Summary {
    let mut report = HealthReport {
        checked_at: Some(k8s_time(now)),
        total: judged.len() as i64,
        ..HealthReport::default()
    };
    for j in judged {
        match j.assessment.status {
            HealthStatus::Current => report.current += 1,
            HealthStatus::InProgress => report.in_progress += 1,
            HealthStatus::Failed => report.failed += 1,
            HealthStatus::Unknown => report.unknown += 1,
        }
    }
    let mut bad: Vec<&Judged> = judged
        .iter()
        .filter(|j| j.assessment.status != HealthStatus::Current)
        .collect();
    // Worst first (Failed, Unknown, InProgress), then by identity: stable across attempts.
    bad.sort_by(|a, b| {
        (a.assessment.status, a.id.identity()).cmp(&(b.assessment.status, b.id.identity()))
    });
    let since_of = |j: &Judged| {
        previous
            .and_then(|p| {
                p.objects.iter().find(|o| {
                    o.group == j.id.group
                        && o.kind == j.id.kind
                        && o.namespace == j.id.namespace
                        && o.name == j.id.name
                        && o.status == j.assessment.status.as_str()
                })
            })
            .and_then(|o| o.since.clone())
            .unwrap_or_else(|| k8s_time(now))
    };
    report.objects = bad
        .iter()
        .take(MAX_NAMED)
        .map(|j| HealthObjectStatus {
            group: j.id.group.clone(),
            kind: j.id.kind.clone(),
            namespace: j.id.namespace.clone(),
            name: j.id.name.clone(),
            status: j.assessment.status.as_str().to_string(),
            message: crate::conditions::truncate(
                &crate::conditions::without_control(&j.why()),
                1024,
            ),
            since: Some(since_of(j)),
        })
        .collect();
    Summary {
        all_current: bad.is_empty(),
        any_failed: report.failed > 0,
        total: judged.len(),
        pending: bad
            .iter()
            .map(|j| {
                (
                    j.assessment.status,
                    format!("{} ({})", display(&j.id), j.why()),
                )
            })
            .collect(),
        report,
    }
}

/// When the object `id` entered its current unhealthy status, per `report`.
pub fn unhealthy_since(report: Option<&HealthReport>, id: &ResourceId) -> Option<Timestamp> {
    let o = report?.objects.iter().find(|o| {
        o.group == id.group && o.kind == id.kind && o.namespace == id.namespace && o.name == id.name
    })?;
    if o.status == HealthStatus::Current.as_str() {
        return None;
    }
    o.since.as_ref().map(|t| t.0)
}

impl Summary {
    fn list(&self, only: Option<HealthStatus>) -> String {
        let items: Vec<&str> = self
            .pending
            .iter()
            .filter(|(s, _)| only.is_none_or(|o| o == *s))
            .map(|(_, t)| t.as_str())
            .collect();
        let mut out = items
            .iter()
            .take(MAX_NAMED)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        if items.len() > MAX_NAMED {
            out.push_str(&format!(" and {} more", items.len() - MAX_NAMED));
        }
        out
    }

    /// `Ready=Unknown/Progressing` while waiting.
    pub fn waiting_message(&self) -> String {
        format!(
            "waiting for {} of {} resources: {}",
            self.pending.len(),
            self.total,
            self.list(None)
        )
    }

    /// `HealthCheckFailed` because something failed.
    pub fn failed_message(&self) -> String {
        let failed = self
            .pending
            .iter()
            .filter(|(s, _)| *s == HealthStatus::Failed)
            .count();
        format!(
            "{failed} of {} resources failed: {}",
            self.total,
            self.list(Some(HealthStatus::Failed))
        )
    }

    /// `HealthCheckFailed` because the wait ran out.
    pub fn timeout_message(&self, timeout: std::time::Duration) -> String {
        format!(
            "not healthy within {} of the apply: {} of {} resources not ready: {}",
            crate::duration::format(timeout),
            self.pending.len(),
            self.total,
            self.list(None)
        )
    }
}
