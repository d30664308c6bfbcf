//! Secret values never reach the core (SPEC §23): after rendering, each value of a Secret's
//! `data`/`stringData` is replaced by `sha256:<hex>` of that value, and the real value is
//! kept in a per-attempt side table keyed by the digest. Apply and drift put the real
//! values back just before they talk to the API server. A changed value changes its digest,
//! so the render digest still moves.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

mod scrub;

/// The real Secret values of one attempt, by digest. `Debug` shows only the count, so the
/// table is safe to log.
#[derive(Default, Clone)]
pub struct SecretTable {
    values: HashMap<String, Value>,
    /// Strings that came from a `valuesFrom` Secret (SPEC §27), and every rendered string
    /// that contains one, by digest: substituted back wherever they land (§23).
    strings: HashMap<String, String>,
    /// Numbers and booleans read from a `valuesFrom` Secret (a YAML `password: 84736251`),
    /// by digest ([`scalar_digest`]): the core sees them as digests like the strings, and
    /// `cue` and the apply get them back with their type and exact value.
    scalars: HashMap<String, Value>,
    /// `module.secretRef` Docker configs by digest.
    credentials: HashMap<String, Vec<u8>>,
}

/// A Secret handed back for apply carries a value this attempt's render never produced.
/// Writing the digest text as the Secret's value would corrupt it, so the object fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Secret {name}: value {digest} is not known to this attempt's render; refusing to write it"
)]
pub struct UnknownSecretDigest {
    /// The Secret's name.
    pub name: String,
    /// The digest no render of this attempt produced.
    pub digest: String,
}

/// `sha256:<hex>` of a Secret value: of the string itself (for `data`, the base64 text as
/// rendered), or of the JSON text of a value that is not a string (which the API server
/// will refuse, but which must not reach the core either).
pub fn secret_digest(value: &Value) -> String {
    match value {
        Value::String(s) => opm_core::digest::sha256(s.as_bytes()),
        other => opm_core::digest::sha256(other.to_string().as_bytes()),
    }
}

/// A different value of the same type (see [`SecretTable::restore_strings_perturbed`]).
fn perturb(v: &Value) -> Value {
    let shift = |c: char| match c {
        'z' => 'a',
        'Z' => 'A',
        '9' => '0',
        c if c.is_ascii_alphanumeric() => char::from(c as u8 + 1),
        c => c,
    };
    match v {
        Value::String(s) if s.chars().any(|c| c.is_ascii_alphanumeric()) => {
            Value::String(s.chars().map(shift).collect())
        }
        Value::String(s) => Value::String(format!("{s}x")),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => n
            .as_i64()
            .and_then(|i| i.checked_add(1))
            .map(Value::from)
            .or_else(|| n.as_u64().map(|u| Value::from(u.wrapping_sub(1))))
            .or_else(|| n.as_f64().map(|f| Value::from(f + 1.0)))
            .unwrap_or_else(|| v.clone()),
        other => other.clone(),
    }
}

/// `sha256:<hex>` a number or boolean from a Secret is seen as: of its JSON text behind a
/// prefix, so the number `1234` and the string `"1234"` (and `true` and `"true"`) have
/// different digests and each comes back as what it was.
pub fn scalar_digest(value: &Value) -> String {
    opm_core::digest::sha256(format!("opm-secret-scalar:{value}").as_bytes())
}

impl fmt::Debug for SecretTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretTable({} values, {} strings, {} scalars, {} credentials)",
            self.values.len(),
            self.strings.len(),
            self.scalars.len(),
            self.credentials.len()
        )
    }
}

const FIELDS: [&str; 2] = ["data", "stringData"];

/// A Secret number worth looking for in rendered values and messages: [`MIN_SCRUBBED`]
/// characters or more (every `3` is not a secret's).
fn long_enough(v: &Value) -> bool {
    v.is_number() && v.to_string().chars().count() >= MIN_SCRUBBED
}

/// Shortest Secret value [`SecretTable::scrub`] replaces in messages.
pub const MIN_SCRUBBED: usize = 4;

/// Every rendered object: the values under `components.<c>` of the exported render value.
fn rendered_objects(exported: &mut Value) -> impl Iterator<Item = &mut Value> {
    exported
        .get_mut("components")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|components| components.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|objects| objects.values_mut())
}

