//! Digests (SPEC §7). All are `sha256:<64 lowercase hex>`.
//!
//! Canonical JSON is written here with explicitly sorted keys rather than relying on
//! `serde_json::Map` order, because another crate in the build enabling `preserve_order`
//! would silently change every digest.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::api::InventoryEntry;

/// SHA-256 of zero bytes.
pub const EMPTY_DIGEST: &str =
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// `sha256:` + lowercase hex of the SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let sum = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in sum {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// True for `sha256:` followed by exactly 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Compact JSON with object keys sorted bytewise, at every depth.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // serde_json writes UTF-8 only, and so does everything else pushed here.
    String::from_utf8(out).unwrap_or_default()
}

/// Written straight into one buffer: this runs over every rendered value of every
/// attempt, and a string per key and per scalar was most of its cost.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            out.push(b'{');
            // Without `preserve_order` the map already iterates sorted: only copy and sort
            // the entries when it does not.
            if map.keys().is_sorted() {
                write_entries(map.iter(), out);
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                write_entries(entries.into_iter(), out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        scalar => write_json(scalar, out),
    }
}

fn write_entries<'a>(entries: impl Iterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(k, out);
        out.push(b':');
        write_canonical(v, out);
    }
}

/// Compact JSON of a key or scalar (writing into a `Vec` cannot fail).
fn write_json<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, v);
}

/// ModuleRelease source digest: SHA-256 of `path@version`.
pub fn module_source(path: &str, version: &str) -> String {
    sha256(format!("{path}@{version}").as_bytes())
}

/// ModuleRelease config digest: canonical `values`; absent (or null) → empty-input digest.
pub fn module_config(values: Option<&Value>) -> String {
    match values {
        None | Some(Value::Null) => EMPTY_DIGEST.to_string(),
        Some(v) => sha256(canonical_json(v).as_bytes()),
    }
}

/// Release config digest: canonical `{"path": …}`.
pub fn release_config(path: &str) -> String {
    sha256(canonical_json(&serde_json::json!({ "path": path })).as_bytes())
}

/// Render digest over objects already sorted by (group, kind, namespace, name) and stamped.
pub fn render<'a>(sorted_objects: impl IntoIterator<Item = &'a Value>) -> String {
    let mut buf = Vec::new();
    for o in sorted_objects {
        write_canonical(o, &mut buf);
    }
    sha256(&buf)
}

/// The order inventory entries are digested and stored in (SPEC §7): group, kind,
/// namespace, name, component, v.
pub(crate) fn inventory_order(e: &InventoryEntry) -> (&str, &str, &str, &str, &str, &str) {
    (&e.group, &e.kind, &e.namespace, &e.name, &e.component, &e.v)
}

/// Inventory digest: entries sorted by (group, kind, namespace, name, component, v), each
/// written with keys in the order group, kind, namespace, name, v, component, empty omitted.
pub fn inventory(entries: &[InventoryEntry]) -> String {
    if entries.is_empty() {
        return EMPTY_DIGEST.to_string();
    }
    let mut sorted: Vec<&InventoryEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| inventory_order(a).cmp(&inventory_order(b)));
    // Written into one buffer, as canonical JSON is: a `format!` and a `Value` copy per
    // field were most of this digest's cost, and it runs on every attempt.
    let mut out = Vec::with_capacity(128 * sorted.len());
    out.push(b'[');
    for (i, e) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'{');
        let fields = [
            ("group", &e.group),
            ("kind", &e.kind),
            ("namespace", &e.namespace),
            ("name", &e.name),
            ("v", &e.v),
            ("component", &e.component),
            ("prune", &e.prune),
        ];
        let mut first = true;
        for (k, v) in fields {
            if v.is_empty() {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.push(b'"');
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b"\":");
            write_json(v.as_str(), &mut out);
        }
        out.push(b'}');
    }
    out.push(b']');
    sha256(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_input_digest() {
        assert_eq!(sha256(b""), EMPTY_DIGEST);
        assert_eq!(module_config(None), EMPTY_DIGEST);
        assert_eq!(module_config(Some(&Value::Null)), EMPTY_DIGEST);
        assert_eq!(inventory(&[]), EMPTY_DIGEST);
        assert!(is_sha256(EMPTY_DIGEST));
        assert!(!is_sha256("sha256:E3B0"));
        assert!(!is_sha256("sha512:00"));
    }

    #[test]
    fn known_vectors() {
        // sha256("abc")
        assert_eq!(
            sha256(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            module_source("example.com/modules/web@v0", "v0.2.1"),
            sha256(b"example.com/modules/web@v0@v0.2.1")
        );
        assert_eq!(release_config("./app"), sha256(br#"{"path":"./app"}"#));
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = json!({"b": 1, "a": {"z": [3, {"y": true, "x": null}], "c": "é\"q"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"é\"q","z":[3,{"x":null,"y":true}]},"b":1}"#
        );
        assert_eq!(
            module_config(Some(&json!({"replicas": 2, "image": "nginx"}))),
            sha256(br#"{"image":"nginx","replicas":2}"#)
        );
    }

    #[test]
    fn inventory_digest_key_order_and_sorting() {
        let e = |g: &str, k: &str, ns: &str, n: &str, v: &str, c: &str| InventoryEntry {
            group: g.into(),
            kind: k.into(),
            namespace: ns.into(),
            name: n.into(),
            v: v.into(),
            component: c.into(),
            prune: String::new(),
        };
        let a = e("apps", "Deployment", "demo", "web", "v1", "web");
        let b = e("", "Service", "demo", "web", "v1", "web");
        let expected = sha256(
            br#"[{"kind":"Service","namespace":"demo","name":"web","v":"v1","component":"web"},{"group":"apps","kind":"Deployment","namespace":"demo","name":"web","v":"v1","component":"web"}]"#,
        );
        assert_eq!(inventory(&[a.clone(), b.clone()]), expected);
        assert_eq!(inventory(&[b, a]), expected);
    }

    #[test]
    fn render_digest_concatenates_canonical_objects() {
        let o1 = json!({"kind": "A", "apiVersion": "v1"});
        let o2 = json!({"kind": "B"});
        assert_eq!(
            render([&o1, &o2]),
            sha256(br#"{"apiVersion":"v1","kind":"A"}{"kind":"B"}"#)
        );
        assert_eq!(render([]), EMPTY_DIGEST);
    }
}
