//! `ReadValues`: `valuesFrom` objects and registry credentials (SPEC §27). The simulated
//! world keeps no ConfigMap or Secret data for values: each reference it may read is
//! reported missing (its RBAC and faults still apply).

use opm_core::api::values_from::ValuesReference;
use opm_core::effect::Impersonation;
use opm_core::input::{ApiError, InputKind};
use opm_core::object::ResourceId;
use opm_core::values_from::{CredentialsContent, ValuesContent};

use crate::cluster::Cluster;
use crate::rbac::Verb;

impl Cluster {
    pub(super) fn read_values(
        &self,
        namespace: &str,
        refs: &[ValuesReference],
        credentials: Option<&str>,
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        let read = |kind: &str, name: &str| {
            let id = ResourceId {
                group: String::new(),
                kind: kind.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
                version: "v1".to_string(),
            };
            match &api_err {
                Some(e) => Err(e.clone()),
                None => self.authorize(identity, Verb::Get, &id),
            }
        };
        let values = refs
            .iter()
            .map(|r| read(r.kind.as_str(), &r.name).map(|()| ValuesContent::ObjectMissing))
            .collect();
        let credentials = credentials
            .map(|name| read("Secret", name).map(|()| CredentialsContent::ObjectMissing));
        InputKind::ValuesRead {
            values,
            credentials,
        }
    }
}
