//! Secret values never reach the core (SPEC §23): after rendering, each value of a Secret's
//! `data`/`stringData` is replaced by `sha256:<hex>` of that value, and the real value is
//! kept in a per-attempt side table keyed by the digest. Apply and drift put the real
//! values back just before they talk to the API server. A changed value changes its digest,
//! so the render digest still moves.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

/// The real Secret values of one attempt, by digest. `Debug` shows only the count.
#[derive(Default, Clone)]
pub struct SecretTable {
    values: HashMap<String, String>,
}

impl fmt::Debug for SecretTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretTable({} values)", self.values.len())
    }
}

const FIELDS: [&str; 2] = ["data", "stringData"];

fn is_secret(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Secret")
        && obj.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

impl SecretTable {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
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
                if let Value::String(s) = v {
                    let digest = opm_core::digest::sha256(s.as_bytes());
                    self.values.insert(digest.clone(), std::mem::take(s));
                    *s = digest;
                }
            }
        }
    }

    /// A copy of `manifest` with digests of this table replaced by the real values.
    pub fn restore(&self, manifest: &Value) -> Value {
        let mut out = manifest.clone();
        if !is_secret(&out) || self.values.is_empty() {
            return out;
        }
        for field in FIELDS {
            let Some(map) = out.get_mut(field).and_then(Value::as_object_mut) else {
                continue;
            };
            for v in map.values_mut() {
                if let Value::String(s) = v
                    && let Some(real) = self.values.get(s.as_str())
                {
                    *s = real.clone();
                }
            }
        }
        out
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
        let restored = table.restore(secret);
        assert_eq!(restored["stringData"]["p"], json!("hunter2"));
        assert_eq!(restored["data"]["k"], json!("aHVudGVyMg=="));
    }
}
