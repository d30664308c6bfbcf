//! `Apply`: staged server-side apply (SPEC §19), each object as SPEC §28's write plan says
//! (`crate::policy`); a stage with a failed object is the last one applied.

use opm_core::effect::{ApplyStage, Impersonation};
use opm_core::input::{ApiError, AppliedObject, ApplyAction, ApplyReport, InputKind};

use super::Cx;
use crate::cluster::Cluster;
use crate::rbac::Verb;

impl Cluster {
    pub(super) fn apply(
        &mut self,
        cx: &mut Cx<'_>,
        stages: &[ApplyStage],
        field_manager: &str,
        force: bool,
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        let mut report = ApplyReport::default();
        let mut injected = api_err;
        for stage in stages {
            let mut failed = false;
            for o in &stage.objects {
                let result = match injected.take() {
                    Some(e) => Err(e),
                    None => self
                        .authorize(identity, Verb::Apply, &o.id)
                        .and_then(|()| self.apply_object(o, field_manager, force)),
                };
                if result.is_ok() {
                    self.register_crd(cx, &o.manifest);
                }
                if matches!(result, Ok(ApplyAction::Created | ApplyAction::Updated)) {
                    cx.notes.store_writes += 1;
                    self.note_applied(&o.id, cx.now);
                }
                failed |= result.is_err();
                report.objects.push(AppliedObject {
                    id: o.id.clone(),
                    result,
                });
            }
            if failed {
                break;
            }
        }
        InputKind::Applied { report }
    }
}
