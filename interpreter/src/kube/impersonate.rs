//! Kubernetes clients: the operator's own, and one per ServiceAccount it impersonates
//! (SPEC §15), built from a cloned `kube::Config` and cached so a reconcile does not
//! rebuild TLS state. Every client counts its requests by verb (tests use the counts to
//! prove a no-op sends no write; the metrics endpoint can export them).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use http::{Method, Request};
use kube::client::{Body, ClientBuilder};
use kube::{Client, Config};
use opm_core::ApiError;
use opm_core::effect::Impersonation;

/// Requests sent through every client of one [`Clients`], by HTTP method.
#[derive(Debug, Default)]
pub struct RequestCounts {
    get: AtomicU64,
    post: AtomicU64,
    put: AtomicU64,
    patch: AtomicU64,
    delete: AtomicU64,
    events: AtomicU64,
}

/// A snapshot of [`RequestCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountSnapshot {
    /// GETs, LISTs and WATCHes (and dry-runs).
    pub get: u64,
    /// POSTs.
    pub post: u64,
    /// PUTs.
    pub put: u64,
    /// PATCHes that are not dry-runs.
    pub patch: u64,
    /// DELETEs.
    pub delete: u64,
    /// Event writes (events.k8s.io), kept apart: they record, they change no object.
    pub events: u64,
}

impl CountSnapshot {
    /// Requests that change an object (POST, PUT, PATCH, DELETE), not counting dry-runs
    /// (counted as reads) nor event writes (counted in `events`).
    pub fn writes(&self) -> u64 {
        self.post + self.put + self.patch + self.delete
    }

    /// Every request, events included.
    pub fn total(&self) -> u64 {
        self.get + self.writes() + self.events
    }

    /// Requests sent between `earlier` and `self`.
    pub fn since(&self, earlier: &CountSnapshot) -> CountSnapshot {
        CountSnapshot {
            get: self.get - earlier.get,
            post: self.post - earlier.post,
            put: self.put - earlier.put,
            patch: self.patch - earlier.patch,
            delete: self.delete - earlier.delete,
            events: self.events - earlier.events,
        }
    }
}

impl RequestCounts {
    fn record(&self, method: &Method, dry_run: bool, event: bool) {
        // Dry-runs change nothing; they are counted as reads so `writes()` means writes.
        let slot = if dry_run || *method == Method::GET {
            &self.get
        } else if event {
            &self.events
        } else {
            match *method {
                Method::POST => &self.post,
                Method::PUT => &self.put,
                Method::PATCH => &self.patch,
                Method::DELETE => &self.delete,
                _ => &self.get,
            }
        };
        slot.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> CountSnapshot {
        CountSnapshot {
            get: self.get.load(Ordering::Relaxed),
            post: self.post.load(Ordering::Relaxed),
            put: self.put.load(Ordering::Relaxed),
            patch: self.patch.load(Ordering::Relaxed),
            delete: self.delete.load(Ordering::Relaxed),
            events: self.events.load(Ordering::Relaxed),
        }
    }
}

/// Client-side request limit (`--kube-api-qps`, `--kube-api-burst`): at most `burst`
/// requests per `burst / qps` seconds, per client (a fixed window, so the average rate is
/// `qps` and short bursts up to `burst` pass at once).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Requests per second on average; `0` means no limit.
    pub qps: f32,
    /// Requests that may pass at once.
    pub burst: u32,
}

impl RateLimit {
    fn window(&self) -> Option<(u64, std::time::Duration)> {
        if self.qps <= 0.0 || self.burst == 0 {
            return None;
        }
        let secs = f64::from(self.burst) / f64::from(self.qps);
        Some((
            u64::from(self.burst),
            std::time::Duration::from_secs_f64(secs),
        ))
    }
}

/// Builds a client from `config` whose requests are counted in `counts`.
pub fn counted_client(config: Config, counts: Arc<RequestCounts>) -> Result<Client, kube::Error> {
    limited_client(config, counts, None)
}

/// Like [`counted_client`], with an optional client-side rate limit.
pub fn limited_client(
    config: Config,
    counts: Arc<RequestCounts>,
    limit: Option<RateLimit>,
) -> Result<Client, kube::Error> {
    flagged_client(config, counts, limit, None)
}

/// Clears `flag` on every HTTP answer, whatever its status.
fn answered_by<T>(flag: Arc<AtomicBool>) -> impl Fn(T) -> T + Clone {
    move |r| {
        flag.store(false, Ordering::Relaxed);
        r
    }
}

