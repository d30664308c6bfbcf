//! Facts an attempt gathers: the observed release, then digests, objects and results.

use std::time::Duration;

use serde_json::Value;

use crate::api::{
    InventoryEntry, ModuleRef, ReleaseCommon, ReleaseStatus, SourceRef, SourceStatus,
};
use crate::backoff::{DEFAULT_INTERVAL, DEFAULT_TIMEOUT, MAX_INTERVAL, MAX_TIMEOUT, MIN_INTERVAL};
use crate::conditions::Conditions;
use crate::constants::{FINALIZER, ORPHAN_ANNOTATION, REQUESTED_AT_ANNOTATION};
use crate::effect::{Deletion, Impersonation};
use crate::object::{DesiredObject, ReleaseKey, ReleaseObject, ResourceId};
use crate::prune::PruneFailure;
use crate::status::Activity;

/// Where the configuration comes from: the only per-kind difference.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum SourceSpec {
    Module {
        module: ModuleRef,
        values: Option<Value>,
        values_from: Vec<crate::api::values_from::ValuesReference>,
    },
    Package {
        source_ref: SourceRef,
        path: String,
    },
}

impl Default for SourceSpec {
    fn default() -> Self {
        SourceSpec::Module {
            module: ModuleRef::default(),
            values: None,
            values_from: Vec::new(),
        }
    }
}

