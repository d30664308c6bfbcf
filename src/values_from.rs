//! Values from ConfigMaps and Secrets (SPEC §27): what was read, merged in order at each
//! entry's `targetPath` or the root, then `spec.values` on top. Pure: the interpreter reads
//! the objects (under the release's effective identity) and hands over what it found, with
//! every string that came from a Secret already replaced by its `sha256:` digest (SPEC §23),
//! so nothing here, and nothing downstream in the core, ever holds a secret string.
//!
//! The merge is Helm's: mappings merge key by key, recursively; anything else (a scalar, a
//! list) is replaced by the later value. With `targetPath` the key's content is one string
//! set at that path (helm-controller's "single flat value"), so a password with YAML
//! meaning in it (`: `, a leading `*`, `yes`) arrives as written; without it the content is
//! a YAML or JSON mapping merged at the root.

use serde_json::{Map, Value};

use crate::api::values_from::{ValuesKind, ValuesReference};
use crate::effect::Impersonation;
use crate::input::ApiError;
pub use crate::input::{CredentialsContent, ValuesContent};
use crate::outcome::Failure;
use crate::reason::Reason;

/// Longest `targetPath` accepted (the CRD refuses longer too).
pub(crate) const MAX_TARGET_PATH: usize = 250;
/// Deepest `targetPath` accepted, in segments.
pub(crate) const MAX_TARGET_DEPTH: usize = 32;

/// Every value counts at least this many bytes: roughly what it takes in memory, so a
/// long list of tiny numbers cannot pass the cap by a factor of twenty.
pub const MIN_VALUE_BYTES: u64 = 16;

/// The size of a parsed value as `--max-values-bytes` counts it (SPEC §24): its JSON
/// encoding, each string and key by its bytes, and each value at least
/// [`MIN_VALUE_BYTES`]. The interpreter's bounded parser counts the same way while it
/// parses, so it stops before building more than the cap.
pub fn size_of(v: &Value) -> u64 {
    let own = match v {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(a) => a.iter().map(size_of).sum::<u64>() + 2,
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| k.len() as u64 + 3 + size_of(v))
            .sum::<u64>()
            .saturating_add(2),
    };
    own.max(MIN_VALUE_BYTES)
}

/// SPEC §24: the `valuesFrom` content of one release, after parsing, is at most
/// `max_bytes`; an entry named twice (same object, key and form) counts once, as it is
/// read once. Over it: stall `ValuesNotFound` "values from N objects are X bytes; the cap
/// is M", N the distinct objects named, X the bytes counted (a lower bound when parsing
/// stopped at the cap).
pub fn check_size(
    refs: &[ValuesReference],
    read: &[Result<ValuesContent, ApiError>],
    max_bytes: u64,
) -> Result<(), Failure> {
    let mut seen = std::collections::BTreeSet::new();
    let mut total: u64 = 0;
    let mut stopped = false;
    for (r, got) in refs.iter().zip(read) {
        let raw = r.target_path.as_deref().is_some_and(|p| !p.is_empty());
        if !seen.insert((r.kind, r.name.as_str(), r.key(), raw)) {
            continue;
        }
        match got {
            Ok(ValuesContent::Found { value }) => {
                total = total.saturating_add(size_of(value));
            }
            Ok(ValuesContent::TooLarge { bytes }) => {
                stopped = true;
                total = total.saturating_add(*bytes);
            }
            _ => {}
        }
    }
    if !stopped && total <= max_bytes {
        return Ok(());
    }
    let objects: std::collections::BTreeSet<_> =
        refs.iter().map(|r| (r.kind, r.name.as_str())).collect();
    Err(Failure::stalled(
        Reason::ValuesNotFound,
        format!(
            "values from {} objects are {} bytes; the cap is {max_bytes}",
            objects.len(),
            total.max(max_bytes.saturating_add(1))
        ),
    ))
}

/// A `targetPath` split into its keys: `.` separates, `\.` is a dot inside a key and `\\`
/// a backslash. Empty segments, a trailing lone `\` and over-long paths are refused.
pub fn parse_target_path(path: &str) -> Result<Vec<String>, String> {
    if path.len() > MAX_TARGET_PATH {
        return Err(format!(
            "targetPath is {} characters; the cap is {MAX_TARGET_PATH}",
            path.len()
        ));
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('.' | '\\')) => cur.push(e),
                Some(other) => {
                    cur.push('\\');
                    cur.push(other);
                }
                None => return Err(format!("targetPath {path:?} ends in a lone backslash")),
            },
            '.' => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    if out.iter().any(String::is_empty) {
        return Err(format!("targetPath {path:?} has an empty key"));
    }
    if out.len() > MAX_TARGET_DEPTH {
        return Err(format!(
            "targetPath {path:?} has {} keys; the cap is {MAX_TARGET_DEPTH}",
            out.len()
        ));
    }
    Ok(out)
}

/// Merges `overlay` into `base`: mappings key by key (recursively), anything else replaced.
pub fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Merges `value` into `root` at `path`, creating mappings on the way and replacing a
/// non-mapping that stands where a mapping is needed.
pub(crate) fn merge_at(root: &mut Value, path: &[String], value: Value) {
    let mut cur = root;
    for key in path {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else {
            unreachable!("made an object just above")
        };
        cur = map.entry(key.clone()).or_insert(Value::Null);
    }
    if cur.is_null() {
        *cur = value;
    } else {
        merge(cur, value);
    }
}

/// `Secret demo/db` for messages.
pub fn describe(r: &ValuesReference, namespace: &str) -> String {
    format!("{} {namespace}/{}", r.kind.as_str(), r.name)
}

