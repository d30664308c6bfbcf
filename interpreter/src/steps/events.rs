//! events.k8s.io/v1 events regarding the release, reported by `opm-controller` (SPEC §11),
//! through kube's `Recorder` (which also folds repeats into an event series).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeType, Recorder, Reporter};
use opm_core::constants::FIELD_MANAGER;
use opm_core::{Event, EventType};

/// Longest note the API accepts, in bytes.
const NOTE_MAX: usize = 1024;

/// Publishes the core's events; failures are logged, never fatal (fire and forget).
#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
}

impl EventSink {
    pub fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: FIELD_MANAGER.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
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
        if let Err(e) = self.recorder.publish(&ev, regarding).await {
            tracing::warn!(reason = %event.reason, error = %e, "publishing an event failed");
        }
    }
}

/// Messages are cut as the core cuts condition messages (one rule for both).
pub(crate) use opm_core::conditions::truncate;

#[cfg(test)]
mod tests {
    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(super::truncate("héllo", 2), "h");
        assert_eq!(super::truncate("abc", 10), "abc");
    }
}
