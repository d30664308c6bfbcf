//! events.k8s.io/v1 events regarding the release, reported by `opm-controller` (SPEC §11),
//! through kube's `Recorder` (which also folds repeats into an event series).
//!
//! One `Recorder` per release, not one for the operator: a `Recorder` sweeps its whole
//! cache of recent events on every publish, so a single one shared by a fleet made each
//! event cost O(events of every release in the last minutes) (18 % of the operator's CPU
//! half-way through converging 10 000 Releases, `perf`). Per release, the sweep covers only
//! that release's events, and repeats still fold into a series because a release's events
//! always go through its own recorder.

use std::sync::{Arc, Mutex};

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

/// The object an event regards, as its recorder's key.
type Regarding = (Option<String>, Option<String>, Option<String>);

/// Publishes the core's events; failures are logged, never fatal (fire and forget).
#[derive(Clone)]
pub struct EventSink {
    client: Client,
    reporter: Reporter,
    recorders: Arc<Mutex<lru::LruCache<Regarding, Recorder>>>,
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
        let key = (
            regarding.kind.clone(),
            regarding.namespace.clone(),
            regarding.name.clone(),
        );
        let mut recorders = self.recorders.lock().unwrap_or_else(|p| p.into_inner());
        recorders
            .get_or_insert(key, || {
                Recorder::new(self.client.clone(), self.reporter.clone())
            })
            .clone()
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

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("abc", 10), "abc");
    }
}
