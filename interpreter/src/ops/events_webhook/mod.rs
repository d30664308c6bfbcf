//! `--events-webhook URL` (SPEC §32): every Kubernetes Event the operator records is also
//! POSTed to `URL` as a CloudEvent ([`cloudevent`]).
//!
//! Recording an event only queues it ([`EventsWebhook::enqueue`]: a lock and a queue
//! insert, no IO), so a receiver that is slow, down or hanging never slows a reconcile. One
//! task ([`sender`]) sends the queue in order. Which event goes next, when a failed one is
//! tried again and which one a full queue drops is the core's
//! [`opm_core::event_delivery::Outbox`]; this module only POSTs and reports the answers.
//! The queue lives in memory: what is queued when the process stops is lost.

pub mod cloudevent;
pub mod endpoint;
mod sender;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use opm_core::Event;
use opm_core::event_delivery::{DeliveryLimits, DeliveryStats, Outbox};
use tokio::sync::Notify;

pub use endpoint::{Endpoint, EndpointParser};

/// How long one POST may take (connecting included) before it counts as failed and is
/// retried; a hanging receiver holds the queue this long per try, never a reconcile.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What `--events-webhook*` configure.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The receiver.
    pub endpoint: Endpoint,
    /// Queue size and longest backoff.
    pub limits: DeliveryLimits,
    /// Deadline of one POST.
    pub request_timeout: Duration,
}

/// The queued CloudEvents, as the JSON bytes to POST.
type Payload = Arc<str>;

struct Shared {
    outbox: Mutex<Outbox<Payload>>,
    /// Wakes the sender when an event is queued (or the webhook is dropped).
    wake: Arc<Notify>,
    /// Unique per process: the `id`s of two operator runs never collide.
    id_prefix: String,
    next_id: AtomicU64,
    instance: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Outbox<Payload>> {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The sender holds only a weak reference: woken, it finds it gone and ends.
        self.wake.notify_one();
    }
}

/// The queue that reconciles feed; cheap to clone.
#[derive(Clone)]
pub struct EventsWebhook {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EventsWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventsWebhook")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl EventsWebhook {
    /// The queue, and its sender spawned on the current tokio runtime (it ends when the
    /// last clone of the returned handle is dropped).
    pub fn start(config: WebhookConfig) -> Result<Self, reqwest::Error> {
        let wake = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            outbox: Mutex::new(Outbox::new(config.limits)),
            wake: wake.clone(),
            id_prefix: format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)),
            next_id: AtomicU64::new(0),
            instance: std::env::var("POD_NAME")
                .unwrap_or_else(|_| opm_core::constants::FIELD_MANAGER.into()),
        });
        let sender = sender::Sender::new(&config, Arc::downgrade(&shared), wake)?;
        tokio::spawn(sender.run());
        tracing::info!(
            receiver = %config.endpoint,
            queue_size = config.limits.queue_size,
            max_backoff = ?config.limits.max_backoff,
            "events webhook on"
        );
        Ok(Self { shared })
    }

    /// Queues `event` regarding the release `regarding` (at `generation`) with `note`, the
    /// text its Kubernetes Event carries. Never waits: a full queue drops its oldest event.
    pub fn enqueue(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        generation: Option<i64>,
        note: &str,
    ) {
        let n = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", self.shared.id_prefix);
        let body = cloudevent::cloud_event(
            &id,
            jiff::Timestamp::now(),
            event,
            cloudevent::Regarding {
                object: regarding,
                generation,
            },
            note,
            &self.shared.instance,
        )
        .to_string();
        let dropped = self.shared.lock().push(Arc::from(body));
        if dropped.is_some() {
            tracing::debug!(reason = %event.reason, "events webhook queue full: dropped the oldest event");
        }
        self.shared.wake.notify_one();
    }

    /// Counts so far and the queue's length (the metrics read them at each scrape).
    pub fn stats(&self) -> DeliveryStats {
        self.shared.lock().stats()
    }
}
