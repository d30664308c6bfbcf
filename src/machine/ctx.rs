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
    /// The source's digest: the artifact's, or the module path and version's.
    pub(super) source: String,
    /// The digest of what configures the render: the values, or the package path (and
    /// the Platform an OPM render used).
    pub(super) config: String,
    /// The digest of the rendered objects.
    pub(super) render: String,
    /// The digest of the new inventory.
    pub(super) inventory: String,
}

/// The step of SPEC §3 the attempt is in, as far as a failure's history entry records it:
/// [`Step::as_str`] is the entry's `phase`, a value of the persisted status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Step {
    /// No step has begun yet (a spec refused before any effect): an empty `phase`.
    #[default]
    Start,
    /// Adding the finalizer.
    Finalizer,
    /// Checking `dependsOn` (SPEC §14).
    Dependencies,
    /// Resolving the source (SPEC §16).
    Source,
    /// Fetching the artifact (SPEC §17).
    Fetch,
    /// Rendering (SPEC §18).
    Render,
    /// Checking the ServiceAccount (SPEC §15).
    Impersonation,
    /// Reading `valuesFrom` (SPEC §27).
    Values,
    /// Reading the remote cluster's kubeconfig (SPEC §31).
    KubeConfig,
    /// Checking drift (SPEC §20).
    Drift,
    /// Applying (SPEC §19).
    Apply,
    /// Pruning the stale set (SPEC §9).
    Prune,
    /// Deleting the release's objects (SPEC §12).
    Deletion,
    /// Waiting for health (SPEC §26).
    Health,
    /// Running hooks (SPEC §32).
    Hooks,
}

impl Step {
    /// The history entry's `phase` for a failure in this step.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Step::Start => "",
            Step::Finalizer => "finalizer",
            Step::Dependencies => "dependencies",
            Step::Source => "source",
            Step::Fetch => "fetch",
            Step::Render => "render",
            Step::Impersonation => "impersonation",
            Step::Values => "values",
            Step::KubeConfig => "kubeconfig",
            Step::Drift => "drift",
            Step::Apply => "apply",
            Step::Prune => "prune",
            Step::Deletion => "deletion",
            Step::Health => "health",
            Step::Hooks => "hooks",
        }
    }
}

/// What this attempt's apply did, by object: the `Applied` event's figures and the
/// `ApplyResources` metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct ApplyCounts {
    /// Objects the apply created.
    pub(super) created: u64,
    /// Objects it changed, recreated ones included.
    pub(super) updated: u64,
    /// Objects it left as they were.
    pub(super) unchanged: u64,
}

impl ApplyCounts {
    /// Every object the apply reached without an error.
    pub(super) fn total(self) -> u64 {
        self.created + self.updated + self.unchanged
    }
}

