//! The exported release value (DESIGN §3). Its Secrets are redacted before the core sees
//! them by [`crate::cue::secrets::SecretTable`] (SPEC §23).

use std::sync::Arc;

use serde_json::Value;

use crate::cue::render_error::RenderError;

/// The exported release: `kind: ModuleRelease`, `metadata`, `components`. The objects
/// stay inside `exported` (checked, never copied out): a render at the caps is held once.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The whole exported value.
    pub exported: Value,
    /// Size of the exported JSON, in bytes (compared with `--max-render-bytes` by the core).
    pub bytes: u64,
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
        for (name, objs) in comps {
            let Value::Object(objs) = objs else {
                return Err(invalid(format!("component {name:?} is not a struct")));
            };
            for (key, obj) in objs {
                if !obj.is_object() {
                    return Err(invalid(format!("components.{name}.{key} is not an object")));
                }
            }
        }
        Ok(Self {
            exported,
            bytes: bytes.len() as u64,
        })
    }

    /// `components.<component>` → its objects by key.
    pub fn component(&self, name: &str) -> Option<&serde_json::Map<String, Value>> {
        self.exported
            .get("components")
            .and_then(|c| c.get(name))
            .and_then(Value::as_object)
    }

    /// Every object with its component and key, in sorted order.
    pub fn objects(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        let mut all: Vec<(&str, &str, &Value)> = self
            .exported
            .get("components")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|cs| cs.iter())
            .filter_map(|(c, objs)| objs.as_object().map(|o| (c, o)))
            .flat_map(|(c, objs)| objs.iter().map(move |(k, v)| (c.as_str(), k.as_str(), v)))
            .collect();
        all.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        all.into_iter()
    }

    /// The exported value and its JSON size, moved out when this is the only reference.
    pub fn into_parts(this: Arc<Self>) -> (Value, u64) {
        match Arc::try_unwrap(this) {
            Ok(r) => (r.exported, r.bytes),
            Err(shared) => (shared.exported.clone(), shared.bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::local::Verdict;

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
}
