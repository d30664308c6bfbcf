//! `kubectl opm get [KIND[/NAME]]`: releases as a table (NAME, READY, REASON, REVISION, AGE,
//! NEXT RETRY; `-A` adds NAMESPACE, `-o wide` SOURCE, CLUSTER and MESSAGE), or the objects as
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
                header.extend(["SUSPENDED", "SOURCE", "CLUSTER", "MESSAGE"]);
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
        r.push(cluster(o, &status));
        // One line per row: a multi-line condition message is joined.
        r.push(message.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    r
}

/// Where the release's objects are: the remote cluster's server URL (SPEC §31), `-` for
/// the cluster it lives in, the kubeconfig Secret while nothing is applied there yet.
fn cluster(o: &ReleaseObject, status: &opm_core::api::ReleaseStatus) -> String {
    let applied = status
        .inventory
        .as_ref()
        .map(|i| i.cluster.clone())
        .filter(|c| !c.is_empty());
    match (&o.common().kube_config, applied) {
        (_, Some(server)) => server,
        (Some(kc), None) => format!("secret/{}", kc.secret_ref.name),
        (None, None) => "-".into(),
    }
}

/// How often `--watch` looks again.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// `get --watch`: the table, then a row each time a release changes (a new
/// `resourceVersion`), until interrupted. Polls: one LIST per kind and interval.
pub async fn watch(s: &Session, target: Target, format: Format) -> Result<String> {
    use std::io::Write;
    if !matches!(format, Format::Table | Format::Wide) {
        return Err(crate::error::CliError::Usage(
            "--watch prints tables: use -o table or -o wide".into(),
        ));
    }
    let mut seen: std::collections::BTreeMap<ReleaseKey, String> = Default::default();
    let mut first = true;
    loop {
        let items = fetch(s, &target).await?;
        let both = target.kind.is_none();
        let changed: Vec<ReleaseObject> = items
            .into_iter()
            .filter(|o| {
                let rv = o.meta().resource_version.clone().unwrap_or_default();
                seen.insert(o.key(), rv.clone()).as_ref() != Some(&rv)
            })
            .collect();
        if !changed.is_empty() {
            let text = render(
                &changed,
                format,
                s.all_namespaces,
                both,
                false,
                Timestamp::now(),
            )?;
            let text = if first {
                text
            } else {
                text.split_once('\n')
                    .map(|(_, rows)| rows.to_string())
                    .unwrap_or_default()
            };
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(crate::output::for_terminal(&text).as_bytes());
            let _ = out.flush();
            first = false;
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// The releases the target names: one, or a list of one or both kinds.
async fn fetch(s: &Session, target: &Target) -> Result<Vec<ReleaseObject>> {
    if let (Some(kind), Some(name)) = (target.kind, &target.name) {
        let key = ReleaseKey {
            kind,
            namespace: s.namespace.clone(),
            name: name.clone(),
        };
        return Ok(vec![releases::read(&s.client, &key).await?]);
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
    Ok(items)
}

pub async fn run(s: &Session, target: Target, format: Format) -> Result<String> {
    let single = target.kind.is_some() && target.name.is_some();
    let items = fetch(s, &target).await?;
    if items.is_empty() && matches!(format, Format::Table | Format::Wide) {
        if s.all_namespaces {
            eprintln!("No releases found.");
        } else {
            eprintln!("No releases found in namespace {}.", s.namespace);
        }
        return Ok(String::new());
    }
    let both = target.kind.is_none();
    let all = s.all_namespaces && !single;
    render(&items, format, all, both, single, Timestamp::now())
}
