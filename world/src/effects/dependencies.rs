//! `ListDependents`, `CheckDependencies`: the releases (and objects) a release's
//! `dependsOn` names, and every release with a `dependsOn` (SPEC §14, §32).

use std::collections::BTreeSet;

use jiff::Timestamp;
use opm_core::effect::Impersonation;
use opm_core::input::{ApiError, DependencyReport, InputKind};
use opm_core::object::{ReleaseKey, ResourceId};

use crate::cluster::Cluster;

impl Cluster {
    pub(super) fn list_dependents(&self, api_err: Option<ApiError>) -> InputKind {
        InputKind::DependentsListed {
            result: match api_err {
                Some(e) => Err(e),
                None => Ok(self.dependents_report()),
            },
        }
    }

    pub(super) fn check_dependencies(
        &self,
        namespace: &str,
        refs: &[ReleaseKey],
        objects: &[ResourceId],
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
        now: Timestamp,
    ) -> InputKind {
        InputKind::DependenciesChecked {
            result: match api_err {
                Some(e) => Err(e),
                None => {
                    let mut report = self.dependency_report(namespace, refs);
                    report.objects = self.read_objects(objects, identity, now);
                    Ok(report)
                }
            },
        }
    }

    /// Every release with a `dependsOn`, in every namespace (SPEC §32), as the interpreter
    /// lists them.
    fn dependents_report(&self) -> DependencyReport {
        DependencyReport {
            releases: self
                .releases
                .with_depends_on()
                .map(|(_, r)| opm_core::deps::snapshot(&r.object))
                .collect(),
            objects: Vec::new(),
        }
    }

    fn dependency_report(&self, namespace: &str, refs: &[ReleaseKey]) -> DependencyReport {
        let mut keys: BTreeSet<ReleaseKey> = self
            .releases
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        keys.extend(
            refs.iter()
                .filter(|r| self.releases.get(r).is_some())
                .cloned(),
        );
        DependencyReport {
            releases: keys
                .iter()
                .filter_map(|k| self.releases.snapshot(k))
                .collect(),
            objects: Vec::new(),
        }
    }
}
