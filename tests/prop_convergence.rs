//! Once faults stop and user errors are fixed, every release converges to Ready within a
//! bounded number of attempts, with an inventory equal to what it applied and present in
//! the cluster. `PROPTEST_CASES` sets the case count (default 16).

mod world_support;

use std::collections::BTreeSet;

use opm_core::Effect;
use opm_core::constants::labels;
use proptest::prelude::*;
use world_support::*;

const HORIZON: u32 = 2 * 3600;
/// Attempts allowed after the heal, for all four releases together.
const BOUND: usize = 40;

fn ready(w: &opm_core::World, k: &opm_core::ReleaseKey) -> (String, String) {
    w.release(k)
        .and_then(|o| o.status())
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

proptest! {
    #![proptest_config(pt_config("proptest-regressions/prop_convergence.txt", 16))]

    #[test]
    fn every_release_converges_once_faults_stop(s in setup(), h in busy_history(4, 24, HORIZON, false)) {
        let mut w = run(&s, &h, HORIZON);
        heal(&mut w);
        // Let deletions in flight finish (a stalled one rechecks within 30m), then bring
        // back what was deleted so dependencies exist again.
        let settle = w.now() + std::time::Duration::from_secs(3600);
        w.drive_until(settle).unwrap();
        recreate_missing(&mut w, &s);
        let healed_at = w.timeline().len();
        let used = w.drive_bounded(BOUND).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert!(used <= BOUND);
        for k in release_keys() {
            let Some(obj) = w.release(&k) else { continue };
            let status = obj.status().cloned().unwrap_or_default();
            prop_assert_eq!(ready(&w, &k), ("True".to_string(), "ReconciliationSucceeded".to_string()), "{:?}", k);
            let inv = inventory_ids(Some(&status));
            // What the last successful apply of this release sent.
            let applied: Option<BTreeSet<_>> = w.logs().iter().rev()
                .filter(|l| l.key == k && matches!(l.outcome, Some(opm_core::Outcome::Applied | opm_core::Outcome::AppliedAndPruned)))
                .find_map(|l| l.effects().find_map(|e| match e {
                    Effect::Apply { stages, .. } => Some(stages.iter().flat_map(|s| &s.objects).map(|o| identity(&o.id)).collect()),
                    _ => None,
                }));
            if let Some(applied) = applied {
                prop_assert_eq!(&inv, &applied, "{:?}: inventory differs from the last apply", k);
            }
            prop_assert!(!inv.is_empty(), "{:?}: empty inventory", k);
            for e in status.inventory.as_ref().map(|i| i.entries.as_slice()).unwrap_or_default() {
                let id = opm_core::ResourceId::from_entry(e);
                let live = w.object(&id);
                prop_assert!(live.is_some(), "{:?}: {} missing from the cluster", k, id.display());
                let live = live.unwrap();
                prop_assert_eq!(live.label(labels::RELEASE_UUID), Some(status.release_uuid.as_str()));
                prop_assert_eq!(live.label(labels::MANAGED_BY), Some("opm-controller"));
            }
        }
        // Settled means the last attempt of each release since the heal was a NoOp.
        prop_assert!(w.unsettled().is_empty());
        prop_assert!(w.timeline().len() >= healed_at);
    }
}
