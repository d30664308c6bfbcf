//! events.k8s.io/v1 events regarding the release, reported by `opm-controller` (SPEC §11),
//! through kube's `Recorder` (which also folds repeats into an event series).
//!
//! One `Recorder` per release, not one for the operator: a `Recorder` sweeps its whole
//! cache of recent events on every publish, so a single one shared by a fleet made each
//! event cost O(events of every release in the last minutes) (18 % of the operator's CPU
//! half-way through converging 10 000 Releases, `perf`). Per release, the sweep covers only
//! that release's events, and repeats still fold into a series because a release's events
//! always go through its own recorder.
//!
//! A recorder keeps whole `Event` objects (~5.8 KB per release in a heap profile at 3 000
//! releases) and sweeps them only on its own next publish, so an idle release's recorder
//! holds events that can no longer fold into anything. Recorders unused for longer than
//! kube-runtime's folding window are dropped: memory follows the releases with recent
//! events, not the fleet, and no series is cut short.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeType, Recorder, Reporter};
use opm_core::constants::FIELD_MANAGER;
use opm_core::{Event, EventType};

/// Longest note the API accepts, in bytes.
const NOTE_MAX: usize = 1024;

/// Releases whose recorder is kept; past it the least recently used one goes (its next
/// event starts a new event rather than a series), so memory stays bounded in any fleet.
const RECORDERS: usize = 16 * 1024;

/// kube-runtime's `Recorder` folds a repeat into a series only within 6 minutes of the
/// event before; a recorder idle for longer holds nothing that can fold.
const FOLDING_WINDOW: Duration = Duration::from_secs(6 * 60);

/// The object an event regards, as its recorder's key.
type Regarding = (Option<String>, Option<String>, Option<String>);

/// Publishes the core's events; failures are logged, never fatal (fire and forget).
#[derive(Clone)]
pub struct EventSink {
    client: Client,
    reporter: Reporter,
    /// Each with its last use.
    recorders: Arc<Mutex<lru::LruCache<Regarding, (Recorder, Instant)>>>,
}

impl EventSink {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            reporter: Reporter {
                controller: FIELD_MANAGER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
            recorders: Arc::new(Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(RECORDERS).expect("a constant above zero"),
            ))),
        }
    }

    /// The recorder of the object `regarding` refers to (made on its first event).
    fn recorder(&self, regarding: &ObjectReference) -> Recorder {
        self.recorder_at(regarding, Instant::now())
    }

    /// [`Self::recorder`] at `now`; first drops the recorders idle past the folding window
    /// (the least recently used come first, so the sweep stops at the first recent one).
    fn recorder_at(&self, regarding: &ObjectReference, now: Instant) -> Recorder {
        let key = (
            regarding.kind.clone(),
            regarding.namespace.clone(),
            regarding.name.clone(),
        );
        let mut recorders = self.recorders.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((_, (_, used))) = recorders.peek_lru() {
            if now.saturating_duration_since(*used) <= FOLDING_WINDOW {
                break;
            }
            recorders.pop_lru();
        }
        let (recorder, used) = recorders.get_or_insert_mut(key, || {
            (
                Recorder::new(self.client.clone(), self.reporter.clone()),
                now,
            )
        });
        *used = now;
        recorder.clone()
    }

    pub async fn publish(&self, event: &Event, regarding: &ObjectReference) {
        let ev = KubeEvent {
            type_: match event.event_type {
                EventType::Normal => KubeType::Normal,
                EventType::Warning => KubeType::Warning,
            },
            reason: event.reason.to_string(),
            note: Some(truncate(&event.note, NOTE_MAX)),
            action: event.action.clone(),
            secondary: None,
        };
        if let Err(e) = self.recorder(regarding).publish(&ev, regarding).await {
            tracing::warn!(reason = %event.reason, error = %e, "publishing an event failed");
        }
    }
}

/// Messages are cut as the core cuts condition messages (one rule for both).
pub(crate) use opm_core::conditions::truncate;

#[cfg(test)]
mod tests {
    use super::*;

    fn regarding(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("Release".into()),
            namespace: Some("team-a".into()),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn one_recorder_per_release_and_never_more_than_the_cap() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let sink = EventSink::new(Client::try_from(config).expect("a client"));
        sink.recorder(&regarding("a"));
        sink.recorder(&regarding("a"));
        sink.recorder(&regarding("b"));
        assert_eq!(sink.recorders.lock().expect("lock").len(), 2);
        for n in 0..RECORDERS + 10 {
            sink.recorder(&regarding(&format!("r{n}")));
        }
        let recorders = sink.recorders.lock().expect("lock");
        assert_eq!(recorders.len(), RECORDERS);
        assert!(recorders.contains(&(
            Some("Release".into()),
            Some("team-a".into()),
            Some(format!("r{}", RECORDERS + 9))
        )));
    }

    #[tokio::test]
    async fn recorders_idle_past_the_folding_window_are_dropped() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        let sink = EventSink::new(Client::try_from(config).expect("a client"));
        let t0 = Instant::now();
        let minutes = |m: u64| t0 + Duration::from_secs(60 * m);
        sink.recorder_at(&regarding("old"), t0);
        sink.recorder_at(&regarding("kept"), minutes(1));
        // Within the window nothing goes.
        sink.recorder_at(&regarding("new"), minutes(6));
        assert_eq!(sink.recorders.lock().expect("lock").len(), 3);
        // "old" is past it (6 min + 1), "kept" (used at 1) is not yet.
        sink.recorder_at(&regarding("newer"), minutes(7));
        let names: Vec<_> = sink
            .recorders
            .lock()
            .expect("lock")
            .iter()
            .map(|(k, _)| k.2.clone().unwrap_or_default())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(!names.contains(&"old".to_string()), "{names:?}");
        // A use keeps a recorder: "kept" used again at 7 survives a sweep at 13.
        sink.recorder_at(&regarding("kept"), minutes(7));
        sink.recorder_at(&regarding("late"), minutes(13));
        let recorders = sink.recorders.lock().expect("lock");
        let key = |n: &str| {
            (
                Some("Release".into()),
                Some("team-a".into()),
                Some(n.into()),
            )
        };
        assert!(recorders.contains(&key("kept")));
        assert!(recorders.contains(&key("late")));
        assert!(
            !recorders.contains(&key("new")),
            "used at 6, idle 7 minutes at 13"
        );
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("abc", 10), "abc");
    }
}
