//! SPEC §26, the reading half of the health wait: which objects are read, and the verdicts
//! of one read (with a second read of a workload's pods when it is failing or slow). What
//! the verdicts decide is `health_wait.rs`.

use std::time::Duration;

use crate::api::HealthCheckRef;
use crate::effect::HealthTarget;
use crate::health::{self, Assessment, HealthStatus, Judged};
use crate::input::HealthObject;
use crate::object::ResourceId;
use crate::outcome::Failure;
use crate::reason::Reason;

use super::{Attempt, add};

/// A workload `InProgress` this long has its newest pods read for the message (SPEC §26).
pub(super) const POD_DETAIL_AFTER: Duration = Duration::from_secs(30);

/// SPEC §26: a `healthChecks` entry is confined like every other reference: another
/// namespace is a stall `CrossNamespaceRefDenied` unless `--allow-cross-namespace-refs`
/// (else a tenant could read another tenant's objects into its own status). The entries
/// are also read under the release's effective identity, as everything it applies.
pub(super) fn confine(
    checks: &[HealthCheckRef],
    namespace: &str,
    allow_cross_namespace: bool,
) -> Result<(), Failure> {
    if allow_cross_namespace {
        return Ok(());
    }
    match checks
        .iter()
        .find(|h| !h.namespace.is_empty() && h.namespace != namespace)
    {
        Some(h) => Err(Failure::stalled(
            Reason::CrossNamespaceRefDenied,
            format!(
                "cross-namespace health check of {} {}/{} is not allowed (--allow-cross-namespace-refs is off)",
                h.kind, h.namespace, h.name
            ),
        )),
        None => Ok(()),
    }
}

/// One object's verdict: its assessment under `rules` and, when not healthy, its pods.
pub(super) fn judge(o: &HealthObject, rules: &health::HealthRules) -> Judged {
    let assessment = match &o.result {
        Ok(Some(v)) => health::assess(v, rules),
        Ok(None) => Assessment {
            status: HealthStatus::InProgress,
            message: "not found".to_string(),
        },
        Err(e) => Assessment {
            status: HealthStatus::Unknown,
            message: format!("reading it failed: {e}"),
        },
    };
    let pods = (assessment.status != HealthStatus::Current)
        .then(|| health::pod_detail(&o.pods))
        .flatten();
    Judged {
        id: o.id.clone(),
        assessment,
        pods,
    }
}

impl Attempt {
    /// Everything whose health is read: applied objects and `healthChecks` entries.
    pub(super) fn health_ids(&self) -> Vec<ResourceId> {
        // Hooks are judged by their phase (SPEC §32), not by the health wait.
        let mut ids: Vec<ResourceId> = self
            .ctx
            .desired
            .iter()
            .filter(|d| crate::hooks::phase_of(&d.manifest).is_none())
            .map(|d| d.id.clone())
            .collect();
        for h in &self.ctx.common.health_checks {
            let (group, version) = match h.api_version.rsplit_once('/') {
                Some((g, v)) => (g.to_string(), v.to_string()),
                None => (String::new(), h.api_version.clone()),
            };
            let namespace = if h.namespace.is_empty() && h.kind != "Namespace" {
                self.ctx.key.namespace.clone()
            } else {
                h.namespace.clone()
            };
            let id = ResourceId {
                group,
                kind: h.kind.clone(),
                namespace,
                name: h.name.clone(),
                version,
            };
            if !ids.iter().any(|i| i.identity() == id.identity()) {
                ids.push(id);
            }
        }
        ids
    }

    /// Whether `id` is read at all: Secrets never are (their data must not reach a trace),
    /// the kinds that are `Current` once applied need not be, unless an expression judges
    /// them.
    pub(super) fn reads(&self, id: &ResourceId) -> bool {
        if id.group.is_empty() && id.kind == "Secret" {
            return false;
        }
        health::needs_assessment(&id.group, &id.kind)
            || self
                .ctx
                .common
                .health_check_exprs
                .iter()
                .any(|e| e.kind == id.kind && health::group_of(&e.api_version) == id.group)
    }

    pub(super) fn unhealthy_long_enough(&self, id: &ResourceId) -> bool {
        health::has_pods(&id.group, &id.kind)
            && health::unhealthy_since(self.ctx.persisted.health.as_ref(), id)
                .is_some_and(|since| add(since, POD_DETAIL_AFTER) <= self.now)
    }

    /// The verdicts to decide on. The second read (`pods_read`) replaces the first read's
    /// verdicts for the objects it read again; the first lists every object the wait is
    /// about, those not read counting as healthy once applied and those missing as unknown.
    pub(super) fn merge_judged(&mut self, pods_read: bool, fresh: Vec<Judged>) -> Vec<Judged> {
        if pods_read && !self.ctx.judged.is_empty() {
            let mut all = std::mem::take(&mut self.ctx.judged);
            for j in fresh {
                if let Some(slot) = all.iter_mut().find(|a| a.id == j.id) {
                    *slot = j;
                }
            }
            return all;
        }
        let verdict = |id: ResourceId, status, message: &str| Judged {
            id,
            assessment: Assessment {
                status,
                message: message.to_string(),
            },
            pods: None,
        };
        let mut all = Vec::new();
        for id in self.health_ids() {
            if !self.reads(&id) {
                all.push(verdict(id, HealthStatus::Current, "applied"));
            } else if let Some(j) = fresh.iter().find(|j| j.id.identity() == id.identity()) {
                all.push(j.clone());
            } else {
                all.push(verdict(id, HealthStatus::Unknown, "not reported"));
            }
        }
        all
    }

    /// A failed workload, or one waiting past the bound, is explained by its pods: the
    /// objects to read again with their pods.
    pub(super) fn pods_to_read(&self, judged: &[Judged]) -> Vec<HealthTarget> {
        judged
            .iter()
            .filter(|j| {
                health::has_pods(&j.id.group, &j.id.kind)
                    && j.pods.is_none()
                    && match j.assessment.status {
                        HealthStatus::Failed => true,
                        HealthStatus::InProgress => self.unhealthy_long_enough(&j.id),
                        _ => false,
                    }
            })
            .map(|j| HealthTarget {
                id: j.id.clone(),
                pods: true,
            })
            .collect()
    }
}