/// Like [`limited_client`]; with `transport`, every request records there whether it got
/// no HTTP answer at all (connection refused, reset, TLS failure): how a remote cluster
/// that cannot be reached is told from one that answers with an error (SPEC §31).
fn flagged_client(
    config: Config,
    counts: Arc<RequestCounts>,
    limit: Option<RateLimit>,
    transport: Option<Arc<AtomicBool>>,
) -> Result<Client, kube::Error> {
    let layer = tower::util::MapRequestLayer::new(move |req: Request<Body>| {
        let dry_run = req.uri().query().is_some_and(|q| q.contains("dryRun=All"));
        let event = req.uri().path().starts_with("/apis/events.k8s.io/");
        counts.record(req.method(), dry_run, event);
        req
    });
    let failed = transport.clone().unwrap_or_default();
    let answered = transport.unwrap_or_default();
    let on_err = tower::util::MapErrLayer::new(move |e: tower::BoxError| {
        failed.store(true, Ordering::Relaxed);
        e
    });
    let on_ok = tower::util::MapResponseLayer::new(answered_by(answered));
    let builder = ClientBuilder::try_from(config)?
        .with_layer(&on_err)
        .with_layer(&on_ok)
        .with_layer(&layer);
    Ok(match limit.and_then(|l| l.window()) {
        Some((n, per)) => builder
            .with_layer(&tower::limit::RateLimitLayer::new(n, per))
            .build(),
        None => builder.build(),
    })
}

/// The operator's client and cached impersonating clients.
pub struct Clients {
    config: Config,
    operator: Client,
    counts: Arc<RequestCounts>,
    limit: Option<RateLimit>,
    /// Where transport failures are recorded (remote clusters only).
    transport: Option<Arc<AtomicBool>>,
    by_identity: Mutex<HashMap<(String, String), Client>>,
}

impl Clients {
    /// Clients for `config`, without a request limit.
    pub fn new(config: Config) -> Result<Self, kube::Error> {
        Self::with_limit(config, None)
    }

    /// Clients whose requests are rate limited client-side.
    pub fn with_limit(config: Config, limit: Option<RateLimit>) -> Result<Self, kube::Error> {
        Self::build(config, limit, None)
    }

    /// Clients of a remote cluster, recording transport failures in `transport`.
    pub fn with_transport_flag(
        config: Config,
        limit: Option<RateLimit>,
        transport: Arc<AtomicBool>,
    ) -> Result<Self, kube::Error> {
        Self::build(config, limit, Some(transport))
    }

    fn build(
        config: Config,
        limit: Option<RateLimit>,
        transport: Option<Arc<AtomicBool>>,
    ) -> Result<Self, kube::Error> {
        let counts = Arc::new(RequestCounts::default());
        let operator = flagged_client(config.clone(), counts.clone(), limit, transport.clone())?;
        Ok(Self {
            config,
            operator,
            counts,
            limit,
            transport,
            by_identity: Mutex::new(HashMap::new()),
        })
    }

    /// The client-side request limit these clients were built with.
    pub fn limit(&self) -> Option<RateLimit> {
        self.limit
    }

    /// The operator's own identity: reads of releases, sources, ServiceAccounts.
    pub fn operator(&self) -> Client {
        self.operator.clone()
    }

    /// The operator's identity on a client with its own rate limiter (for events, so they
    /// never queue behind or in front of status writes); its requests are counted too.
    pub fn operator_events(&self) -> Result<Client, kube::Error> {
        limited_client(self.config.clone(), self.counts.clone(), self.limit)
    }

    /// Requests sent so far, by verb.
    pub fn counts(&self) -> CountSnapshot {
        self.counts.snapshot()
    }

    /// The client for `identity`, or the operator's when `None`.
    pub fn for_identity(&self, identity: Option<&Impersonation>) -> Result<Client, ApiError> {
        let Some(id) = identity else {
            return Ok(self.operator());
        };
        let key = (id.namespace.clone(), id.service_account.clone());
        let mut cache = self
            .by_identity
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = cache.get(&key) {
            return Ok(client.clone());
        }
        // `Impersonate-User` only (SPEC §15): the API server adds the ServiceAccount's
        // groups itself, so the operator holds no right to impersonate groups.
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(id.user.clone());
        config.auth_info.impersonate_groups = None;
        let client = flagged_client(
            config,
            self.counts.clone(),
            self.limit,
            self.transport.clone(),
        )
        .map_err(|e| ApiError::Other {
            code: 0,
            message: format!("building the impersonating client: {e}"),
        })?;
        cache.insert(key, client.clone());
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_window_is_burst_over_qps() {
        let l = RateLimit {
            qps: 50.0,
            burst: 100,
        };
        assert_eq!(l.window(), Some((100, std::time::Duration::from_secs(2))));
        assert_eq!(
            RateLimit {
                qps: 0.0,
                burst: 10
            }
            .window(),
            None
        );
    }
}
