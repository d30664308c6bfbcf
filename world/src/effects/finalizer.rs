//! `AddFinalizer`, `RemoveFinalizer`: the release's finalizer (SPEC §12); a removal that
//! lets the release go re-triggers the releases it depended on (SPEC §32).

use opm_core::input::{ApiError, InputKind};
use opm_core::object::ReleaseKey;
use opm_core::triggers;

use super::Cx;
use crate::cluster::Cluster;

impl Cluster {
    pub(super) fn add_finalizer(
        &mut self,
        key: &ReleaseKey,
        finalizer: &str,
        api_err: Option<ApiError>,
    ) -> InputKind {
        InputKind::FinalizerAdded {
            result: match api_err {
                Some(e) => Err(e),
                None => self.releases.add_finalizer(key, finalizer),
            },
        }
    }

    pub(super) fn remove_finalizer(
        &mut self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        finalizer: &str,
        api_err: Option<ApiError>,
    ) -> InputKind {
        InputKind::FinalizerRemoved {
            result: match api_err {
                Some(e) => Err(e),
                None => self.remove_release_finalizer(cx, key, finalizer),
            },
        }
    }

    /// Removes the finalizer; when that lets the release go, the releases it depended on
    /// are re-triggered (a deletion waiting for its dependents, SPEC §32), as the
    /// operator's watch does on the release's `Delete` event.
    fn remove_release_finalizer(
        &mut self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        finalizer: &str,
    ) -> Result<(), ApiError> {
        let refs: Vec<ReleaseKey> = self
            .releases
            .get(key)
            .map(|o| opm_core::deps::release_keys(key, &o.common().depends_on))
            .unwrap_or_default();
        self.releases.remove_finalizer(key, finalizer)?;
        if self.releases.get(key).is_none() {
            for dep in refs {
                if triggers::waits_for_dependents(self.releases.get(&dep).and_then(|o| o.status()))
                {
                    cx.notes.triggers.push((dep, "dependentGone"));
                }
            }
        }
        Ok(())
    }
}