/// The merged values: each found entry in order, then `values`. `None` when nothing
/// contributed (no entry found and no `values`), so a release whose optional references are
/// all absent has the config digest of one without them.
pub fn compose(
    namespace: &str,
    refs: &[ValuesReference],
    read: &[Result<ValuesContent, ApiError>],
    values: Option<&Value>,
    identity: Option<&Impersonation>,
) -> Result<Option<Value>, Failure> {
    if read.len() != refs.len() {
        return Err(Failure::transient(
            Reason::ValuesNotFound,
            format!(
                "read {} of {} valuesFrom references",
                read.len(),
                refs.len()
            ),
        ));
    }
    let mut merged: Option<Value> = None;
    for (r, got) in refs.iter().zip(read) {
        let what = describe(r, namespace);
        let Some(value) = entry_value(r, got, &what, identity)? else {
            continue;
        };
        let slot = merged.get_or_insert_with(|| Value::Object(Map::new()));
        place(slot, r, &what, value)?;
    }
    match (merged, values) {
        (None, v) => Ok(v.cloned()),
        (Some(m), None | Some(Value::Null)) => Ok(Some(m)),
        (Some(mut m), Some(v)) => {
            merge(&mut m, v.clone());
            Ok(Some(m))
        }
    }
}

/// One entry's value: `Ok(None)` when an optional entry is absent, the exit when a read
/// failed or the content cannot be used.
fn entry_value(
    r: &ValuesReference,
    got: &Result<ValuesContent, ApiError>,
    what: &str,
    identity: Option<&Impersonation>,
) -> Result<Option<Value>, Failure> {
    let key = r.key();
    let content = match got {
        Ok(c) => c,
        Err(ApiError::Forbidden { message }) => {
            let who = identity.map_or("the operator", |i| i.user.as_str());
            return Err(Failure::stalled(
                Reason::ImpersonationFailed,
                format!("reading {what} (valuesFrom) forbidden as {who}: {message}"),
            ));
        }
        Err(e) => {
            return Err(Failure::transient(
                Reason::ValuesNotFound,
                format!("reading {what} (valuesFrom) failed: {e}"),
            ));
        }
    };
    match content {
        ValuesContent::Found { value } => Ok(Some(value.clone())),
        ValuesContent::ObjectMissing | ValuesContent::KeyMissing if r.optional => Ok(None),
        ValuesContent::ObjectMissing => Err(Failure::stalled(
            Reason::ValuesNotFound,
            format!("valuesFrom {what} not found (key {key:?})"),
        )),
        ValuesContent::KeyMissing => Err(Failure::stalled(
            Reason::ValuesNotFound,
            format!("valuesFrom {what} has no key {key:?}"),
        )),
        ValuesContent::Unparsable { message } => Err(Failure::stalled(
            Reason::RenderFailed,
            format!("valuesFrom {what} key {key:?} is not valid YAML or JSON: {message}"),
        )),
        // [`check_size`] refuses these first; without it, still never merged.
        ValuesContent::TooLarge { .. } => Err(Failure::stalled(
            Reason::ValuesNotFound,
            format!("valuesFrom {what} key {key:?} passes --max-values-bytes"),
        )),
    }
}

/// Merges one entry's value into `slot`: at its `targetPath`, or as a mapping at the top.
fn place(slot: &mut Value, r: &ValuesReference, what: &str, value: Value) -> Result<(), Failure> {
    let key = r.key();
    match r.target_path.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => {
            let path = parse_target_path(p).map_err(|m| {
                Failure::stalled(Reason::RenderFailed, format!("valuesFrom {what}: {m}"))
            })?;
            merge_at(slot, &path, value);
        }
        None => {
            if !value.is_object() && !value.is_null() {
                return Err(Failure::stalled(
                    Reason::RenderFailed,
                    format!(
                        "valuesFrom {what} key {key:?} is not a mapping; set targetPath to use it as one value"
                    ),
                ));
            }
            if value.is_object() {
                merge(slot, value);
            }
        }
    }
    Ok(())
}

/// The `ResolutionFailed`/`ImpersonationFailed` exit for a `module.secretRef` read, or the
/// digest of usable credentials.
pub fn credentials(
    namespace: &str,
    name: &str,
    read: &Result<CredentialsContent, ApiError>,
    identity: Option<&Impersonation>,
) -> Result<String, Failure> {
    let what = format!("Secret {namespace}/{name} (module.secretRef)");
    match read {
        Ok(CredentialsContent::Found { digest }) => Ok(digest.clone()),
        Ok(CredentialsContent::ObjectMissing) => Err(Failure::stalled(
            Reason::ResolutionFailed,
            format!("{what} not found"),
        )),
        Ok(CredentialsContent::Invalid { message }) => Err(Failure::stalled(
            Reason::ResolutionFailed,
            format!("{what}: {message}"),
        )),
        Err(ApiError::Forbidden { message }) => {
            let who = identity.map_or("the operator", |i| i.user.as_str());
            Err(Failure::stalled(
                Reason::ImpersonationFailed,
                format!("reading {what} forbidden as {who}: {message}"),
            ))
        }
        Err(e) => Err(Failure::transient(
            Reason::ResolutionFailed,
            format!("reading {what} failed: {e}"),
        )),
    }
}

/// Does a ModuleRelease read anything before its render?
pub(crate) fn reads_objects(refs: &[ValuesReference], secret_ref: Option<&str>) -> bool {
    !refs.is_empty() || secret_ref.is_some_and(|s| !s.is_empty())
}

/// Kind of the objects a release's references name, for the watch index.
pub fn referenced(refs: &[ValuesReference]) -> impl Iterator<Item = (ValuesKind, &str)> {
    refs.iter().map(|r| (r.kind, r.name.as_str()))
}

#[cfg(test)]
mod tests;
