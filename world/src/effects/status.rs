//! `PatchStatus`: the status subresource (SPEC §10); a release turning Ready re-triggers
//! its dependents.

use serde_json::Value;

use opm_core::api::ReleaseStatus;
use opm_core::input::{ApiError, InputKind};
use opm_core::object::ReleaseKey;
use opm_core::triggers;

use super::Cx;
use crate::cluster::Cluster;

impl Cluster {
    pub(super) fn patch_status_effect(
        &mut self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        patch: &Value,
        status: &ReleaseStatus,
        api_err: Option<ApiError>,
    ) -> InputKind {
        let result = match api_err {
            Some(e) => Err(e),
            None => self.patch_status(cx, key, patch, status),
        };
        InputKind::StatusPatched { result }
    }

    fn patch_status(
        &mut self,
        cx: &mut Cx<'_>,
        key: &ReleaseKey,
        patch: &Value,
        claimed: &ReleaseStatus,
    ) -> Result<(), ApiError> {
        let was_ready = triggers::is_ready(self.releases.get(key).and_then(|o| o.status()));
        let stored = self.releases.patch_status_in_place(key, patch)?;
        let mismatch = stored != claimed;
        let retrigger = triggers::retriggers_dependents(was_ready, Some(stored));
        if mismatch {
            cx.current.status_mismatches += 1;
        }
        if retrigger {
            cx.notes.dependents_of.push(key.clone());
        }
        Ok(())
    }
}
