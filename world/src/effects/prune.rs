//! `Prune`: deletes (or, for an orphan, unlabels) stale objects, each with its UID
//! precondition (SPEC §9, §12).

use opm_core::effect::{Deletion, Impersonation};
use opm_core::input::{ApiError, InputKind, ObjectResult};

use super::Cx;
use crate::cluster::Cluster;
use crate::rbac::Verb;

impl Cluster {
    pub(super) fn prune(
        &mut self,
        cx: &mut Cx<'_>,
        deletions: &[Deletion],
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        let mut results = Vec::with_capacity(deletions.len());
        for (i, d) in deletions.iter().enumerate() {
            let result = match (&api_err, i) {
                (Some(e), 0) => Err(e.clone()),
                // A pre-delete hook Job created suspended is resumed, not deleted (SPEC §32).
                _ if d.resume => self
                    .authorize(identity, Verb::Apply, &d.id)
                    .and_then(|()| self.store.resume(&d.id, Some(&d.uid))),
                _ if d.orphan => self.authorize(identity, Verb::Apply, &d.id).and_then(|()| {
                    self.store.remove_labels(
                        &d.id,
                        Some(&d.uid),
                        &opm_core::constants::labels::STAMPED,
                    )
                }),
                _ => self
                    .authorize(identity, Verb::Delete, &d.id)
                    .and_then(|()| self.store.delete(&d.id, Some(&d.uid))),
            };
            if result.is_ok() {
                cx.notes.store_writes += 1;
            }
            if result.is_ok() && d.resume {
                self.note_applied(&d.id, cx.now);
            }
            if result.is_ok() && !d.orphan && !d.resume {
                cx.current.deleted.push(d.id.clone());
            }
            results.push(ObjectResult {
                id: d.id.clone(),
                result,
            });
        }
        InputKind::Pruned { results }
    }
}
