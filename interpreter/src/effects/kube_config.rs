//! `ReadKubeConfig`: the remote cluster's kubeconfig Secret, read as the operator in its own
//! cluster (SPEC §31). The facts go to the core; the bytes stay here, under their digest,
//! for the connection an accepted kubeconfig gets.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use opm_core::InputKind;
use opm_core::effect::EffectKind;
use opm_core::remote::{DEFAULT_KEYS, KubeConfigError, KubeConfigFacts};

use super::{Cx, deadline_error, within};
use crate::kube::api_error;

/// The Secret's name and key, and the size bound, as the effect carries them.
pub(crate) struct Request<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub key: Option<&'a str>,
    pub max_bytes: u64,
}

pub(crate) async fn run(cx: &mut Cx<'_>, req: Request<'_>) -> InputKind {
    let work = async {
        InputKind::KubeConfigRead {
            result: read(cx, &req).await,
        }
    };
    within(cx.bound, work, timed_out).await
}

async fn read(cx: &Cx<'_>, req: &Request<'_>) -> Result<KubeConfigFacts, KubeConfigError> {
    let api = Api::<Secret>::namespaced(cx.rt.clients.operator(), req.namespace);
    let secret = api
        .get_opt(req.name)
        .await
        .map_err(|e| KubeConfigError::Api {
            error: api_error::from_kube(&e),
        })?
        .ok_or(KubeConfigError::SecretNotFound);
    let secret = match secret {
        Ok(s) => s,
        Err(e) => {
            cx.rt.clusters.read_at(req.namespace, req.name, None);
            return Err(e);
        }
    };
    cx.rt.clusters.read_at(
        req.namespace,
        req.name,
        secret.metadata.resource_version.clone(),
    );
    let mut data = secret.data.unwrap_or_default();
    let tried: Vec<&str> = match req.key {
        Some(k) => vec![k],
        None => DEFAULT_KEYS.to_vec(),
    };
    let Some((key, value)) = tried
        .iter()
        .find_map(|k| data.remove(*k).map(|v| (k.to_string(), v.0)))
    else {
        return Err(KubeConfigError::KeyNotFound {
            keys: data.into_keys().collect(),
        });
    };
    if value.len() as u64 > req.max_bytes {
        return Err(KubeConfigError::TooLarge {
            bytes: value.len() as u64,
        });
    }
    let facts = crate::kube::kubeconfig::facts(&key, &value)?;
    cx.rt.clusters.loaded(cx.key, &facts.digest, value);
    Ok(facts)
}

/// The answer when it overran its bound.
pub(super) fn timed_out() -> InputKind {
    InputKind::KubeConfigRead {
        result: Err(KubeConfigError::Api {
            error: deadline_error(EffectKind::ReadKubeConfig),
        }),
    }
}
