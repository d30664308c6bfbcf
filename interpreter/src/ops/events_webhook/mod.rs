//! `--events-webhook URL` (SPEC §32): every Kubernetes Event the operator records is also
//! POSTed to `URL` as a CloudEvent ([`cloudevent`]).
//!
//! Recording an event only queues it ([`EventsWebhook::enqueue`]: a lock and a queue
//! insert, no IO), so a receiver that is slow, down or hanging never slows a reconcile.
//! One task (the private `sender`) sends the queue in order. Which event goes next, when a
//! failed one is tried again and which one a full queue drops is the core's
//! [`opm_core::event_delivery::Outbox`]; this module only POSTs and reports the answers.
//! The queue lives in memory: a stopping process waits a few seconds for it to drain
//! ([`SHUTDOWN_DRAIN`]); what it still holds then is lost.

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

/// How long a stopping operator waits for the queue to drain (after its attempts finished
/// and its Lease is released), within the pod's termination grace period; what is still
/// queued then is lost.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

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

    /// Queues `event` regarding the release `regarding` (at `generation`). Never waits: a
    /// full queue drops its oldest event.
    pub fn enqueue(&self, event: &Event, regarding: &ObjectReference, generation: Option<i64>) {
        let body = self.payload(event, regarding, generation, jiff::Timestamp::now());
        let dropped = self.shared.lock().push(Arc::from(body));
        if dropped.is_some() {
            tracing::debug!(reason = %event.reason, "events webhook queue full: dropped the oldest event");
        }
        self.shared.wake.notify_one();
    }

    /// The CloudEvent of `event` as queued: the message is the text its Kubernetes Event
    /// carries ([`crate::steps::events::note_of`]: no control characters, at most 1 KiB),
    /// the `id` the next of this process.
    fn payload(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        generation: Option<i64>,
        now: jiff::Timestamp,
    ) -> String {
        let n = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", self.shared.id_prefix);
        cloudevent::cloud_event(
            &id,
            now,
            event,
            cloudevent::Regarding {
                object: regarding,
                generation,
            },
            &crate::steps::events::note_of(event),
            &self.shared.instance,
        )
        .to_string()
    }

    /// Waits until the queue is empty, at most `limit`; logs what it leaves behind.
    pub async fn drain(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let queued = self.stats().queued;
            if queued == 0 {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    queued,
                    "events webhook: stopping with events not delivered; they are lost"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Counts so far and the queue's length (the metrics read them at each scrape).
    pub fn stats(&self) -> DeliveryStats {
        self.shared.lock().stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::EventType;
    use opm_core::reason::Reason;

    fn webhook() -> EventsWebhook {
        EventsWebhook::start(WebhookConfig {
            // Nothing listens on port 9: events stay queued.
            endpoint: Endpoint::parse("http://127.0.0.1:9/").expect("URL"),
            limits: DeliveryLimits {
                queue_size: 3,
                max_backoff: Duration::from_secs(60),
            },
            request_timeout: Duration::from_secs(1),
        })
        .expect("webhook")
    }

    fn regarding() -> ObjectReference {
        ObjectReference {
            kind: Some("Release".into()),
            namespace: Some("team-a".into()),
            name: Some("web".into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_hostile_note_is_cleaned_and_cut_like_the_events() {
        let w = webhook();
        let event = Event {
            event_type: EventType::Warning,
            reason: Reason::RenderFailed,
            action: "Render".into(),
            note: format!("bad\u{1b}[31m red\r\n{}", "x".repeat(64 * 1024)),
        };
        let body = w.payload(&event, &regarding(), Some(2), jiff::Timestamp::UNIX_EPOCH);
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let msg = v["data"]["message"].as_str().expect("message");
        assert_eq!(
            msg,
            crate::steps::events::note_of(&event),
            "the Event's text"
        );
        assert!(msg.len() <= 1024, "{}", msg.len());
        // Line breaks stay, as in the Event; escapes and carriage returns go.
        assert!(!msg.chars().any(|c| c.is_control() && c != '\n'), "{msg:?}");
        assert!(msg.starts_with("bad[31m red\n"), "{msg:?}");
        assert!(body.len() < 2048, "one event stays small: {}", body.len());
    }

    #[tokio::test]
    async fn ids_are_unique_and_a_flood_never_grows_the_queue_past_its_bound() {
        let w = webhook();
        let event = Event {
            event_type: EventType::Normal,
            reason: Reason::Applied,
            action: "Apply".into(),
            note: "ok".into(),
        };
        let ids: std::collections::BTreeSet<String> = (0..5)
            .map(|_| {
                let body = w.payload(&event, &regarding(), None, jiff::Timestamp::UNIX_EPOCH);
                let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
                v["id"].as_str().expect("id").to_string()
            })
            .collect();
        assert_eq!(ids.len(), 5);
        for _ in 0..10_000 {
            w.enqueue(&event, &regarding(), Some(1));
        }
        let stats = w.stats();
        assert!(stats.queued <= 3, "{stats:?}");
        assert!(stats.dropped_queue_full >= 9_997, "{stats:?}");
        // A stop waits at most its limit for a receiver that never answers.
        let t = std::time::Instant::now();
        w.drain(Duration::from_millis(200)).await;
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
