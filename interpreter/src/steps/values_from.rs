//! The `ReadValues` executor (SPEC §27): GETs each `valuesFrom` ConfigMap or Secret and the
//! `module.secretRef` Secret with the client of the release's effective identity, and
//! reports what it found. It decides nothing: missing, forbidden and malformed are facts
//! for the core to classify.
//!
//! Secret hygiene (SPEC §23): every string read from a Secret is handed to the core as its
//! digest and kept in the attempt's [`SecretTable`]; a parse error of a Secret's content
//! is reported without the parser's text, which may quote the content.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use opm_core::api::values_from::{ValuesKind, ValuesReference};
use opm_core::input::{ApiError, InputKind};
use opm_core::values_from::{CredentialsContent, ValuesContent};
use serde_json::Value;

use crate::cue::local_values::parse;
use crate::cue::secrets::SecretTable;
use crate::kube::api_error;

/// The Secret type `module.secretRef` must have.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Its key.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";

/// Reads everything `ReadValues` names, in order.
pub async fn read(
    client: Result<Client, ApiError>,
    namespace: &str,
    refs: &[ValuesReference],
    credentials: Option<&str>,
    secrets: &mut SecretTable,
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
    for r in refs {
        values.push(read_one(&client, namespace, r, secrets).await);
    }
    let credentials = match credentials {
        Some(name) => Some(read_credentials(&client, namespace, name, secrets).await),
        None => None,
    };
    InputKind::ValuesRead {
        values,
        credentials,
    }
}

/// The raw bytes at the reference's key, `Ok(None)` for a missing object, `Ok(Some(None))`
/// for a missing key.
async fn fetch_bytes(
    client: &Client,
    namespace: &str,
    r: &ValuesReference,
) -> Result<Option<Option<Vec<u8>>>, ApiError> {
    let key = r.key();
    match r.kind {
        ValuesKind::ConfigMap => {
            let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| api_error::from_kube(&e))?;
            Ok(cm.map(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|s| s.as_bytes().to_vec())
                    .or_else(|| {
                        cm.binary_data
                            .as_ref()
                            .and_then(|d| d.get(key))
                            .map(|b| b.0.clone())
                    })
            }))
        }
        ValuesKind::Secret => {
            let s = Api::<Secret>::namespaced(client.clone(), namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| api_error::from_kube(&e))?;
            Ok(s.map(|s| s.data.and_then(|mut d| d.remove(key)).map(|b| b.0)))
        }
    }
}

async fn read_one(
    client: &Client,
    namespace: &str,
    r: &ValuesReference,
    secrets: &mut SecretTable,
) -> Result<ValuesContent, ApiError> {
    let secret = r.kind == ValuesKind::Secret;
    let bytes = match fetch_bytes(client, namespace, r).await? {
        None => return Ok(ValuesContent::ObjectMissing),
        Some(None) => return Ok(ValuesContent::KeyMissing),
        Some(Some(b)) => b,
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return Ok(ValuesContent::Unparsable {
            message: "the content is not UTF-8 text".into(),
        });
    };
    let mut value = if r.target_path.as_deref().is_some_and(|p| !p.is_empty()) {
        Value::String(text)
    } else {
        match parse(&text) {
            Ok(v) => v,
            Err(message) => {
                return Ok(ValuesContent::Unparsable {
                    // A Secret's content may be quoted by the parser: say where, not what.
                    message: if secret {
                        "the YAML parser refused it (its message is withheld: it may quote the Secret)".into()
                    } else {
                        message
                    },
                });
            }
        }
    };
    if secret {
        secrets.redact_strings(&mut value);
    }
    Ok(ValuesContent::Found { value })
}

async fn read_credentials(
    client: &Client,
    namespace: &str,
    name: &str,
    secrets: &mut SecretTable,
) -> Result<CredentialsContent, ApiError> {
    let Some(s) = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| api_error::from_kube(&e))?
    else {
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
    use super::*;

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
