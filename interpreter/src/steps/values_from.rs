//! The `ReadValues` executor (SPEC §27): GETs each `valuesFrom` ConfigMap or Secret and the
//! `module.secretRef` Secret with the client of the release's effective identity, and
//! reports what it found. It decides nothing: missing, forbidden and malformed are facts
//! for the core to classify.
//!
//! Secret hygiene (SPEC §23): every string read from a Secret is handed to the core as its
//! digest and kept in the attempt's [`SecretTable`]; a parse error of a Secret's content
//! is reported without the parser's text, which may quote the content.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use opm_core::api::values_from::{ValuesKind, ValuesReference};
use opm_core::input::{ApiError, InputKind};
use opm_core::values_from::{CredentialsContent, ValuesContent};
use serde_json::Value;

use crate::cue::local_values::{BoundedParseError, parse_bounded};
use crate::cue::secrets::SecretTable;
use crate::kube::api_error;

/// The Secret type `module.secretRef` must have.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Its key.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";

/// One object a `valuesFrom` entry or `module.secretRef` names, as one identity reads it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadKey {
    /// `system:serviceaccount:…`, or empty for the operator's own identity.
    pub user: String,
    /// ConfigMap or Secret.
    pub kind: ValuesKind,
    /// The release's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

/// What a read saw of one object: `None` when it did not exist, else its
/// `resourceVersion` (empty when the server gave none).
pub type Seen = Option<String>;

/// How long a record no release's references name any more is kept (the store that
/// lists references may lag behind a read of a release it has not seen yet).
const FORGET_AFTER: Duration = Duration::from_secs(60);

/// The version of each `valuesFrom` / `module.secretRef` object the last render read,
/// under the identity that read it (SPEC §27). The values watch opens only for objects in
/// here, so only once a read under that identity happened, which the core allows only
/// after the ServiceAccount was found; and its first list compares with the version read,
/// so an edit made between the read and the start of the watch re-triggers at once.
#[derive(Default)]
pub struct ReadVersions {
    map: Mutex<HashMap<ReadKey, (Seen, Instant)>>,
}

impl ReadVersions {
    /// Records what a read saw.
    pub fn record(&self, key: ReadKey, seen: Seen) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(key, (seen, Instant::now()));
    }

    /// What the last read saw of `key`, if any read of it under that identity happened.
    pub fn get(&self, key: &ReadKey) -> Option<Seen> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(key).map(|(s, _)| s.clone())
    }

    /// Forgets records of objects `wanted` does not name, once they are old enough.
    pub fn forget_unless(&self, wanted: impl Fn(&ReadKey) -> bool) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|k, (_, at)| wanted(k) || at.elapsed() < FORGET_AFTER);
    }
}

/// Reads everything `ReadValues` names, in order. An object named by several entries is
/// read once (SPEC §24), and the same key of it in the same form is parsed once. Parsing
/// stops once the content of all entries passes `max_bytes` (`--max-values-bytes`): that
/// entry is `TooLarge` with what was counted, the entries after it `TooLarge` with 0 and
/// not read, so a release at the cap holds at most the cap in parsed values.
pub async fn read(
    client: Result<Client, ApiError>,
    namespace: &str,
    refs: &[ValuesReference],
    credentials: Option<&str>,
    secrets: &mut SecretTable,
    max_bytes: u64,
    seen: &mut Vec<(ValuesKind, String, Seen)>,
) -> InputKind {
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            return InputKind::ValuesRead {
                values: refs.iter().map(|_| Err(e.clone())).collect(),
                credentials: credentials.map(|_| Err(e.clone())),
            };
        }
    };
    let mut values = Vec::with_capacity(refs.len());
    let mut objects: BTreeMap<(ValuesKind, &str), Result<Option<Fetched>, ApiError>> =
        BTreeMap::new();
    let mut parsed: BTreeMap<(ValuesKind, &str, &str, bool), Result<ValuesContent, ApiError>> =
        BTreeMap::new();
    let mut used: u64 = 0;
    for r in refs {
        if used > max_bytes {
            values.push(Ok(ValuesContent::TooLarge { bytes: 0 }));
            continue;
        }
        let raw = r.target_path.as_deref().is_some_and(|p| !p.is_empty());
        let entry = (r.kind, r.name.as_str(), r.key(), raw);
        if let Some(done) = parsed.get(&entry) {
            values.push(done.clone());
            continue;
        }
        let object_key = (r.kind, r.name.as_str());
        if let std::collections::btree_map::Entry::Vacant(slot) = objects.entry(object_key) {
            let o = fetch(&client, namespace, r).await;
            if let Ok(f) = &o {
                let version = f.as_ref().map(|f| f.version.clone());
                seen.push((r.kind, r.name.clone(), version));
            }
            slot.insert(o);
        }
        let got = match &objects[&object_key] {
            Ok(o) => Ok(content(
                r,
                o.as_ref().map(|f| f.data.get(r.key()).cloned()),
                secrets,
                max_bytes.saturating_sub(used),
            )),
            Err(e) => Err(e.clone()),
        };
        match &got {
            Ok(ValuesContent::Found { value }) => {
                used = used.saturating_add(opm_core::values_from::size_of(value));
            }
            Ok(ValuesContent::TooLarge { bytes }) => {
                used = used.saturating_add(*bytes).max(max_bytes.saturating_add(1));
            }
            _ => {}
        }
        parsed.insert(entry, got.clone());
        values.push(got);
    }
    let credentials = match credentials {
        Some(name) => Some(read_credentials(&client, namespace, name, secrets, seen).await),
        None => None,
    };
    InputKind::ValuesRead {
        values,
        credentials,
    }
}

