//! The exported release value (DESIGN §3) and the Secret redaction of SPEC §23.
//!
//! The core must never see a Secret's values (they would land in digests' inputs, traces and
//! status), yet a changed value must still change the render digest. So before a render
//! reaches the core each `data`/`stringData` value of a `v1` Secret is replaced by
//! `sha256:<hex>` of the value, and the real value is kept in a [`SecretValues`] side table
//! that the apply executor uses to put it back.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::render::RenderError;

/// The exported release: `kind: ModuleRelease`, `metadata`, `components`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The whole exported value.
    pub exported: Value,
    /// `components.<component>.<key>` → object, in sorted order.
    pub components: BTreeMap<String, BTreeMap<String, Value>>,
}

impl Rendered {
    /// Checks the exported JSON has the release shape of DESIGN §3.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RenderError> {
        let exported: Value =
            serde_json::from_slice(bytes).map_err(|e| RenderError::InvalidOutput {
                message: format!("cue output is not JSON: {e}"),
            })?;
        match exported.get("kind") {
            Some(Value::String(k)) if k == "ModuleRelease" => {}
            Some(Value::String(k)) => {
                return Err(RenderError::UnsupportedKind {
                    kind: Some(k.clone()),
                });
            }
            Some(other) => {
                return Err(RenderError::UnsupportedKind {
                    kind: Some(other.to_string()),
                });
            }
            None => return Err(RenderError::UnsupportedKind { kind: None }),
        }
        let invalid = |message: String| RenderError::InvalidOutput { message };
        let comps = match exported.get("components") {
            Some(Value::Object(m)) => m,
            Some(_) => return Err(invalid("components is not a struct".into())),
            None => return Err(invalid("exported value has no components".into())),
        };
        let mut components = BTreeMap::new();
        for (name, objs) in comps {
            let Value::Object(objs) = objs else {
                return Err(invalid(format!("component {name:?} is not a struct")));
            };
            let mut out = BTreeMap::new();
            for (key, obj) in objs {
                if !obj.is_object() {
                    return Err(invalid(format!("components.{name}.{key} is not an object")));
                }
                out.insert(key.clone(), obj.clone());
            }
            components.insert(name.clone(), out);
        }
        Ok(Self {
            exported,
            components,
        })
    }

    /// Replaces every Secret value by its digest (in `components` and `exported` alike) and
    /// returns the real values keyed by digest.
    pub fn redact_secrets(&mut self) -> SecretValues {
        let mut table = SecretValues::default();
        for (component, objects) in &mut self.components {
            for (key, object) in objects.iter_mut() {
                if table.redact(object) {
                    self.exported["components"][component.as_str()][key.as_str()] = object.clone();
                }
            }
        }
        table
    }

    /// Every object with its component and key, in sorted order.
    pub fn objects(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.components
            .iter()
            .flat_map(|(c, objs)| objs.iter().map(move |(k, v)| (c.as_str(), k.as_str(), v)))
    }
}

