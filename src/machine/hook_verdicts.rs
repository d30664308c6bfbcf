//! One read of a phase's hooks, its verdicts sorted by what they ask for (SPEC §32):
//! `hooks_read.rs` files them, `hooks.rs` acts on them.

use crate::effect::Deletion;
use crate::hooks::{HookPhase, Verdict};
use crate::object::ResourceId;

/// One read's verdicts, sorted by what they ask for, each list in read order.
#[derive(Default)]
pub(super) struct Sorted {
    pub(super) failed: Vec<(ResourceId, String)>,
    pub(super) waiting: Vec<(ResourceId, String)>,
    pub(super) apply: Vec<ResourceId>,
    pub(super) recreate: Vec<Deletion>,
    pub(super) resume: Vec<Deletion>,
}

impl Sorted {
    /// Files the verdict on `id` (`rendered_phase`: its rendered hook annotation).
    pub(super) fn add(
        &mut self,
        id: &ResourceId,
        verdict: Verdict,
        rendered_phase: Option<HookPhase>,
    ) {
        match verdict {
            Verdict::Done => {}
            Verdict::Apply => self.apply.push(id.clone()),
            Verdict::Recreate { uid } => {
                if rendered_phase != Some(HookPhase::PreDelete) {
                    self.apply.push(id.clone());
                }
                self.recreate.push(Deletion {
                    id: id.clone(),
                    uid,
                    orphan: false,
                    resume: false,
                });
            }
            Verdict::Resume { uid } => self.resume.push(Deletion {
                id: id.clone(),
                uid,
                orphan: false,
                resume: true,
            }),
            Verdict::Waiting(why) => self.waiting.push((id.clone(), why)),
            Verdict::Failed(why) => self.failed.push((id.clone(), why)),
        }
    }
}
