//! The convergence check shared by `prop_convergence` and the `fault_schedules` bench: run a
//! history, heal, and require every release Ready with an honest inventory and no deletion
//! outside what a release owned.

use std::collections::BTreeSet;
use std::time::Duration;

use opm_core::constants::labels;
use opm_core::prune::is_protected;
use opm_core::{Effect, Outcome, ReleaseKey, ResourceId};
use opm_world::World;
use proptest::prelude::*;

use super::{Ev, Setup, heal, identity, inventory_ids, recreate_missing, release_keys, run};

/// Attempts allowed after the heal, for all four releases together.
pub const BOUND: usize = 40;

/// What one converged run did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Converged {
    pub attempts: usize,
    pub deletions: usize,
}

fn ready(w: &World, k: &ReleaseKey) -> (String, String) {
    w.release(k)
        .and_then(|o| o.status())
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

/// Deletions the world carried out that no release owned: an object outside the inventory
/// the deleting attempt started with, or a Namespace/CRD. Must always be empty.
pub fn wrong_deletions(w: &World) -> Vec<String> {
    let mut wrong = Vec::new();
    for log in w.logs() {
        let inv = inventory_ids(log.observed_status());
        let check = |id: &ResourceId, wrong: &mut Vec<String>| {
            if !inv.contains(&identity(id)) || is_protected(id) {
                wrong.push(format!("{:?} deleted {}", log.key, id.display()));
            }
        };
        for id in &log.deleted {
            check(id, &mut wrong);
        }
        for e in log.effects() {
            if let Effect::Prune { deletions, .. } = e {
                for d in deletions {
                    check(&d.id, &mut wrong);
                }
            }
        }
    }
    wrong
}

/// Runs `history` to `horizon`, heals what an operator on call would fix, lets deletions in
/// flight finish and drives until every release settles (at most [`BOUND`] attempts).
pub fn run_and_heal(
    s: &Setup,
    history: &[(u32, Ev)],
    horizon: u32,
) -> Result<World, TestCaseError> {
    let mut w = run(s, history, horizon);
    heal(&mut w);
    // Let deletions in flight finish (a stalled one rechecks within 30m), then bring back
    // what was deleted so dependencies exist again.
    let settle = w.now() + Duration::from_secs(3600);
    w.drive_until(settle)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    recreate_missing(&mut w, s);
    let used = w
        .drive_bounded(BOUND)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert!(used <= BOUND, "{used} attempts after the heal");
    Ok(w)
}

/// Every release is Ready with an inventory equal to its last apply and present in the
/// cluster with its labels, and the last attempt of each was a NoOp.
pub fn check_converged(w: &World) -> Result<Converged, TestCaseError> {
    for k in release_keys() {
        let Some(obj) = w.release(&k) else { continue };
        let status = obj.status().cloned().unwrap_or_default();
        prop_assert_eq!(
            ready(w, &k),
            ("True".to_string(), "ReconciliationSucceeded".to_string()),
            "{:?}",
            k
        );
        let inv = inventory_ids(Some(&status));
        // What the last successful apply of this release sent.
        let applied: Option<BTreeSet<_>> = w
            .logs()
            .iter()
            .rev()
            .filter(|l| {
                l.key == k
                    && matches!(
                        l.outcome,
                        Some(Outcome::Applied | Outcome::AppliedAndPruned)
                    )
            })
            .find_map(|l| {
                l.effects().find_map(|e| match e {
                    Effect::Apply { stages, .. } => Some(
                        stages
                            .iter()
                            .flat_map(|s| &s.objects)
                            .map(|o| identity(&o.id))
                            .collect(),
                    ),
                    _ => None,
                })
            });
        if let Some(applied) = applied {
            prop_assert_eq!(
                &inv,
                &applied,
                "{:?}: inventory differs from the last apply",
                k
            );
        }
        prop_assert!(!inv.is_empty(), "{:?}: empty inventory", k);
        for e in status
            .inventory
            .as_ref()
            .map(|i| i.entries.as_slice())
            .unwrap_or_default()
        {
            let id = ResourceId::from_entry(e);
            let live = w.object(&id);
            prop_assert!(
                live.is_some(),
                "{:?}: {} missing from the cluster",
                k,
                id.display()
            );
            let live = live.unwrap();
            prop_assert_eq!(
                live.label(labels::RELEASE_UUID),
                Some(status.release_uuid.as_str())
            );
            prop_assert_eq!(live.label(labels::MANAGED_BY), Some("opm-controller"));
        }
    }
    prop_assert!(w.unsettled().is_empty(), "unsettled: {:?}", w.unsettled());
    Ok(Converged {
        attempts: w.timeline().len(),
        deletions: w.logs().iter().map(|l| l.deleted.len()).sum(),
    })
}

/// [`run_and_heal`], then [`check_converged`] and no [`wrong_deletions`].
pub fn converges_after_heal(
    s: &Setup,
    history: &[(u32, Ev)],
    horizon: u32,
) -> Result<Converged, TestCaseError> {
    let w = run_and_heal(s, history, horizon)?;
    let wrong = wrong_deletions(&w);
    prop_assert!(wrong.is_empty(), "wrong deletions: {:?}", wrong);
    check_converged(&w)
}
