//! `ReadKubeConfig`: a remote cluster's kubeconfig Secret (SPEC §31).

use opm_core::input::{ApiError, InputKind};
use opm_core::remote::{KubeConfigError, KubeConfigFacts};

use crate::cluster::Cluster;

impl Cluster {
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

impl Cluster {
    /// The answer to `ReadKubeConfig`: the world keeps no kubeconfig bytes, only the
    /// server a Secret points at, and its digest stands for the bytes.
    pub(crate) fn read_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        key: Option<&str>,
    ) -> Result<KubeConfigFacts, KubeConfigError> {
        let server = self
            .clusters
            .kubeconfigs
            .get(&(namespace.to_string(), name.to_string()))
            .ok_or(KubeConfigError::SecretNotFound)?;
        let key = key.unwrap_or(opm_core::remote::DEFAULT_KEYS[0]);
        if key != opm_core::remote::DEFAULT_KEYS[0] {
            return Err(KubeConfigError::KeyNotFound {
                keys: vec![opm_core::remote::DEFAULT_KEYS[0].to_string()],
            });
        }
        Ok(KubeConfigFacts {
            key: key.to_string(),
            digest: opm_core::digest::sha256(server.as_bytes()),
            server: server.clone(),
            insecure: Vec::new(),
        })
    }
}
