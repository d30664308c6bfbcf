//! events.k8s.io/v1 events regarding the release, reported by `opm-controller` (SPEC §11).
//!
//! A repeat of an event (same object, type, reason, action and note, as client-go's event
//! broadcaster keys them) within [`FOLDING_WINDOW`] of its last occurrence is folded into
//! the first one's `series` (one PATCH of `series.count` and `series.lastObservedTime`)
//! instead of a new Event; anything else creates an Event.
//!
//! Folding needs to remember recent events, and only a little of each: the Event's name, its
//! count and when it last happened, under a digest of what makes it the same event. kube-runtime's
//! `Recorder` keeps whole `Event` objects in a map per recorder (~5.8 KB per release in a
//! heap profile at 3 000 releases, most of the operator's per-release memory after the
//! release store); here an entry is about a hundred bytes, and one bounded map serves the
//! fleet. Entries idle past the window are swept from the least recently used end, so the
//! map holds the events of the last minutes, not the fleet's.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Error as KubeError};
use opm_core::constants::FIELD_MANAGER;
use opm_core::{Event, EventType};

use crate::kube::short_key::{ShortKey, short_key};

/// Longest note the API accepts, in bytes.
const NOTE_MAX: usize = 1024;

/// Recent events remembered for folding; past it the least recently used is forgotten (its
/// next repeat starts a new Event rather than a series), so memory stays bounded in any
/// fleet whatever its rate of events.
const RECENT: usize = 32 * 1024;

/// A repeat folds into a series only within this long of the event's last occurrence
/// (kube-runtime's and client-go's window); older entries hold nothing that can fold.
const FOLDING_WINDOW: Duration = Duration::from_secs(6 * 60);

/// What makes two events the same event (the object they regard, and what they say), as
/// a [`short_key`]: an entry is remembered per recent event, and the fields themselves
/// (names, reason, action, a note of up to a kilobyte) would be most of its size.
type Key = ShortKey;

/// An Event that a repeat folds into.
#[derive(Debug, Clone)]
struct Recent {
    name: String,
    count: i32,
    last: Instant,
}

/// Publishes the core's events; failures are logged, never fatal (fire and forget).
#[derive(Clone)]
pub struct EventSink {
    client: Client,
    instance: String,
    recent: Arc<Mutex<lru::LruCache<Key, Recent>>>,
}

/// What to send for one event.
#[derive(Debug, PartialEq)]
enum Send {
    /// A new Event.
    Create,
    /// Occurrence `count` of the Event `name`.
    Fold { name: String, count: i32 },
}

