//! `kubectl opm events KIND/NAME`: the operator's events about one release (events.k8s.io/v1,
//! SPEC §11), oldest first.

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use opm_core::ReleaseKey;
use serde_json::json;

use crate::connect::Session;
use crate::error::{CliError, Result};
use crate::output::{self, Format};

/// When an event last happened: its series' last observation, else its time.
fn last_seen(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Whether the event is about this release (not another object of the same name).
fn regards(e: &Event, key: &ReleaseKey) -> bool {
    e.regarding.as_ref().is_some_and(|r| {
        r.name.as_deref() == Some(key.name.as_str())
            && r.kind.as_deref() == Some(key.kind.as_str())
            && r.api_version
                .as_deref()
                .is_some_and(|v| v.starts_with("releases.opmodel.dev/"))
    })
}

pub async fn list(s: &Session, key: &ReleaseKey) -> Result<Vec<Event>> {
    let api: Api<Event> = Api::namespaced(s.client.clone(), &key.namespace);
    let mut evs: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .map_err(|e| CliError::api(format!("listing events in namespace {}", key.namespace), &e))?
        .items
        .into_iter()
        .filter(|e| regards(e, key))
        .collect();
    evs.sort_by_key(last_seen);
    Ok(evs)
}

pub fn render(evs: &[Event], format: Format, now: Timestamp) -> Result<String> {
    match format {
        Format::Yaml | Format::Json => {
            let mut items: Vec<serde_json::Value> = Vec::new();
            for e in evs {
                let mut v = serde_json::to_value(e).unwrap_or_default();
                if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    m.remove("managedFields");
                }
                items.push(v);
            }
            output::structured(
                &json!({"apiVersion": "v1", "kind": "List", "items": items}),
                format,
            )
        }
        Format::Table | Format::Wide => {
            let mut header = vec!["LAST SEEN", "TYPE", "REASON", "ACTION"];
            if format == Format::Wide {
                header.push("COUNT");
            }
            header.push("MESSAGE");
            let rows: Vec<Vec<String>> = evs
                .iter()
                .map(|e| {
                    let mut r = vec![
                        output::age(last_seen(e), now),
                        e.type_.clone().unwrap_or_default(),
                        e.reason.clone().unwrap_or_default(),
                        e.action.clone().unwrap_or_default(),
                    ];
                    if format == Format::Wide {
                        r.push(e.series.as_ref().map_or(1, |s| s.count).to_string());
                    }
                    r.push(
                        e.note
                            .clone()
                            .unwrap_or_default()
                            .split_whitespace()
                            .collect::<Vec<_>>()
                            .join(" "),
                    );
                    r
                })
                .collect();
            Ok(output::table(&header, &rows))
        }
    }
}
