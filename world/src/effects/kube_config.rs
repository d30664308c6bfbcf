//! `ReadKubeConfig`: a remote cluster's kubeconfig Secret (SPEC §31).

use opm_core::input::{ApiError, InputKind};
use opm_core::remote::KubeConfigError;

use super::World;

impl World {
    pub(super) fn read_kube_config(
        &self,
        namespace: &str,
        name: &str,
        key: Option<&str>,
        api_err: Option<ApiError>,
    ) -> InputKind {
        InputKind::KubeConfigRead {
            result: match api_err {
                Some(error) => Err(KubeConfigError::Api { error }),
                None => self.read_kubeconfig(namespace, name, key),
            },
        }
    }
}
