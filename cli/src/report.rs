//! The `diff` report: what would change, per object, and how it prints. Pure:
//! the cluster part (`diff.rs`) fills it, this module words it and decides the exit code.
//!
//! Secret hygiene: a field under a Secret's `data` or `stringData` is reported as
//! `changed` only, never with a value (not even masked as `***`: whether it changed is
//! the useful fact). Strings that came from `valuesFrom` Secrets are scrubbed wherever
//! they land.

use opm_core::ResourceId;
use opm_core::fields;
use serde::Serialize;
use serde_json::Value;

/// One changed field: its JSON pointer and the values before and after, or only
/// `secret: true` for a Secret value (or a value holding a `valuesFrom` Secret string).
#[derive(Debug, Serialize, PartialEq, Clone)]
#[serde(rename_all = "camelCase")]
pub struct FieldChange {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
    /// A Secret value: changed, shown without either value.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
}

#[derive(Debug, Serialize, PartialEq, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Changed {
    #[serde(flatten)]
    pub id: ResourceId,
    pub fields: Vec<FieldChange>,
    /// Set when the apply would delete and recreate the object (an immutable field with
    /// `releases.opmodel.dev/force: enabled`, SPEC §28).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recreate: Option<String>,
    /// Its hook phase (SPEC §32), empty for an ordinary object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook: String,
}

#[derive(Debug, Serialize, PartialEq, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Noted {
    #[serde(flatten)]
    pub id: ResourceId,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// Why an object would not be written.
#[derive(Debug, Serialize, PartialEq, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Refused {
    #[serde(flatten)]
    pub id: ResourceId,
    /// The SPEC §4 reason the attempt would stop with (`OwnershipConflict`, `ApplyFailed`).
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub release: String,
    /// Who the dry-run ran as.
    pub identity: String,
    pub created: Vec<Noted>,
    pub changed: Vec<Changed>,
    /// In the inventory, not rendered, and `spec.prune` is true: would be deleted.
    pub pruned: Vec<Noted>,
    /// In the inventory, not rendered, kept in the cluster (`prune: false`, a
    /// `prune: disabled` policy, or a Namespace/CRD): would no longer be managed.
    pub orphaned: Vec<Noted>,
    pub refused: Vec<Refused>,
    pub unchanged: usize,
}

impl Report {
    /// Exit 1 when anything would change or be refused, 0 when nothing would.
    pub fn has_changes(&self) -> bool {
        !(self.created.is_empty()
            && self.changed.is_empty()
            && self.pruned.is_empty()
            && self.orphaned.is_empty()
            && self.refused.is_empty())
    }
}

/// Whether `path` of an object of this identity holds a Secret value.
pub fn secret_path(id: &ResourceId, path: &[String]) -> bool {
    id.group.is_empty()
        && id.kind == "Secret"
        && path
            .first()
            .is_some_and(|p| p == "data" || p == "stringData")
}

/// The changed fields between the live object and its dry-run, on the fields the operator
/// manages, outside the ignore rules (the same comparison as drift, `opm_core::fields`).
/// `scrub` masks strings that came from Secrets.
pub fn field_changes(
    id: &ResourceId,
    live: &Value,
    dry: &Value,
    ignore: &[String],
    scrub: &dyn Fn(&str) -> String,
) -> Vec<FieldChange> {
    let (a, b) = (fields::managed_view(live), fields::managed_view(dry));
    fields::diff_paths(&a, &b, ignore)
        .into_iter()
        .map(|segs| {
            let path = fields::format_pointer(&segs);
            if secret_path(id, &segs) {
                return FieldChange {
                    path,
                    old: None,
                    new: None,
                    secret: true,
                };
            }
            // A value built from a `valuesFrom` Secret string: its old value most likely
            // came from that Secret too (whose old content is not at hand to scrub), so
            // neither side is shown.
            if fields::get(&b, &segs).is_some_and(|v| scrubbed(v, scrub) != *v) {
                return FieldChange {
                    path,
                    old: None,
                    new: None,
                    secret: true,
                };
            }
            let value = |v: &Value| fields::get(v, &segs).map(|x| scrubbed(x, scrub));
            FieldChange {
                path,
                old: value(&a),
                new: value(&b),
                secret: false,
            }
        })
        .collect()
}

