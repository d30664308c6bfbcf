//! Secret values never reach the core (SPEC §23): after rendering, each value of a Secret's
//! `data`/`stringData` is replaced by `sha256:<hex>` of that value, and the real value is
//! kept in a per-attempt side table keyed by the digest. Apply and drift put the real
//! values back just before they talk to the API server. A changed value changes its digest,
//! so the render digest still moves.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

/// The real Secret values of one attempt, by digest. `Debug` shows only the count, so the
/// table is safe to log.
#[derive(Default, Clone)]
pub struct SecretTable {
    values: HashMap<String, Value>,
    /// Strings that came from a `valuesFrom` Secret (SPEC §27), and every rendered string
    /// that contains one, by digest: substituted back wherever they land (§23).
    strings: HashMap<String, String>,
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
    pub name: String,
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

impl fmt::Debug for SecretTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretTable({} values, {} strings, {} credentials)",
            self.values.len(),
            self.strings.len(),
            self.credentials.len()
        )
    }
}

const FIELDS: [&str; 2] = ["data", "stringData"];

/// Shortest Secret value [`SecretTable::scrub`] replaces in messages.
pub const MIN_SCRUBBED: usize = 4;

fn is_secret(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Secret")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

impl SecretTable {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.strings.is_empty()
    }

    /// Keeps `real` (a string read from a Secret) and returns the digest the core sees.
    pub fn remember_string(&mut self, real: &str) -> String {
        let digest = opm_core::digest::sha256(real.as_bytes());
        self.strings.insert(digest.clone(), real.to_owned());
        digest
    }

    /// Replaces every string leaf of `value` (read from a Secret) by its digest. Map keys
    /// are field names and stay.
    pub fn redact_strings(&mut self, value: &mut Value) {
        match value {
            Value::String(s) => {
                let d = self.remember_string(s);
                *s = d;
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.redact_strings(v)),
            Value::Object(m) => m.values_mut().for_each(|v| self.redact_strings(v)),
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
        if self.strings.is_empty() {
            return;
        }
        let mut secrets: Vec<String> = self.strings.values().cloned().collect();
        secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let Some(components) = exported
            .get_mut("components")
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        for component in components.values_mut() {
            if let Some(objects) = component.as_object_mut() {
                for obj in objects.values_mut() {
                    let Some(fields) = obj.as_object_mut() else {
                        continue;
                    };
                    // The object's identity stays readable: names and kinds are never
                    // secret, and the core must place the object by them.
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
            Value::Array(a) => a.iter_mut().for_each(|v| self.redact_holding(v, secrets)),
            Value::Object(m) => m.values_mut().for_each(|v| self.redact_holding(v, secrets)),
            _ => {}
        }
    }

    /// Replaces the Secret values of every object under `components.<c>.<key>` in the
    /// exported render value.
    pub fn redact_render(&mut self, exported: &mut Value) {
        let Some(components) = exported
            .get_mut("components")
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        for component in components.values_mut() {
            if let Some(objects) = component.as_object_mut() {
                for obj in objects.values_mut() {
                    self.redact_object(obj);
                }
            }
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

    /// `text` with every Secret value of this attempt replaced by `<redacted>` (SPEC §23):
    /// an API error about a Secret (a 422 or a webhook's denial) may echo a field value.
    /// Values shorter than [`MIN_SCRUBBED`] characters are left: replacing every `a` or
    /// `1` in a message would make it unreadable, and such a value is no secret.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        let mut values: Vec<&str> = self
            .values
            .values()
            .filter_map(Value::as_str)
            .chain(self.strings.values().map(String::as_str))
            .filter(|v| v.chars().count() >= MIN_SCRUBBED)
            .collect();
        // Longest first, so a value containing another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        for v in values {
            if out.contains(v) {
                out = out.replace(v, crate::cue::redact::REDACTED);
            }
        }
        out
    }

    /// The render request with the real strings in its values (see [`Self::restore_strings`]).
    pub fn restore_request(
        &self,
        request: &opm_core::effect::RenderRequest,
    ) -> opm_core::effect::RenderRequest {
        let mut out = request.clone();
        if let opm_core::effect::RenderRequest::Module {
            values: Some(v), ..
        } = &mut out
            && !self.strings.is_empty()
        {
            self.put_back(v);
        }
        out
    }

    /// [`Self::scrub`] applied to a render error's message: `cue` quotes values in its
    /// errors, and a module may echo one unquoted.
    pub fn scrub_render_error(&self, mut e: opm_core::RenderError) -> opm_core::RenderError {
        use opm_core::RenderError as E;
        if self.is_empty() {
            return e;
        }
        match &mut e {
            E::Resolution { message }
            | E::Evaluation { message }
            | E::PathNotFound { message }
            | E::ReleaseFileNotFound { message }
            | E::InvalidArtifact { message }
            | E::Timeout { message }
            | E::RegistryUnreachable { message }
            | E::Io { message } => *message = self.scrub(message),
            // A re-download's error names the artifact URL and HTTP facts, never a value.
            E::UnsupportedKind { .. }
            | E::TooLarge { .. }
            | E::OutOfMemory { .. }
            | E::Refetch { .. } => {}
        }
        e
    }

    /// [`Self::scrub`] applied to an API error's message.
    pub fn scrub_api_error(&self, e: &mut opm_core::input::ApiError) {
        use opm_core::input::ApiError as E;
        let (E::Forbidden { message }
        | E::NotFound { message }
        | E::Conflict { message }
        | E::Invalid { message }
        | E::Unavailable { message }
        | E::TooManyRequests { message, .. }
        | E::Timeout { message }
        | E::Other { message, .. }) = e;
        if !self.is_empty() {
            *message = self.scrub(message);
        }
    }

    /// A copy of `manifest` with every Secret value put back. Objects that are not Secrets
    /// come back unchanged; a Secret value this table does not know is an error.
    pub fn restore(&self, manifest: &Value) -> Result<Value, UnknownSecretDigest> {
        let mut out = manifest.clone();
        if !is_secret(&out) {
            if !self.strings.is_empty() {
                self.put_back(&mut out);
            }
            return Ok(out);
        }
        if !self.strings.is_empty()
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_and_restores_secret_values_only() {
        let mut exported = json!({"kind": "ModuleRelease", "components": {"db": {
            "s": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                  "data": {"k": "aHVudGVyMg=="}, "stringData": {"p": "hunter2"}},
            "cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                   "data": {"k": "plain"}}}}});
        let mut table = SecretTable::default();
        table.redact_render(&mut exported);
        let text = exported.to_string();
        assert!(!text.contains("hunter2") && !text.contains("aHVudGVyMg=="));
        assert!(text.contains("plain"), "ConfigMaps are left alone");
        let secret = &exported["components"]["db"]["s"];
        assert_eq!(
            secret["stringData"]["p"],
            json!(opm_core::digest::sha256(b"hunter2"))
        );
        assert_eq!(table.len(), 2);
        assert!(!format!("{table:?}").contains("hunter2"));
        let restored = table.restore(secret).unwrap();
        assert_eq!(restored["stringData"]["p"], json!("hunter2"));
        assert_eq!(restored["data"]["k"], json!("aHVudGVyMg=="));
    }

    #[test]
    fn non_string_values_are_redacted_too_and_come_back_as_they_were() {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"n": 5, "nested": {"pw": "t0p"}}});
        let original = s.clone();
        let mut table = SecretTable::default();
        table.redact_object(&mut s);
        assert_eq!(table.len(), 2);
        assert!(!s.to_string().contains("t0p"), "{s}");
        assert_eq!(s["stringData"]["n"], json!(secret_digest(&json!(5))));
        assert_eq!(table.restore(&s).unwrap(), original);
    }

    #[test]
    fn api_errors_lose_every_secret_value() {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"p": "hunter2", "q": "hunter2-long", "tiny": "ab"}});
        let mut table = SecretTable::default();
        table.redact_object(&mut s);
        let mut e = opm_core::input::ApiError::Invalid {
            message: "Secret \"s\" is invalid: stringData[q]: Invalid value: \"hunter2-long\" and hunter2 (ab)".into(),
        };
        table.scrub_api_error(&mut e);
        assert_eq!(
            e.to_string(),
            "invalid: Secret \"s\" is invalid: stringData[q]: Invalid value: \"<redacted>\" and <redacted> (ab)"
        );
    }

    #[test]
    fn a_value_the_render_never_produced_is_refused_not_written() {
        let mut table = SecretTable::default();
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"k": "YQ=="}});
        table.redact_object(&mut s);
        let mut foreign = s.clone();
        foreign["data"]["k"] = json!(secret_digest(&json!("other")));
        let err = table.restore(&foreign).unwrap_err();
        assert_eq!(err.name, "s");
        assert!(err.to_string().contains("refusing"), "{err}");
        // Objects that are not Secrets pass through whatever they hold.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "sha256:00"}});
        assert_eq!(table.restore(&cm).unwrap(), cm);
    }

    #[test]
    fn secret_strings_from_values_are_redacted_wherever_they_land_and_come_back() {
        let mut t = SecretTable::default();
        let mut values = serde_json::json!({"db": {"password": "hunter2-pw", "port": 5432}});
        t.redact_strings(&mut values);
        let seen = values.to_string();
        assert!(!seen.contains("hunter2"), "{seen}");
        assert_eq!(values["db"]["port"], json!(5432));
        // cue gets the real strings back.
        let real = t.restore_strings(&values);
        assert_eq!(real["db"]["password"], json!("hunter2-pw"));
        // The render puts it in a ConfigMap (inside a URL), an env var, and a Secret.
        let mut exported = json!({"kind": "ModuleRelease", "components": {"app": {
            "cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c",
                   "annotations": {"a": "hunter2-pw"}},
                   "data": {"url": "postgres://u:hunter2-pw@db:5432/x", "plain": "x"}},
            "dep": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                    "spec": {"template": {"spec": {"containers": [{"name": "a",
                    "env": [{"name": "PW", "value": "hunter2-pw"}]}]}}}},
            "s": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                  "stringData": {"pw": "hunter2-pw"}}}}});
        let original = exported.clone();
        t.redact_render(&mut exported);
        t.redact_render_strings(&mut exported);
        let text = exported.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            text.contains("\"plain\":\"x\""),
            "other strings stay: {text}"
        );
        for key in ["cm", "dep", "s"] {
            let obj = &exported["components"]["app"][key];
            assert_eq!(
                t.restore(obj).unwrap(),
                original["components"]["app"][key],
                "{key}"
            );
        }
        // A name that happens to hold the string stays: the core places objects by name.
        let mut named = json!({"kind": "ModuleRelease", "components": {"a": {"cm": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hunter2-pw", "namespace": "hunter2-pw"}}}}});
        t.redact_render_strings(&mut named);
        assert_eq!(
            named["components"]["a"]["cm"]["metadata"]["name"],
            json!("hunter2-pw")
        );
        let scrubbed = t.scrub("bad value hunter2-pw in postgres://u:hunter2-pw@db:5432/x");
        assert!(!scrubbed.contains("hunter2"), "{scrubbed}");
    }

    #[test]
    fn a_changed_secret_value_changes_the_redacted_object() {
        let secret = |v: &str| json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": v}});
        let (mut a, mut b) = (secret("YQ=="), secret("Yg=="));
        let mut t = SecretTable::default();
        t.redact_object(&mut a);
        t.redact_object(&mut b);
        assert_ne!(a, b);
    }
}