impl EventSink {
    /// A publisher on `client`, reporting as `opm-controller` (instance: `$POD_NAME`).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            instance: std::env::var("POD_NAME").unwrap_or_else(|_| FIELD_MANAGER.into()),
            // Unbounded for the map's sake (a bounded one reserves room for every entry at
            // once); `remember` keeps it at `RECENT`.
            recent: Arc::new(Mutex::new(lru::LruCache::unbounded())),
        }
    }

    fn key(event: &Event, regarding: &ObjectReference, note: &str) -> Key {
        let warning = event.event_type == EventType::Warning;
        short_key([
            regarding.kind.as_deref().unwrap_or_default(),
            regarding.namespace.as_deref().unwrap_or_default(),
            regarding.name.as_deref().unwrap_or_default(),
            regarding.uid.as_deref().unwrap_or_default(),
            if warning { "Warning" } else { "Normal" },
            event.reason.as_str(),
            event.action.as_str(),
            note,
        ])
    }

    fn lock(&self) -> MutexGuard<'_, lru::LruCache<Key, Recent>> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `key` at `now` folds into a recent Event; first forgets the entries idle
    /// past the window (the least recently used come first, so the sweep stops at the
    /// first recent one).
    fn decide(&self, key: &Key, now: Instant) -> Send {
        let mut recent = self.lock();
        while let Some((_, r)) = recent.peek_lru() {
            if now.saturating_duration_since(r.last) <= FOLDING_WINDOW {
                break;
            }
            recent.pop_lru();
        }
        match recent.get(key) {
            Some(r) => Send::Fold {
                name: r.name.clone(),
                count: r.count + 1,
            },
            None => Send::Create,
        }
    }

    /// Remembers that the Event `name` now stands at `count` occurrences.
    fn remember(&self, key: Key, name: String, count: i32, now: Instant) {
        let mut recent = self.lock();
        recent.put(
            key,
            Recent {
                name,
                count,
                last: now,
            },
        );
        while recent.len() > RECENT {
            recent.pop_lru();
        }
    }

    /// Forgets `key` (its Event is gone or could not be written).
    fn forget(&self, key: &Key) {
        let mut recent = self.lock();
        recent.pop(key);
    }

    /// Publishes `event` regarding `regarding`: folded into a recent repeat's series, else
    /// a new Event. A failure is logged and forgotten (events are fire and forget).
    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) {
        let note = note_of(event);
        let key = Self::key(event, regarding, &note);
        let now = Instant::now();
        let api: Api<KubeEvent> = Api::namespaced(
            self.client.clone(),
            regarding.namespace.as_deref().unwrap_or("default"),
        );
        let sent = match self.decide(&key, now) {
            Send::Fold { name, count } => match fold(&api, &name, count).await {
                Ok(()) => Ok((name, count)),
                // Expired (the API server's event TTL) or deleted: start a new one.
                Err(KubeError::Api(e)) if e.code == 404 => {
                    self.create(&api, event, regarding, note).await
                }
                Err(e) => Err(e),
            },
            Send::Create => self.create(&api, event, regarding, note).await,
        };
        match sent {
            Ok((name, count)) => self.remember(key, name, count, now),
            Err(e) => {
                self.forget(&key);
                tracing::warn!(reason = %event.reason, error = %e, "publishing an event failed");
            }
        }
    }

    /// Creates the Event; answers its name and count (1).
    async fn create(
        &self,
        api: &Api<KubeEvent>,
        event: &Event,
        regarding: &ObjectReference,
        note: String,
    ) -> Result<(String, i32), KubeError> {
        let now = Timestamp::now();
        let name = event_name(
            regarding.name.as_deref().unwrap_or(FIELD_MANAGER),
            now.as_nanosecond(),
        );
        let ev = KubeEvent {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: regarding.namespace.clone(),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(
                match event.event_type {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            reason: Some(event.reason.to_string()),
            action: Some(event.action.clone()),
            note: Some(note),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(FIELD_MANAGER.into()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        api.create(&PostParams::default(), &ev).await?;
        Ok((name, 1))
    }
}

/// The note an Event of `event` carries: without control characters and cut to what the
/// API accepts. The core removed control characters already; an event is the last stop
/// before a terminal, so again here (SPEC §24). The events webhook sends the same text.
pub fn note_of(event: &Event) -> String {
    truncate(
        &opm_core::conditions::without_control(&event.note),
        NOTE_MAX,
    )
}

/// Longest object name the API accepts (a DNS subdomain).
const NAME_MAX: usize = 253;

/// `<regarding>.<nanoseconds in hex>`, as client-go names events; a release name near the
/// limit is shortened (to a character that may end a DNS label) so the Event is accepted.
fn event_name(regarding: &str, nanos: i128) -> String {
    let suffix = format!(".{nanos:x}");
    let mut base = truncate(regarding, NAME_MAX - suffix.len());
    while base.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        base.pop();
    }
    base + &suffix
}

/// Patches occurrence `count` of the Event `name` into its series.
async fn fold(api: &Api<KubeEvent>, name: &str, count: i32) -> Result<(), KubeError> {
    let series = EventSeries {
        count,
        last_observed_time: MicroTime(Timestamp::now()),
    };
    let patch = serde_json::json!({ "series": series });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// Messages are cut as the core cuts condition messages (one rule for both).
pub(crate) use opm_core::conditions::truncate;

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::reason::Reason;

    fn sink() -> EventSink {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        EventSink::new(Client::try_from(config).expect("a client"))
    }

    fn regarding(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("Release".into()),
            namespace: Some("team-a".into()),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    fn event(note: &str) -> Event {
        Event {
            event_type: EventType::Warning,
            reason: Reason::ApplyFailed,
            action: "Apply".into(),
            note: note.into(),
        }
    }

    #[tokio::test]
    async fn a_repeat_folds_until_it_is_idle_past_the_window() {
        let sink = sink();
        let t0 = Instant::now();
        let minutes = |m: u64| t0 + Duration::from_secs(60 * m);
        let key = EventSink::key(&event("boom"), &regarding("a"), "boom");
        assert_eq!(sink.decide(&key, t0), Send::Create);
        sink.remember(key, "a.1".into(), 1, t0);
        assert_eq!(
            sink.decide(&key, minutes(5)),
            Send::Fold {
                name: "a.1".into(),
                count: 2
            }
        );
        sink.remember(key, "a.1".into(), 2, minutes(5));
        // Within the window of its last occurrence, not of its first.
        assert_eq!(
            sink.decide(&key, minutes(11)),
            Send::Fold {
                name: "a.1".into(),
                count: 3
            }
        );
        assert_eq!(sink.decide(&key, minutes(12)), Send::Create);
        assert_eq!(sink.recent.lock().expect("lock").len(), 0, "swept");
    }

    #[tokio::test]
    async fn another_note_object_or_reason_is_another_event() {
        let sink = sink();
        let t0 = Instant::now();
        let key = EventSink::key(&event("boom"), &regarding("a"), "boom");
        sink.remember(key, "a.1".into(), 1, t0);
        for other in [
            EventSink::key(&event("bang"), &regarding("a"), "bang"),
            EventSink::key(&event("boom"), &regarding("b"), "boom"),
            EventSink::key(
                &Event {
                    reason: Reason::SourceNotReady,
                    ..event("boom")
                },
                &regarding("a"),
                "boom",
            ),
        ] {
            assert_eq!(sink.decide(&other, t0), Send::Create, "{other:?}");
        }
    }

    #[tokio::test]
    async fn never_more_than_the_cap_and_the_newest_stay() {
        let sink = sink();
        let t0 = Instant::now();
        for n in 0..RECENT + 10 {
            let key = EventSink::key(&event("x"), &regarding(&format!("r{n}")), "x");
            sink.remember(key, format!("r{n}.1"), 1, t0);
        }
        assert_eq!(sink.recent.lock().expect("lock").len(), RECENT);
        let newest = EventSink::key(&event("x"), &regarding(&format!("r{}", RECENT + 9)), "x");
        assert!(matches!(
            sink.decide(&newest, t0),
            Send::Fold { count: 2, .. }
        ));
        let oldest = EventSink::key(&event("x"), &regarding("r0"), "x");
        assert_eq!(sink.decide(&oldest, t0), Send::Create);
    }

    #[test]
    fn event_names_fit_the_api_limit() {
        assert_eq!(event_name("web", 0x1f), "web.1f");
        let nanos = 1_796_300_000_000_000_000;
        let long = format!("{}-{}", "a".repeat(230), "b".repeat(22));
        assert_eq!(long.len(), 253);
        let name = event_name(&long, nanos);
        assert!(name.len() <= NAME_MAX, "{}", name.len());
        assert!(name.starts_with(&"a".repeat(230)));
        // Cut right after the '-': the label may not end with it.
        let cut = event_name(&format!("{}-b", "a".repeat(235)), nanos);
        assert!(cut.len() <= NAME_MAX);
        assert!(!cut.contains("-."), "{cut}");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("abc", 10), "abc");
    }
}
