//! Field access that never panics and says what was wrong: the rules read objects of any
//! shape (SPEC §26 "never panics"), so an ill-typed field is an `Unknown` verdict naming it.

use serde_json::Value;

use super::Assessment;

pub(super) fn at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut v = obj;
    for p in path {
        v = v.as_object()?.get(*p)?;
    }
    Some(v)
}

/// An integer field: absent (or null) → `Ok(None)`; present but not an integer → an
/// `Unknown` verdict naming it.
pub(super) fn int(obj: &Value, path: &[&str]) -> Result<Option<i64>, Assessment> {
    match at(obj, path) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| Assessment::unknown(format!("{} is not an integer", path.join(".")))),
    }
}

pub(super) fn int_or(obj: &Value, path: &[&str], default: i64) -> Result<i64, Assessment> {
    Ok(int(obj, path)?.unwrap_or(default))
}

pub(super) fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(obj, path).and_then(Value::as_str)
}

/// One condition of `status.conditions`, if the list and the entry are well formed.
pub(super) struct Cond<'a> {
    pub(super) status: &'a str,
    pub(super) reason: &'a str,
    pub(super) message: &'a str,
}

pub(super) fn condition<'a>(obj: &'a Value, type_: &str) -> Option<Cond<'a>> {
    let list = at(obj, &["status", "conditions"])?.as_array()?;
    list.iter().find_map(|c| {
        let c = c.as_object()?;
        (c.get("type")?.as_str()? == type_).then(|| Cond {
            status: c.get("status").and_then(Value::as_str).unwrap_or(""),
            reason: c.get("reason").and_then(Value::as_str).unwrap_or(""),
            message: c.get("message").and_then(Value::as_str).unwrap_or(""),
        })
    })
}

pub(super) fn with_detail(head: &str, reason: &str, message: &str) -> String {
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => head.to_string(),
        (false, true) => format!("{head}: {reason}"),
        (true, false) => format!("{head}: {message}"),
        (false, false) => format!("{head}: {reason}: {message}"),
    }
}