fn scrubbed(v: &Value, scrub: &dyn Fn(&str) -> String) -> Value {
    match v {
        Value::String(s) => Value::String(scrub(s)),
        // A number from a Secret (or derived from one) is hidden like a string.
        Value::Number(n) => {
            let text = n.to_string();
            let shown = scrub(&text);
            if shown == text {
                v.clone()
            } else {
                Value::String(shown)
            }
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| scrubbed(x, scrub)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (scrub(k), scrubbed(x, scrub)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn compact(v: &Option<Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => serde_json::to_string(v).unwrap_or_default(),
    }
}

/// The report in words: a summary line, then `+` create, `~` change (each field as
/// `path: old → new`), `-` prune, `?` orphan, `!` refused.
pub fn text(r: &Report) -> String {
    let mut out = format!(
        "{} (dry-run as {}): {} to create, {} to change, {} to prune, {} to orphan, {} refused, {} unchanged\n",
        r.release,
        r.identity,
        r.created.len(),
        r.changed.len(),
        r.pruned.len(),
        r.orphaned.len(),
        r.refused.len(),
        r.unchanged
    );
    let note = |n: &str| {
        if n.is_empty() {
            String::new()
        } else {
            format!(" ({n})")
        }
    };
    for c in &r.created {
        out.push_str(&format!("+ {}{}\n", c.id.display(), note(&c.note)));
    }
    for c in &r.changed {
        out.push_str(&format!("~ {}", c.id.display()));
        if !c.hook.is_empty() {
            out.push_str(&format!(" [{} hook]", c.hook));
        }
        if let Some(why) = &c.recreate {
            out.push_str(&format!(" (would be deleted and recreated: {why})"));
        }
        out.push('\n');
        for f in &c.fields {
            if f.secret {
                out.push_str(&format!(
                    "    {}: changed (Secret value not shown)\n",
                    f.path
                ));
            } else {
                out.push_str(&format!(
                    "    {}: {} → {}\n",
                    f.path,
                    compact(&f.old),
                    compact(&f.new)
                ));
            }
        }
    }
    for p in &r.pruned {
        out.push_str(&format!("- {} (prune){}\n", p.id.display(), note(&p.note)));
    }
    for p in &r.orphaned {
        out.push_str(&format!("? {} (orphan){}\n", p.id.display(), note(&p.note)));
    }
    for x in &r.refused {
        out.push_str(&format!(
            "! {} refused ({}): {}\n",
            x.id.display(),
            x.reason,
            x.message
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(kind: &str) -> ResourceId {
        ResourceId {
            kind: kind.into(),
            namespace: "demo".into(),
            name: "x".into(),
            version: "v1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn hooks_show_their_phase() {
        let job = ResourceId {
            group: "batch".into(),
            kind: "Job".into(),
            namespace: "demo".into(),
            name: "migrate".into(),
            version: "v1".into(),
        };
        let t = text(&Report {
            created: vec![Noted {
                id: job.clone(),
                note: "pre-apply hook: runs before the rest is applied".into(),
            }],
            changed: vec![Changed {
                id: ResourceId {
                    name: "smoke".into(),
                    ..job
                },
                fields: vec![],
                recreate: Some("a post-apply hook Job of another render runs again".into()),
                hook: "post-apply".into(),
            }],
            ..Default::default()
        });
        assert!(
            t.contains("+ Job/demo/migrate (pre-apply hook: runs before the rest is applied)\n"),
            "{t}"
        );
        assert!(
            t.contains("~ Job/demo/smoke [post-apply hook] (would be deleted and recreated: a post-apply hook Job of another render runs again)"),
            "{t}"
        );
    }

    #[test]
    fn secret_values_are_changed_never_shown() {
        let live = json!({"metadata": {"name": "x"}, "data": {"pw": "b2xk", "same": "c2FtZQ=="}});
        let dry = json!({"metadata": {"name": "x"}, "data": {"pw": "bmV3", "same": "c2FtZQ=="}});
        let f = field_changes(&id("Secret"), &live, &dry, &[], &|s| s.to_string());
        assert_eq!(
            f,
            vec![FieldChange {
                path: "/data/pw".into(),
                old: None,
                new: None,
                secret: true
            }]
        );
        let t = text(&Report {
            changed: vec![Changed {
                id: id("Secret"),
                fields: f,
                recreate: None,
                hook: String::new(),
            }],
            ..Default::default()
        });
        assert!(!t.contains("b2xk") && !t.contains("bmV3"), "{t}");
        assert!(
            t.contains("/data/pw: changed (Secret value not shown)"),
            "{t}"
        );
    }

    #[test]
    fn other_fields_show_old_and_new_and_ignore_rules_hold() {
        let live = json!({"data": {"a": "1", "b": "2"}, "spec": {"replicas": 3}});
        let dry = json!({"data": {"a": "9", "b": "2"}, "spec": {"replicas": 1}});
        let f = field_changes(
            &id("ConfigMap"),
            &live,
            &dry,
            &["/spec/replicas".into()],
            &|s| s.to_string(),
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].path, "/data/a");
        assert_eq!(f[0].old, Some(json!("1")));
        assert_eq!(f[0].new, Some(json!("9")));
        // A new value holding a Secret string hides both sides; an old one is scrubbed.
        let hide9 = |s: &str| s.replace('9', "<redacted>");
        let f = field_changes(&id("ConfigMap"), &live, &dry, &[], &hide9);
        assert_eq!(
            f[0],
            FieldChange {
                path: "/data/a".into(),
                old: None,
                new: None,
                secret: true
            }
        );
        let hide1 = |s: &str| s.replace('1', "<redacted>");
        let f = field_changes(&id("ConfigMap"), &live, &dry, &[], &hide1);
        assert_eq!(f[0].old, Some(json!("<redacted>")));
        assert_eq!(f[0].new, Some(json!("9")));
    }

    #[test]
    fn nothing_to_do_is_no_change() {
        let mut r = Report {
            unchanged: 3,
            ..Default::default()
        };
        assert!(!r.has_changes());
        r.orphaned.push(Noted {
            id: id("ConfigMap"),
            note: String::new(),
        });
        assert!(r.has_changes());
    }
}
