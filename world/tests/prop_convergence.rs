//! Once faults stop and user errors are fixed, every release converges to Ready within a
//! bounded number of attempts, with an inventory equal to what it applied and present in
//! the cluster, and no object deleted that a release did not own. `PROPTEST_CASES` sets the
//! case count (default 16); `cargo bench --bench fault_schedules` runs ten thousand.

mod world_support;

use proptest::prelude::*;
use world_support::*;

const HORIZON: u32 = 2 * 3600;

proptest! {
    #![proptest_config(pt_config("proptest-regressions/prop_convergence.txt", 16))]

    #[test]
    fn every_release_converges_once_faults_stop(s in setup(), h in busy_history(4, 24, HORIZON, false)) {
        converges_after_heal(&s, &h, HORIZON)?;
    }
}
