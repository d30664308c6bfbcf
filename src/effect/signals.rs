//! The fire-and-forget effects' payloads: Kubernetes Events (SPEC §11) and metric samples
//! (SPEC §21). The interpreter emits them in batch order and never answers them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::outcome::Outcome;
use crate::reason::Reason;

/// `Normal` or `Warning`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Progress worth a line in the event list: applied, pruned, no-op, suspended.
    Normal,
    /// A failure or a refusal the user may have to act on.
    Warning,
}

/// An event regarding the release, reported by `opm-controller`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Whether the event reports progress or a problem.
    pub event_type: EventType,
    /// Why it happened, as in the tables of SPEC §4, §12 and §13.
    pub reason: Reason,
    /// The step that acted (`Apply`, `Prune`, `Render`, ...), the event's `action`.
    pub action: String,
    /// The message shown to users; it never carries a secret string (SPEC §23).
    pub note: String,
}

/// Metric samples; the interpreter adds the release's kind/name/namespace labels.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Metric {
    /// `opm_controller_reconcile_total{outcome}` +1 and the duration histogram.
    Reconcile {
        /// The `outcome` label the counter is moved under.
        outcome: Outcome,
        /// How long the attempt took, observed into the duration histogram.
        duration: Duration,
    },
    /// `opm_controller_apply_resources_total{action}` += each count.
    ApplyResources {
        /// Objects the apply created.
        created: u64,
        /// Existing objects the apply changed, recreated ones included.
        updated: u64,
        /// Objects a dry-run showed as already right, so not written.
        unchanged: u64,
    },
    /// `opm_controller_prune_resources_total` += count.
    PruneResources {
        /// Stale objects the prune deleted.
        count: u64,
    },
    /// `opm_controller_inventory_size` = count.
    InventorySize {
        /// Entries in the inventory the release now holds.
        count: u64,
    },
    /// `opm_controller_release_healthy` = 1 when every object is healthy, else 0.
    ReleaseHealthy {
        /// Every applied and checked object is `Current`.
        healthy: bool,
    },
    /// `opm_controller_health_wait_seconds`: from the apply to healthy.
    HealthWait {
        /// Time from the apply to every object healthy.
        duration: Duration,
    },
}
