//! `CheckServiceAccount`: whether the ServiceAccount an attempt impersonates exists
//! (SPEC §15).

use opm_core::input::{ApiError, InputKind};

use crate::cluster::Cluster;

impl Cluster {
    pub(super) fn check_service_account(
        &self,
        namespace: &str,
        name: &str,
        api_err: Option<ApiError>,
    ) -> InputKind {
        InputKind::ServiceAccountChecked {
            result: match api_err {
                Some(e) => Err(e),
                None => Ok(self.rbac.account_exists(namespace, name)),
            },
        }
    }
}
