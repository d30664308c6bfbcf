//! `CheckDrift`: would applying each object change a field the release manages, or create
//! it (SPEC §20)? A `Merge` object is compared as it would be written (SPEC §28).

use opm_core::effect::Impersonation;
use opm_core::input::{ApiError, DriftReport, InputKind, ObjectResult};
use opm_core::object::DesiredObject;

use crate::cluster::Cluster;
use crate::rbac::Verb;

impl Cluster {
    pub(super) fn check_drift(
        &self,
        objects: &[DesiredObject],
        field_manager: &str,
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        let mut report = DriftReport::default();
        for (i, o) in objects.iter().enumerate() {
            let res = match (&api_err, i) {
                (Some(e), 0) => Err(e.clone()),
                _ => self.authorize(identity, Verb::Apply, &o.id),
            };
            match res {
                Err(e) => report.errors.push(ObjectResult {
                    id: o.id.clone(),
                    result: Err(e),
                }),
                Ok(())
                    if self
                        .store
                        .drifted(&o.id, &self.shaped(o, field_manager), field_manager) =>
                {
                    report.drifted.push(o.id.clone())
                }
                Ok(()) => {}
            }
        }
        InputKind::DriftChecked { report }
    }
}