/// The data of a ConfigMap (`data` and `binaryData`) or a Secret, by key.
type Data = BTreeMap<String, Vec<u8>>;

/// An object read, with its `resourceVersion` (for the values watch).
struct Fetched {
    version: String,
    data: Data,
}

/// The object an entry names, `Ok(None)` when it does not exist.
async fn fetch(
    client: &Client,
    namespace: &str,
    r: &ValuesReference,
) -> Result<Option<Fetched>, ApiError> {
    match r.kind {
        ValuesKind::ConfigMap => {
            let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| api_error::from_kube(&e))?;
            Ok(cm.map(|cm| {
                let version = cm.metadata.resource_version.clone().unwrap_or_default();
                let mut d: Data = cm
                    .binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                // `data` wins over `binaryData` (the API server refuses a key in both).
                d.extend(
                    cm.data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes())),
                );
                Fetched { version, data: d }
            }))
        }
        ValuesKind::Secret => {
            let s = Api::<Secret>::namespaced(client.clone(), namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| api_error::from_kube(&e))?;
            Ok(s.map(|s| Fetched {
                version: s.metadata.resource_version.unwrap_or_default(),
                data: s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect(),
            }))
        }
    }
}

/// What one entry found: `bytes` is `None` for a missing object, `Some(None)` for a
/// missing key. At most `budget` bytes of parsed content are built.
fn content(
    r: &ValuesReference,
    bytes: Option<Option<Vec<u8>>>,
    secrets: &mut SecretTable,
    budget: u64,
) -> ValuesContent {
    let secret = r.kind == ValuesKind::Secret;
    let bytes = match bytes {
        None => return ValuesContent::ObjectMissing,
        Some(None) => return ValuesContent::KeyMissing,
        Some(Some(b)) => b,
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ValuesContent::Unparsable {
            message: "the content is not UTF-8 text".into(),
        };
    };
    let mut value = if r.target_path.as_deref().is_some_and(|p| !p.is_empty()) {
        let v = Value::String(text);
        let n = opm_core::values_from::size_of(&v);
        if n > budget {
            return ValuesContent::TooLarge { bytes: n };
        }
        v
    } else {
        match parse_bounded(&text, budget) {
            Ok((v, _)) => v,
            Err(BoundedParseError::TooLarge { counted, .. }) => {
                return ValuesContent::TooLarge { bytes: counted };
            }
            Err(BoundedParseError::Invalid(message)) => {
                return ValuesContent::Unparsable {
                    // A Secret's content may be quoted by the parser: say where, not what.
                    message: if secret {
                        "the YAML parser refused it (its message is withheld: it may quote the Secret)".into()
                    } else {
                        message
                    },
                };
            }
        }
    };
    if secret {
        secrets.redact_strings(&mut value);
    }
    ValuesContent::Found { value }
}

async fn read_credentials(
    client: &Client,
    namespace: &str,
    name: &str,
    secrets: &mut SecretTable,
    seen: &mut Vec<(ValuesKind, String, Seen)>,
) -> Result<CredentialsContent, ApiError> {
    let got = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| api_error::from_kube(&e))?;
    seen.push((
        ValuesKind::Secret,
        name.to_string(),
        got.as_ref()
            .map(|s| s.metadata.resource_version.clone().unwrap_or_default()),
    ));
    let Some(s) = got else {
        return Ok(CredentialsContent::ObjectMissing);
    };
    let type_ = s.type_.as_deref().unwrap_or("Opaque");
    if type_ != DOCKER_CONFIG_JSON_TYPE {
        return Ok(CredentialsContent::Invalid {
            message: format!("type is {type_:?}; want {DOCKER_CONFIG_JSON_TYPE:?}"),
        });
    }
    let Some(bytes) = s.data.and_then(|mut d| d.remove(DOCKER_CONFIG_JSON_KEY)) else {
        return Ok(CredentialsContent::Invalid {
            message: format!("no {DOCKER_CONFIG_JSON_KEY} key"),
        });
    };
    if serde_json::from_slice::<serde_json::Map<String, Value>>(&bytes.0).is_err() {
        return Ok(CredentialsContent::Invalid {
            message: format!("{DOCKER_CONFIG_JSON_KEY} is not a JSON object"),
        });
    }
    Ok(CredentialsContent::Found {
        digest: secrets.remember_credentials(bytes.0),
    })
}

#[cfg(test)]
mod tests {
    use crate::cue::local_values::parse;

    #[test]
    fn yaml_and_json_parse_and_empty_is_a_mapping() {
        assert_eq!(
            parse("a: 1\nb: [x]\n").unwrap(),
            serde_json::json!({"a": 1, "b": ["x"]})
        );
        assert_eq!(
            parse("{\"a\": {\"b\": true}}").unwrap(),
            serde_json::json!({"a": {"b": true}})
        );
        assert_eq!(parse("  \n").unwrap(), serde_json::json!({}));
        assert!(parse("a: [unclosed").is_err());
    }
}