fn is_secret(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// `sha256:<hex>` of a Secret value: of the string itself (for `data`, the base64 text as
/// rendered), or of the JSON text of a non-string value.
pub fn secret_digest(value: &Value) -> String {
    let bytes = match value {
        Value::String(s) => s.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    };
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Real Secret values keyed by their digest. Its `Debug` shows only how many there are, so it
/// is safe to log.
#[derive(Clone, Default, PartialEq)]
pub struct SecretValues {
    values: BTreeMap<String, Value>,
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValues({} redacted)", self.values.len())
    }
}

/// An object to apply refers to a digest the side table does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret value for {digest} is not known to this render")]
pub struct UnknownSecretDigest {
    pub digest: String,
}

impl SecretValues {
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Redacts `object` in place if it is a Secret; whether anything changed.
    pub fn redact(&mut self, object: &mut Value) -> bool {
        if !is_secret(object) {
            return false;
        }
        let mut changed = false;
        for field in ["data", "stringData"] {
            if let Some(Value::Object(map)) = object.get_mut(field) {
                for value in map.values_mut() {
                    let digest = secret_digest(value);
                    let real = std::mem::replace(value, Value::String(digest.clone()));
                    self.values.insert(digest, real);
                    changed = true;
                }
            }
        }
        changed
    }

    /// Puts the real values back into a Secret the core handed out for apply. Objects that
    /// are not Secrets are left alone.
    pub fn restore(&self, object: &mut Value) -> Result<(), UnknownSecretDigest> {
        if !is_secret(object) {
            return Ok(());
        }
        for field in ["data", "stringData"] {
            if let Some(Value::Object(map)) = object.get_mut(field) {
                for value in map.values_mut() {
                    let digest = value.as_str().unwrap_or_default().to_owned();
                    let real = self
                        .values
                        .get(&digest)
                        .ok_or(UnknownSecretDigest { digest })?;
                    *value = real.clone();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exported_kind_is_checked() {
        let e = Rendered::from_json(br#"{"kind":"Deployment","components":{}}"#).unwrap_err();
        assert_eq!(
            e,
            RenderError::UnsupportedKind {
                kind: Some("Deployment".into())
            }
        );
        assert_eq!(e.reason(), "UnsupportedKind");
        let e = Rendered::from_json(br#"{"components":{}}"#).unwrap_err();
        assert_eq!(e, RenderError::UnsupportedKind { kind: None });
        let e = Rendered::from_json(br#"{"kind":"ModuleRelease","components":{"a":{"b":1}}}"#)
            .unwrap_err();
        assert!(matches!(e, RenderError::InvalidOutput { .. }), "{e:?}");
        let ok = Rendered::from_json(
            br#"{"kind":"ModuleRelease","components":{"b":{"y":{"kind":"S"}},"a":{"x":{"kind":"C"}}}}"#,
        )
        .unwrap();
        let keys: Vec<_> = ok.objects().map(|(c, k, _)| format!("{c}/{k}")).collect();
        assert_eq!(keys, ["a/x", "b/y"]);
    }

    #[test]
    fn secrets_are_redacted_to_digests_and_restored() {
        let raw = json!({"kind": "ModuleRelease", "components": {"app": {
            "s": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                  "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "t0p", "n": 5}},
            "cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                   "data": {"password": "visible"}}
        }}});
        let mut r = Rendered::from_json(raw.to_string().as_bytes()).unwrap();
        let table = r.redact_secrets();
        assert_eq!(table.len(), 3);
        let s = &r.components["app"]["s"];
        let pw = s["data"]["password"].as_str().unwrap();
        assert_eq!(
            pw,
            format!("sha256:{}", hex::encode(Sha256::digest(b"aHVudGVyMg==")))
        );
        assert_eq!(s["stringData"]["n"], secret_digest(&json!(5)));
        // Nothing of the values is left anywhere the core can see.
        let seen = format!("{} {:?}", r.exported, r.components);
        for secret in ["aHVudGVyMg==", "t0p"] {
            assert!(!seen.contains(secret), "{secret} leaked");
        }
        assert!(!format!("{table:?}").contains("t0p"));
        assert_eq!(r.exported["components"]["app"]["s"], *s);
        // ConfigMaps are not Secrets.
        assert_eq!(r.components["app"]["cm"]["data"]["password"], "visible");

        let mut back = s.clone();
        table.restore(&mut back).unwrap();
        assert_eq!(back, raw["components"]["app"]["s"]);
        let mut foreign = s.clone();
        foreign["data"]["password"] = json!(secret_digest(&json!("other")));
        assert!(table.restore(&mut foreign).is_err());
    }

    #[test]
    fn a_changed_secret_value_changes_the_redacted_object() {
        let secret = |v: &str| json!({"apiVersion": "v1", "kind": "Secret", "data": {"k": v}});
        let (mut a, mut b) = (secret("YQ=="), secret("Yg=="));
        let mut t = SecretValues::default();
        t.redact(&mut a);
        t.redact(&mut b);
        assert_ne!(a, b);
    }
}
