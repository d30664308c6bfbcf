//! `InspectOwners`, `InspectStale`: the live metadata of objects (SPEC §25, §8).

use opm_core::effect::Impersonation;
use opm_core::input::{ApiError, InputKind, LiveMeta, LiveObject};
use opm_core::object::ResourceId;

use crate::cluster::Cluster;
use crate::rbac::Verb;

impl Cluster {
    pub(super) fn inspect_owners(
        &self,
        targets: &[ResourceId],
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        InputKind::OwnersInspected {
            objects: self.inspect(targets, identity, api_err.as_ref()),
        }
    }

    pub(super) fn inspect_stale(
        &self,
        targets: &[ResourceId],
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        InputKind::StaleInspected {
            objects: self.inspect(targets, identity, api_err.as_ref()),
        }
    }

    /// The live metadata of each target, read as `identity`; an injected error fails the
    /// first (both owner and stale inspections read this way).
    fn inspect(
        &self,
        targets: &[ResourceId],
        identity: Option<&Impersonation>,
        injected: Option<&ApiError>,
    ) -> Vec<LiveObject> {
        targets
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let result = match (injected, i) {
                    (Some(e), 0) => Err(e.clone()),
                    _ => self.authorize(identity, Verb::Get, id).map(|()| {
                        self.store.get(id).map(|o| LiveMeta {
                            uid: o.uid.clone(),
                            labels: o.labels(),
                        })
                    }),
                };
                LiveObject {
                    id: id.clone(),
                    result,
                }
            })
            .collect()
    }
}
