//! `kubectl opm get [KIND[/NAME]]`: releases as a table (NAME, READY, REASON, REVISION, AGE,
//! NEXT RETRY; `-A` adds NAMESPACE, `-o wide` SOURCE and MESSAGE), or the objects as
//! YAML/JSON. Without a kind, both kinds are listed and names carry their kind (`mr/web`),
//! so a row can be pasted into the other verbs.

use jiff::Timestamp;
use opm_core::{Kind, ReleaseKey, ReleaseObject};
use serde_json::json;

use crate::connect::Session;
use crate::error::Result;
use crate::output::{self, Format};
use crate::releases;
use crate::target::{self, Target};

/// What `get` prints for these releases at `now` (no trailing message for an empty list:
/// the caller says that on stderr, as kubectl does).
pub fn render(
    items: &[ReleaseObject],
    format: Format,
    all_namespaces: bool,
    both_kinds: bool,
    single: bool,
    now: Timestamp,
) -> Result<String> {
    match format {
        Format::Yaml | Format::Json => {
            let objs: Vec<serde_json::Value> = items.iter().map(releases::printable).collect();
            if single && objs.len() == 1 {
                output::structured(&objs[0], format)
            } else {
                output::structured(
                    &json!({"apiVersion": "v1", "kind": "List", "items": objs}),
                    format,
                )
            }
        }
        Format::Table | Format::Wide => {
            let wide = format == Format::Wide;
            let mut header = Vec::new();
            if all_namespaces {
                header.push("NAMESPACE");
            }
            header.extend(["NAME", "READY", "REASON", "REVISION", "AGE", "NEXT RETRY"]);
            if wide {
                header.extend(["SUSPENDED", "SOURCE", "MESSAGE"]);
            }
            let rows: Vec<Vec<String>> = items
                .iter()
                .map(|o| row(o, all_namespaces, both_kinds, wide, now))
                .collect();
            Ok(output::table(&header, &rows))
        }
    }
}

fn row(o: &ReleaseObject, all_ns: bool, both: bool, wide: bool, now: Timestamp) -> Vec<String> {
    let key = o.key();
    let status = releases::status(o);
    let (ready, reason, message) = releases::ready(&status);
    let mut r = Vec::new();
    if all_ns {
        r.push(key.namespace.clone());
    }
    r.push(if both {
        format!("{}/{}", target::short(key.kind), key.name)
    } else {
        key.name.clone()
    });
    r.push(ready);
    r.push(reason);
    r.push(releases::revision(o));
    r.push(output::age(releases::created(o), now));
    r.push(output::until(
        status.next_retry_at.as_ref().map(|t| t.0),
        now,
    ));
    if wide {
        r.push(o.common().suspend.to_string());
        r.push(releases::source(o));
        // One line per row: a multi-line condition message is joined.
        r.push(message.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    r
}

pub async fn run(s: &Session, target: Target, format: Format) -> Result<String> {
    let now = Timestamp::now();
    if let (Some(kind), Some(name)) = (target.kind, &target.name) {
        let key = ReleaseKey {
            kind,
            namespace: s.namespace.clone(),
            name: name.clone(),
        };
        let obj = releases::read(&s.client, &key).await?;
        return render(&[obj], format, false, false, true, now);
    }
    let kinds: Vec<Kind> = match target.kind {
        Some(k) => vec![k],
        None => vec![Kind::ModuleRelease, Kind::Release],
    };
    let ns = (!s.all_namespaces).then_some(s.namespace.as_str());
    let mut items = Vec::new();
    for k in &kinds {
        items.extend(releases::list(&s.client, *k, ns).await?);
    }
    if items.is_empty() && matches!(format, Format::Table | Format::Wide) {
        match ns {
            Some(ns) => eprintln!("No releases found in namespace {ns}."),
            None => eprintln!("No releases found."),
        }
        return Ok(String::new());
    }
    render(
        &items,
        format,
        s.all_namespaces,
        kinds.len() > 1,
        false,
        now,
    )
}
