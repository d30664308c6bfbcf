//! `AwaitTermination`: which deleted objects are still there (SPEC §12).

use opm_core::effect::Deletion;
use opm_core::input::{ApiError, InputKind};

use crate::cluster::Cluster;

impl Cluster {
    /// Deletion in the simulated store is immediate: what is left is what a fault kept, or
    /// a successor-free object still under the same UID.
    pub(super) fn await_termination(
        &self,
        targets: &[Deletion],
        api_err: Option<ApiError>,
    ) -> InputKind {
        let remaining = targets
            .iter()
            .filter(|d| api_err.is_some() || self.store.get(&d.id).is_some_and(|o| o.uid == d.uid))
            .map(|d| d.id.clone())
            .collect();
        InputKind::TerminationAwaited {
            remaining,
            error: api_err,
        }
    }
}