/// Digests known so far (empty = unknown).
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Digests {
    pub source: String,
    pub config: String,
    pub render: String,
    pub inventory: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Ctx {
    pub key: ReleaseKey,
    pub generation: i64,
    pub common: ReleaseCommon,
    pub spec: SourceSpec,
    pub persisted: ReleaseStatus,
    pub has_finalizer: bool,
    pub deleting: bool,
    pub requested_at: Option<String>,
    pub orphan_annotation: Option<String>,
    pub interval: Duration,
    pub timeout: Duration,
    pub uuid: String,
    pub service_account: Option<String>,
    pub identity: Option<Impersonation>,
    pub conds: Conditions,
    pub step: &'static str,
    pub digests: Digests,
    pub source_status: Option<SourceStatus>,
    pub artifact_url: String,
    pub desired: Vec<DesiredObject>,
    pub entries: Vec<InventoryEntry>,
    pub stale: Vec<InventoryEntry>,
    pub apply_ok: Activity,
    pub prune_ok: Activity,
    pub drift_ok: Activity,
    pub counts: (u64, u64, u64),
    pub prune_ran: bool,
    pub prune_targets: Vec<ResourceId>,
    /// Objects read before their first write (SPEC §25).
    pub owner_targets: Vec<ResourceId>,
    /// Prune targets marked `prune: disabled`: orphaned, not deleted (SPEC §28).
    pub orphan_targets: Vec<ResourceId>,
    pub deletions: Vec<Deletion>,
    pub prune_failures: Vec<PruneFailure>,
    pub pruned: u64,
    /// This attempt's apply succeeded: the status records it even when health then waits
    /// or fails (SPEC §26: the wait runs from the apply).
    pub applied: bool,
    /// When this attempt's apply answered: the start of its health wait.
    pub applied_at: Option<jiff::Timestamp>,
    /// Verdicts of the first health read, kept while the pods of some are read.
    pub judged: Vec<crate::health::Judged>,
    /// The health report to commit.
    pub health: Option<crate::api::HealthReport>,
    /// The metrics of a health exit, pushed with the others.
    pub health_metrics: Vec<crate::effect::Metric>,
    /// The ServiceAccount was found to exist before `valuesFrom` was read (SPEC §27), so
    /// step 12 needs no second check.
    pub sa_checked: bool,
    /// The remote cluster the release's objects live in (SPEC §31); `None`: this one.
    pub cluster: Option<crate::remote::RemoteCluster>,
    /// The kubeconfig was read (or there is none) in this attempt.
    pub cluster_read: bool,
    /// The persisted inventory is in another cluster than the current one: it is left
    /// there, this attempt applies as if nothing were applied yet.
    pub moved: bool,
    /// What `status.leftBehind` records once the new cluster's apply succeeds.
    pub left_behind: Option<crate::api::LeftBehind>,
    /// "all N resources are healthy", once the health wait found them so: the Normal
    /// event of a recovery, emitted when the attempt ends well (after `post-apply` hooks).
    pub healthy_message: Option<String>,
}

fn parse_or(s: Option<&str>, default: Duration) -> Duration {
    match s.map(crate::duration::parse) {
        Some(Ok(d)) if !d.is_zero() => d,
        // Unparseable or zero durations fall back to the default rather than stopping the
        // release; the CRD documents the format.
        _ => default,
    }
}

impl Ctx {
    /// Takes the observed object by value: its spec and status move into the context
    /// rather than being copied (every attempt starts here).
    pub(super) fn from_object(key: ReleaseKey, obj: ReleaseObject) -> Self {
        let (meta, common, spec, status) = match obj {
            ReleaseObject::ModuleRelease(m) => (
                m.metadata,
                m.spec.common,
                SourceSpec::Module {
                    module: m.spec.module,
                    values: m.spec.values,
                    values_from: m.spec.values_from,
                },
                m.status,
            ),
            ReleaseObject::Release(r) => (
                r.metadata,
                r.spec.common,
                SourceSpec::Package {
                    source_ref: r.spec.source_ref,
                    path: r.spec.path,
                },
                r.status,
            ),
        };
        let persisted = status.unwrap_or_default();
        let annotation = |k: &str| meta.annotations.as_ref().and_then(|a| a.get(k)).cloned();
        // Clamped to SPEC §24's bounds: a value the CRD should have refused never becomes a
        // requeue or deadline the interpreter cannot add to a clock.
        let interval = parse_or(common.interval.as_deref(), DEFAULT_INTERVAL)
            .clamp(MIN_INTERVAL, MAX_INTERVAL);
        let timeout = parse_or(common.timeout.as_deref(), DEFAULT_TIMEOUT).min(MAX_TIMEOUT);
        let uuid = crate::render_value::release_uuid(key.kind, &key.namespace, &key.name);
        Ctx {
            generation: meta.generation.unwrap_or(0),
            has_finalizer: meta
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|x| x == FINALIZER)),
            deleting: meta.deletion_timestamp.is_some(),
            requested_at: annotation(REQUESTED_AT_ANNOTATION),
            orphan_annotation: annotation(ORPHAN_ANNOTATION),
            conds: Conditions::from_persisted(&persisted.conditions),
            persisted,
            interval,
            timeout,
            uuid,
            common,
            spec,
            key,
            ..Ctx::default()
        }
    }

    pub(super) fn drift_mode(&self) -> crate::api::DriftMode {
        self.common
            .drift_detection
            .as_ref()
            .map(|d| d.mode)
            .unwrap_or_default()
    }

    pub(super) fn force_conflicts(&self) -> bool {
        self.common
            .rollout
            .as_ref()
            .is_some_and(|r| r.force_conflicts)
    }

    /// `driftDetection.ignore` (SPEC §28).
    pub(super) fn ignore_rules(&self) -> &[crate::api::IgnoreRule] {
        self.common
            .drift_detection
            .as_ref()
            .map_or(&[], |d| d.ignore.as_slice())
    }

    /// The desired objects the operator writes and checks: all but `ssa: Ignore` ones.
    pub(super) fn writable(&self) -> Vec<DesiredObject> {
        self.desired
            .iter()
            .filter(|d| d.policy.ssa != crate::policy::SsaPolicy::Ignore)
            .cloned()
            .collect()
    }

    pub(super) fn adopt_existing(&self) -> bool {
        self.common
            .rollout
            .as_ref()
            .is_some_and(|r| r.adopt_existing)
    }

    pub(super) fn persisted_entries(&self) -> &[InventoryEntry] {
        if self.moved {
            return &[];
        }
        self.persisted
            .inventory
            .as_ref()
            .map_or(&[], |i| i.entries.as_slice())
    }

    /// All four last-applied digests non-empty and equal to the current ones (SPEC §7).
    pub(super) fn digests_unchanged(&self) -> bool {
        let p = &self.persisted;
        let inv = p.inventory.as_ref().map_or("", |i| i.digest.as_str());
        let pairs = [
            (p.last_applied_source_digest.as_str(), &self.digests.source),
            (p.last_applied_config_digest.as_str(), &self.digests.config),
            (p.last_applied_render_digest.as_str(), &self.digests.render),
            (inv, &self.digests.inventory),
        ];
        !self.moved && pairs.iter().all(|(old, new)| !old.is_empty() && old == new)
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;
    use crate::api::{ModuleRelease, ModuleReleaseSpec};

    fn ctx_with(interval: Option<&str>, timeout: Option<&str>) -> Ctx {
        let mut mr = ModuleRelease {
            metadata: Default::default(),
            spec: ModuleReleaseSpec::default(),
            status: None,
        };
        mr.metadata.name = Some("web".into());
        mr.metadata.namespace = Some("demo".into());
        mr.spec.common.interval = interval.map(str::to_string);
        mr.spec.common.timeout = timeout.map(str::to_string);
        let obj = ReleaseObject::ModuleRelease(mr);
        Ctx::from_object(obj.key(), obj)
    }

    #[test]
    fn interval_and_timeout_are_clamped_to_spec_bounds_whatever_was_stored() {
        // What an older CRD let through: the issue 13 crash value and its neighbours.
        for huge in [
            "5124095576030431h",
            "25h",
            "2562047h47m16.854775807s",
            "86400.001s",
        ] {
            let c = ctx_with(Some(huge), Some(huge));
            assert_eq!(c.interval, MAX_INTERVAL, "{huge}");
            assert_eq!(c.timeout, MAX_TIMEOUT, "{huge}");
        }
        // Unparseable or zero: the defaults; below the minimum: 10s.
        let c = ctx_with(Some("99999999999999999999999h"), Some("0"));
        assert_eq!((c.interval, c.timeout), (DEFAULT_INTERVAL, DEFAULT_TIMEOUT));
        let c = ctx_with(Some("1ns"), Some("1ns"));
        assert_eq!(c.interval, MIN_INTERVAL);
        assert_eq!(c.timeout, Duration::from_nanos(1));
        let c = ctx_with(Some("24h"), Some("1h30m"));
        assert_eq!(
            (c.interval, c.timeout),
            (MAX_INTERVAL, Duration::from_secs(5400))
        );
    }
}
