//! Field-level comparison of a desired object with the live one (SPEC §20, §28; the same
//! result serves `kubectl opm diff`, SPEC §29).
//!
//! Drift is decided on the fields the operator manages: labels, annotations and everything
//! outside `metadata`/`status`. A server-side dry-run of the desired object shows what the
//! object would be after our apply; where it differs from the live object, that JSON path
//! drifted. `managedFields` of the live object say which manager owns each drifted path, so
//! the message can name who changed it. Paths matched by an ignore rule (SPEC §28) are
//! neither compared nor reported, at any depth.
//!
//! Everything here is pure: the interpreter calls it where the live object is, with the
//! ignore paths and field manager the core put in the effect.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Drifted fields kept per object: enough for the message (which names three) and for a
/// diff summary, bounded so a wholly rewritten object cannot bloat a trace.
pub const MAX_FIELDS: usize = 20;

/// One drifted JSON path and the manager that owns it in the live object (empty when no
/// other manager does, e.g. a field someone removed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct FieldDrift {
    /// RFC 6901 JSON pointer into the object (`/data/message`).
    pub path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    /// The field manager that owns the path live, when one does: who to ask about the drift.
    pub manager: String,
}

/// A JSON pointer split into unescaped segments (`/a~1b/c` → `["a/b", "c"]`). A pointer
/// that does not start with `/` is taken as relative to the root all the same.
pub(crate) fn parse_pointer(pointer: &str) -> Vec<String> {
    let p = pointer.strip_prefix('/').unwrap_or(pointer);
    if p.is_empty() {
        return Vec::new();
    }
    p.split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// Segments back to an RFC 6901 pointer.
pub fn format_pointer(segs: &[String]) -> String {
    segs.iter()
        .map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The part of an object drift is judged on: every top-level field but `metadata` and
/// `status`, plus `metadata.labels` and `metadata.annotations`. Paths into it are paths
/// into the object itself.
pub fn managed_view(obj: &Value) -> Value {
    let mut out = Map::new();
    if let Some(o) = obj.as_object() {
        for (k, v) in o {
            if k != "metadata" && k != "status" {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    let mut meta = Map::new();
    for field in ["labels", "annotations"] {
        if let Some(v) = obj.get("metadata").and_then(|m| m.get(field))
            && !v.is_null()
        {
            meta.insert(field.to_string(), v.clone());
        }
    }
    if !meta.is_empty() {
        out.insert("metadata".to_string(), Value::Object(meta));
    }
    Value::Object(out)
}

/// Whether `path` is matched by an ignore pointer: equal to it or below it.
fn ignored(path: &[String], ignore: &[Vec<String>]) -> bool {
    ignore.iter().any(|i| path.starts_with(i))
}

/// Whether some ignore pointer lies strictly below `path` (so the subtree must be walked
/// rather than reported whole).
fn ignore_below(path: &[String], ignore: &[Vec<String>]) -> bool {
    ignore
        .iter()
        .any(|i| i.len() > path.len() && i.starts_with(path))
}

/// The paths where `a` and `b` differ, outside the ignored ones, in document order (keys
/// sorted). A subtree present on one side only is reported at its root unless an ignore
/// pointer lies inside it. Object key order never matters; array order does (it is data).
pub fn diff_paths(a: &Value, b: &Value, ignore: &[String]) -> Vec<Vec<String>> {
    let ignore: Vec<Vec<String>> = ignore.iter().map(|p| parse_pointer(p)).collect();
    let mut out = Vec::new();
    walk(Some(a), Some(b), &mut Vec::new(), &ignore, &mut out);
    out
}

fn walk(
    a: Option<&Value>,
    b: Option<&Value>,
    path: &mut Vec<String>,
    ignore: &[Vec<String>],
    out: &mut Vec<Vec<String>>,
) {
    if ignored(path, ignore) || a == b {
        return;
    }
    let below = ignore_below(path, ignore);
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                path.push(k.clone());
                walk(x.get(k), y.get(k), path, ignore, out);
                path.pop();
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                path.push(i.to_string());
                walk(x.get(i), y.get(i), path, ignore, out);
                path.pop();
            }
        }
        // Present on one side only, with an ignored path inside: walk it against nothing.
        (Some(v), None) | (None, Some(v)) if below && (v.is_object() || v.is_array()) => {
            let children: Vec<(String, &Value)> = match v {
                Value::Object(m) => m.iter().map(|(k, c)| (k.clone(), c)).collect(),
                Value::Array(items) => items
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i.to_string(), c))
                    .collect(),
                _ => Vec::new(),
            };
            let left = a.is_some();
            for (k, c) in children {
                path.push(k);
                if left {
                    walk(Some(c), None, path, ignore, out);
                } else {
                    walk(None, Some(c), path, ignore, out);
                }
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

/// The value at `segs` in `v`, if any.
pub fn get<'a>(v: &'a Value, segs: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for s in segs {
        cur = match cur {
            Value::Object(m) => m.get(s)?,
            Value::Array(a) => a.get(s.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Removes the value at `segs` from `v` (an array element is removed, shifting the rest);
/// objects left empty by the removal are kept, as an apply of `{}` claims nothing.
pub fn remove(v: &mut Value, segs: &[String]) -> Option<Value> {
    let (last, parent) = segs.split_last()?;
    let mut cur = v;
    for s in parent {
        cur = match cur {
            Value::Object(m) => m.get_mut(s)?,
            Value::Array(a) => a.get_mut(s.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    match cur {
        Value::Object(m) => m.remove(last),
        Value::Array(a) => {
            let i = last.parse::<usize>().ok()?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

/// Sets the value at `segs`, creating objects on the way (never array elements).
pub fn set(v: &mut Value, segs: &[String], value: Value) -> bool {
    let Some((last, parent)) = segs.split_last() else {
        *v = value;
        return true;
    };
    let mut cur = v;
    for s in parent {
        cur = match cur {
            Value::Object(m) => m
                .entry(s.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(a) => match s.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(c) => c,
                None => return false,
            },
            _ => return false,
        };
    }
    match cur {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            true
        }
        Value::Array(a) => match last.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
            Some(slot) => {
                *slot = value;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// One `metadata.managedFields` entry, as far as ownership needs it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ManagedEntry<'a> {
    /// The field manager (`opm-controller`, `kubectl`, …).
    pub manager: &'a str,
    /// `Apply` or `Update`: only an `Apply` entry of ours marks fields we own.
    pub operation: &'a str,
    /// When the manager last wrote, for naming the latest writer.
    pub time: &'a str,
    /// The `fieldsV1` tree of the fields it owns.
    pub fields: &'a Value,
}

/// The live object's `managedFields` entries that carry a `fieldsV1` set.
pub(crate) fn managed_entries(live: &Value) -> Vec<ManagedEntry<'_>> {
    let Some(mf) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    mf.iter()
        .filter_map(|e| {
            Some(ManagedEntry {
                manager: e.get("manager").and_then(Value::as_str).unwrap_or(""),
                operation: e.get("operation").and_then(Value::as_str).unwrap_or(""),
                time: e.get("time").and_then(Value::as_str).unwrap_or(""),
                fields: e.get("fieldsV1")?,
            })
        })
        .collect()
}

/// Whether a `fieldsV1` set covers the path `segs` of `live`: it names the path, a part of
/// it (a manager that set a label owns that much of `/metadata/labels`), or an atomic value
/// above it (`{}` leaf). List elements are found by their `k:` key fields or `v:` value,
/// as the API server writes them.
pub fn covers(set: &Value, live: Option<&Value>, segs: &[String]) -> bool {
    let Some(node) = set.as_object() else {
        return false;
    };
    let Some((first, rest)) = segs.split_first() else {
        return true;
    };
    // A leaf: the whole value at this point is the manager's (atomic map or list).
    if node.is_empty() || (node.len() == 1 && node.contains_key(".")) {
        return true;
    }
    match live {
        Some(Value::Array(items)) => {
            let Some(elem) = first.parse::<usize>().ok().and_then(|i| items.get(i)) else {
                return false;
            };
            node.iter().any(|(k, child)| {
                if let Some(key) = k.strip_prefix("k:") {
                    serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|fields| {
                        fields.iter().all(|(f, want)| elem.get(f) == Some(want))
                    }) && covers(child, Some(elem), rest)
                } else if let Some(val) = k.strip_prefix("v:") {
                    serde_json::from_str::<Value>(val).is_ok_and(|v| &v == elem)
                } else {
                    false
                }
            })
        }
        _ => node
            .get(&format!("f:{first}"))
            .is_some_and(|child| covers(child, live.and_then(|l| l.get(first)), rest)),
    }
}

/// Managers other than `ours` whose field sets cover the path in `live`.
pub(crate) fn other_owners<'a>(live: &'a Value, segs: &[String], ours: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = managed_entries(live)
        .into_iter()
        .filter(|e| e.manager != ours && covers(e.fields, Some(live), segs))
        .map(|e| e.manager)
        .collect();
    out.dedup();
    out
}

/// Who changed a drifted path: the other manager owning it; for a path the live object
/// lacks (removed by someone), the other manager whose `Update` is the most recent. Empty
/// when nobody else shows up in `managedFields`.
pub(crate) fn changed_by(live: &Value, segs: &[String], ours: &str) -> String {
    if let Some(m) = other_owners(live, segs, ours).first() {
        return (*m).to_string();
    }
    if get(live, segs).is_none() {
        return managed_entries(live)
            .into_iter()
            .filter(|e| e.manager != ours && e.operation == "Update")
            .max_by(|a, b| a.time.cmp(b.time))
            .map(|e| e.manager.to_string())
            .unwrap_or_default();
    }
    String::new()
}

/// The drifted fields of one object: where the dry-run of our desired state (`dry`)
/// differs from `live` on the managed view, outside `ignore`, each with the manager that
/// changed it. At most [`MAX_FIELDS`]. Empty = no drift.
pub fn compare(live: &Value, dry: &Value, ignore: &[String], ours: &str) -> Vec<FieldDrift> {
    diff_paths(&managed_view(live), &managed_view(dry), ignore)
        .into_iter()
        .take(MAX_FIELDS)
        .map(|segs| FieldDrift {
            path: format_pointer(&segs),
            manager: changed_by(live, &segs, ours),
        })
        .collect()
}

#[cfg(test)]
mod tests;
