//! Lease-based leader election (`--leader-elect`): one `coordination.k8s.io/v1` Lease in the
//! operator's namespace. A replica reconciles only while it holds the Lease; takeover uses
//! the Lease's `resourceVersion` (optimistic concurrency), so two replicas never both win.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

/// Lease name shared by all replicas.
pub const LEASE_NAME: &str = "opm-operator-leader";
/// How long a Lease stays valid without renewal, unless `--leader-elect-lease-duration`
/// says otherwise.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);

/// One contender for the Lease.
pub struct LeaderLease {
    api: Api<Lease>,
    identity: String,
    duration: Duration,
}

/// The operator's namespace: the mounted ServiceAccount namespace, else `POD_NAMESPACE`,
/// else `opm-system`.
pub fn own_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "opm-system".into())
}

/// A unique holder identity: the pod name (HOSTNAME) plus a random suffix.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "opm-operator".into());
    format!("{host}-{:08x}", fastrand::u32(..))
}

impl LeaderLease {
    /// The Lease in `namespace`, held as `identity` for `duration` per renewal.
    pub fn new(client: Client, namespace: &str, identity: String, duration: Duration) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            identity,
            duration,
        }
    }

    /// Who this process holds the Lease as.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// How long the Lease stays valid without renewal.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// Takes or renews the Lease; `Ok(false)` while another live holder has it.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let secs = self.duration.as_secs() as i32;
        match self.api.get_opt(LEASE_NAME).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE_NAME.into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec(now, now, secs, 0)),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(mut lease) => {
                let spec = lease.spec.clone().unwrap_or_default();
                let holder = spec.holder_identity.clone().unwrap_or_default();
                let mine = holder == self.identity;
                let renewed = spec.renew_time.as_ref().map(|t| t.0);
                let valid_for = spec.lease_duration_seconds.unwrap_or(secs);
                let expired = renewed.is_none_or(|r| {
                    r.saturating_add(Duration::from_secs(valid_for.max(0) as u64))
                        .is_ok_and(|until| until < now)
                });
                if !mine && !holder.is_empty() && !expired {
                    return Ok(false);
                }
                let acquired = if mine {
                    spec.acquire_time.map(|t| t.0).unwrap_or(now)
                } else {
                    now
                };
                let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
                lease.spec = Some(self.spec(acquired, now, secs, transitions));
                // `replace` carries the resourceVersion read above: a concurrent change fails.
                match self
                    .api
                    .replace(LEASE_NAME, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Gives the Lease up (if still ours) so a standby takes over at once.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(LEASE_NAME).await
            && lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(self.identity.as_str())
        {
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.renew_time = None;
            }
            let _ = self
                .api
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await;
        }
    }

    fn spec(
        &self,
        acquired: Timestamp,
        renewed: Timestamp,
        secs: i32,
        transitions: i32,
    ) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}