fn is_secret(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Secret")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

impl SecretTable {
    /// Secret values kept.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether nothing was redacted (no values, no `valuesFrom` strings).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.strings.is_empty() && self.scalars.is_empty()
    }

    /// Whether a `valuesFrom` Secret gave strings or scalars to put back.
    fn has_values_from(&self) -> bool {
        !self.strings.is_empty() || !self.scalars.is_empty()
    }

    /// Keeps `real` (a string read from a Secret) and returns the digest the core sees.
    pub fn remember_string(&mut self, real: &str) -> String {
        let digest = opm_core::digest::sha256(real.as_bytes());
        self.strings.insert(digest.clone(), real.to_owned());
        digest
    }

    /// Keeps `real` (a number or boolean read from a Secret) and returns the digest the
    /// core sees ([`scalar_digest`]).
    pub fn remember_scalar(&mut self, real: &Value) -> String {
        let digest = scalar_digest(real);
        self.scalars.insert(digest.clone(), real.clone());
        digest
    }

    /// Replaces every leaf of `value` (read from a Secret) by its digest: strings, and
    /// numbers and booleans too (a `password: 84736251` is as secret as a quoted one).
    /// Map keys are field names and stay; `null` carries nothing.
    pub fn redact_strings(&mut self, value: &mut Value) {
        match value {
            Value::String(s) => {
                let d = self.remember_string(s);
                *s = d;
            }
            Value::Number(_) | Value::Bool(_) => {
                let d = self.remember_scalar(value);
                *value = Value::String(d);
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.redact_strings(v)),
            Value::Object(m) => m.values_mut().for_each(|v| self.redact_strings(v)),
            _ => {}
        }
    }

    /// Whether a `valuesFrom` Secret gave values (strings, numbers, booleans) this table
    /// puts back.
    pub fn reads_secret_values(&self) -> bool {
        self.has_values_from()
    }

    /// A copy of `value` with every Secret value put back *changed*: each string with
    /// every letter and digit moved one along (`a`→`b`, `z`→`a`, `9`→`0`; same length and
    /// character classes, so most schemas still accept it), each number plus one, each
    /// boolean negated. Rendering with these next to the real ones shows which rendered
    /// fields a Secret value reaches, however the module transformed it (`kubectl opm
    /// diff` hides those).
    pub fn restore_strings_perturbed(&self, value: &Value) -> Value {
        let mut out = value.clone();
        self.put_back_with(&mut out, &perturb);
        out
    }

    fn put_back_with(&self, value: &mut Value, change: &dyn Fn(&Value) -> Value) {
        match value {
            Value::String(s) => {
                if let Some(real) = self.strings.get(s.as_str()) {
                    *value = change(&Value::String(real.clone()));
                } else if let Some(real) = self.scalars.get(s.as_str()) {
                    *value = change(real);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.put_back_with(v, change)),
            Value::Object(m) => m.values_mut().for_each(|v| self.put_back_with(v, change)),
            _ => {}
        }
    }

    /// Keeps a `module.secretRef` Docker config; returns its digest.
    pub fn remember_credentials(&mut self, bytes: Vec<u8>) -> String {
        let digest = opm_core::digest::sha256(&bytes);
        self.credentials.insert(digest.clone(), bytes);
        digest
    }

    /// The Docker config behind `digest`, if this attempt read it.
    pub fn credentials(&self, digest: &str) -> Option<&[u8]> {
        self.credentials.get(digest).map(Vec::as_slice)
    }

    /// A copy of `value` with every digest of a Secret string put back: the values handed
    /// to `cue`, which must see the real strings for `#config` to check them.
    pub fn restore_strings(&self, value: &Value) -> Value {
        let mut out = value.clone();
        self.put_back(&mut out);
        out
    }

    fn put_back(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Some(real) = self.strings.get(s.as_str()) {
                    *s = real.clone();
                } else if let Some(real) = self.scalars.get(s.as_str()) {
                    *value = real.clone();
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.put_back(v)),
            Value::Object(m) => m.values_mut().for_each(|v| self.put_back(v)),
            _ => {}
        }
    }

    /// After [`Self::redact_render`]: every string of every rendered object that holds a
    /// Secret string (whole, or inside a longer one such as a URL; pieces shorter than
    /// [`MIN_SCRUBBED`] only when whole) becomes the digest of that string, so the core
    /// never sees it wherever the module put it (SPEC §23, §27).
    pub fn redact_render_strings(&mut self, exported: &mut Value) {
        if !self.has_values_from() {
            return;
        }
        let mut secrets: Vec<String> = self
            .strings
            .values()
            .cloned()
            .chain(self.scalar_texts())
            .collect();
        secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
        for obj in rendered_objects(exported) {
            let Some(fields) = obj.as_object_mut() else {
                continue;
            };
            // The object's identity stays readable: names and kinds are never secret, and
            // the core must place the object by them.
            for (k, v) in fields.iter_mut() {
                match k.as_str() {
                    "apiVersion" | "kind" => {}
                    "metadata" => {
                        if let Some(meta) = v.as_object_mut() {
                            for (mk, mv) in meta.iter_mut() {
                                if mk != "name" && mk != "namespace" {
                                    self.redact_holding(mv, &secrets);
                                }
                            }
                        }
                    }
                    _ => self.redact_holding(v, &secrets),
                }
            }
        }
    }

    fn redact_holding(&mut self, value: &mut Value, secrets: &[String]) {
        match value {
            Value::String(s) => {
                let holds = secrets.iter().any(|x| {
                    !x.is_empty()
                        && (s == x || (x.chars().count() >= MIN_SCRUBBED && s.contains(x.as_str())))
                });
                if holds {
                    let d = self.remember_string(s);
                    *s = d;
                }
            }
            // A number the module copied from a Secret number (a boolean is one bit, and
            // short numbers are everywhere: see `scalar_texts`).
            Value::Number(_) if self.scalars.values().any(|x| x == value && long_enough(x)) => {
                let d = self.remember_scalar(value);
                *value = Value::String(d);
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.redact_holding(v, secrets)),
            Value::Object(m) => m.values_mut().for_each(|v| self.redact_holding(v, secrets)),
            _ => {}
        }
    }

    /// The text of each Secret number long enough to look for ([`MIN_SCRUBBED`]): inside
    /// rendered strings and messages it is redacted like a string.
    fn scalar_texts(&self) -> impl Iterator<Item = String> + '_ {
        self.scalars
            .values()
            .filter(|v| v.is_number() && long_enough(v))
            .map(Value::to_string)
    }

    /// Replaces the Secret values of every object under `components.<c>.<key>` in the
    /// exported render value.
    pub fn redact_render(&mut self, exported: &mut Value) {
        for obj in rendered_objects(exported) {
            self.redact_object(obj);
        }
    }

    /// Replaces the values of one object if it is a Secret.
    pub fn redact_object(&mut self, obj: &mut Value) {
        if !is_secret(obj) {
            return;
        }
        for field in FIELDS {
            let Some(map) = obj.get_mut(field).and_then(Value::as_object_mut) else {
                continue;
            };
            for v in map.values_mut() {
                let digest = secret_digest(v);
                let real = std::mem::replace(v, Value::String(digest.clone()));
                self.values.insert(digest, real);
            }
        }
    }

    /// A copy of `manifest` with every Secret value put back. Objects that are not Secrets
    /// come back unchanged; a Secret value this table does not know is an error.
    pub fn restore(&self, manifest: &Value) -> Result<Value, UnknownSecretDigest> {
        let mut out = manifest.clone();
        if !is_secret(&out) {
            if self.has_values_from() {
                self.put_back(&mut out);
            }
            return Ok(out);
        }
        if self.has_values_from()
            && let Some(map) = out.as_object_mut()
        {
            // Everything but `data`/`stringData`, which are restored from their own table.
            for (k, v) in map.iter_mut() {
                if !FIELDS.contains(&k.as_str()) {
                    self.put_back(v);
                }
            }
        }
        let name = out
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        for field in FIELDS {
            let Some(map) = out.get_mut(field).and_then(Value::as_object_mut) else {
                continue;
            };
            for v in map.values_mut() {
                let digest = v.as_str().unwrap_or_default();
                let real = self.values.get(digest).ok_or_else(|| UnknownSecretDigest {
                    name: name.clone(),
                    digest: digest.to_string(),
                })?;
                *v = real.clone();
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