/// Everything an attempt knows about its release: what the observed object said, then
/// what each answered effect added. Private to the machine; its fields are the machine's
/// working memory, never read outside it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct Ctx {
    /// The release, with the object's own namespace and name when it gives them.
    pub(super) key: ReleaseKey,
    /// `metadata.generation`, recorded as `observedGeneration` (SPEC §10).
    pub(super) generation: i64,
    /// The spec fields both kinds share.
    pub(super) common: ReleaseCommon,
    /// Where the configuration comes from: the only per-kind part of the spec.
    pub(super) spec: SourceSpec,
    /// The status as read: the only memory between attempts (digests, inventory, counters).
    pub(super) persisted: ReleaseStatus,
    /// Our finalizer is on the object: without it the attempt adds it first (SPEC §3).
    pub(super) has_finalizer: bool,
    /// `deletionTimestamp` is set: the attempt deletes instead of applying (SPEC §12).
    pub(super) deleting: bool,
    /// The `requestedAt` annotation, a manual reconcile request (SPEC §1.4), recorded as
    /// handled in the status.
    pub(super) requested_at: Option<String>,
    /// The force-delete-orphan annotation: a deletion that cannot delete lets the release
    /// go, its objects left in place (SPEC §12).
    pub(super) orphan_annotation: Option<String>,
    /// `spec.interval`, clamped to SPEC §24's bounds: the success requeue.
    pub(super) interval: Duration,
    /// `spec.timeout`, clamped: the attempt's deadline from its start.
    pub(super) timeout: Duration,
    /// The release's UUID, stamped on every object it owns (SPEC §6, §25).
    pub(super) uuid: String,
    /// The ServiceAccount the attempt acts as, after the operator's default (SPEC §15).
    pub(super) service_account: Option<String>,
    /// The impersonation every write carries; `None`: the operator's own identity.
    pub(super) identity: Option<Impersonation>,
    /// The conditions being built, from the persisted ones.
    pub(super) conds: Conditions,
    /// The step a failure is recorded in (the history entry's `phase`).
    pub(super) step: Step,
    /// Digests known so far (SPEC §7).
    pub(super) digests: Digests,
    /// The Flux source's status, recorded as `status.source` (SPEC §16).
    pub(super) source_status: Option<SourceStatus>,
    /// Where the artifact is downloaded from.
    pub(super) artifact_url: String,
    /// The rendered objects, in apply order.
    pub(super) desired: Vec<DesiredObject>,
    /// The new inventory's entries (SPEC §8).
    pub(super) entries: Vec<InventoryEntry>,
    /// Persisted entries no longer rendered: the prune candidates (SPEC §8-9).
    pub(super) stale: Vec<InventoryEntry>,
    /// Whether the apply ran and succeeded (`None`: it did not run), for the status's
    /// failure counters.
    pub(super) apply_ok: Activity,
    /// Whether the prune ran and succeeded, for the failure counters.
    pub(super) prune_ok: Activity,
    /// Whether the drift check ran and succeeded, for the failure counters.
    pub(super) drift_ok: Activity,
    /// What the apply did, by object.
    pub(super) counts: ApplyCounts,
    /// Pruning ran in this attempt: the prune metric is reported.
    pub(super) prune_ran: bool,
    /// The stale objects read before pruning, for the prune guards (SPEC §9).
    pub(super) prune_targets: Vec<ResourceId>,
    /// Objects read before their first write (SPEC §25).
    pub(super) owner_targets: Vec<ResourceId>,
    /// Prune targets marked `prune: disabled`: orphaned, not deleted (SPEC §28).
    pub(super) orphan_targets: Vec<ResourceId>,
    /// The deletions asked for, matched against their results.
    pub(super) deletions: Vec<Deletion>,
    /// Deletions that failed, named in the `PruneFailed` message.
    pub(super) prune_failures: Vec<PruneFailure>,
    /// Objects deleted: the prune metric and the `Pruned` event.
    pub(super) pruned: u64,
    /// This attempt's apply succeeded: the status records it even when health then waits
    /// or fails (SPEC §26: the wait runs from the apply).
    pub(super) applied: bool,
    /// When this attempt's apply answered: the start of its health wait.
    pub(super) applied_at: Option<jiff::Timestamp>,
    /// Verdicts of the first health read, kept while the pods of some are read.
    pub(super) judged: Vec<crate::health::Judged>,
    /// The health report to commit.
    pub(super) health: Option<crate::api::HealthReport>,
    /// The metrics of a health exit, pushed with the others.
    pub(super) health_metrics: Vec<crate::effect::Metric>,
    /// The ServiceAccount was found to exist before `valuesFrom` was read (SPEC §27), so
    /// step 12 needs no second check.
    pub(super) sa_checked: bool,
    /// The remote cluster the release's objects live in (SPEC §31); `None`: this one.
    pub(super) cluster: Option<crate::remote::RemoteCluster>,
    /// The kubeconfig was read (or there is none) in this attempt.
    pub(super) cluster_read: bool,
    /// The persisted inventory is in another cluster than the current one: it is left
    /// there, this attempt applies as if nothing were applied yet.
    pub(super) moved: bool,
    /// What `status.leftBehind` records once the new cluster's apply succeeds.
    pub(super) left_behind: Option<crate::api::LeftBehind>,
    /// "all N resources are healthy", once the health wait found them so: the Normal
    /// event of a recovery, emitted when the attempt ends well (after `post-apply` hooks).
    pub(super) healthy_message: Option<String>,
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
mod tests;
