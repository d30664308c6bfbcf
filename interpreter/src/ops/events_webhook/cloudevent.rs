//! One recorded event as a CloudEvent 1.0 in structured JSON mode
//! (`application/cloudevents+json`): `type` is `dev.opmodel.release.<Reason>`, `source`
//! names the release as `<Kind>/<namespace>/<name>`, `data` carries what the Kubernetes
//! Event says (its note exactly as the Event's, so no more than the Event ever shows).

use k8s_openapi::api::core::v1::ObjectReference;
use opm_core::{Event, EventType};
use serde_json::{Value, json};

/// The media type of a structured-mode CloudEvent.
pub const CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";

/// The prefix of every event's `type`.
pub const TYPE_PREFIX: &str = "dev.opmodel.release.";

/// What the event regards: the release, and the generation the attempt saw.
#[derive(Debug, Clone, Copy)]
pub struct Regarding<'a> {
    /// The release's reference (kind, namespace, name, uid).
    pub object: &'a ObjectReference,
    /// `metadata.generation` as the attempt read it.
    pub generation: Option<i64>,
}

/// The CloudEvent of `event`, with `note` the text the Kubernetes Event carries.
pub fn cloud_event(
    id: &str,
    time: jiff::Timestamp,
    event: &Event,
    regarding: Regarding<'_>,
    note: &str,
    instance: &str,
) -> Value {
    let r = regarding.object;
    let kind = r.kind.as_deref().unwrap_or_default();
    let namespace = r.namespace.as_deref().unwrap_or_default();
    let name = r.name.as_deref().unwrap_or_default();
    json!({
        "specversion": "1.0",
        "id": id,
        "source": format!("{kind}/{namespace}/{name}"),
        "type": format!("{TYPE_PREFIX}{}", event.reason),
        "subject": name,
        "time": time.to_string(),
        "datacontenttype": "application/json",
        "data": {
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "uid": r.uid,
            "generation": regarding.generation,
            "type": match event.event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            },
            "reason": event.reason.as_str(),
            "action": event.action,
            "message": note,
            "reportingController": opm_core::constants::FIELD_MANAGER,
            "reportingInstance": instance,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::reason::Reason;

    #[test]
    fn a_structured_cloudevent_of_the_release() {
        let r = ObjectReference {
            kind: Some("ModuleRelease".into()),
            namespace: Some("team-a".into()),
            name: Some("web".into()),
            uid: Some("u-1".into()),
            ..Default::default()
        };
        let ev = Event {
            event_type: EventType::Warning,
            reason: Reason::ApplyFailed,
            action: "Apply".into(),
            note: "raw".into(),
        };
        let time: jiff::Timestamp = "2026-12-05T07:00:00Z".parse().unwrap();
        let v = cloud_event(
            "abc-1",
            time,
            &ev,
            Regarding {
                object: &r,
                generation: Some(3),
            },
            "the note",
            "pod-0",
        );
        assert_eq!(v["specversion"], "1.0");
        assert_eq!(v["type"], "dev.opmodel.release.ApplyFailed");
        assert_eq!(v["source"], "ModuleRelease/team-a/web");
        assert_eq!(v["time"], "2026-12-05T07:00:00Z");
        assert_eq!(v["data"]["generation"], 3);
        assert_eq!(v["data"]["type"], "Warning");
        assert_eq!(
            v["data"]["message"], "the note",
            "the Event's text, not the raw note"
        );
        assert_eq!(v["data"]["uid"], "u-1");
    }
}
