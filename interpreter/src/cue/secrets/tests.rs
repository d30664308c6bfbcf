//! Redaction round trips: what the core sees is digests, what the API server gets is real.

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
    // A number from a Secret is a digest to the core too (issue 31 item 8).
    assert_eq!(values["db"]["port"], json!(scalar_digest(&json!(5432))));
    // cue gets the real values back, each with its type.
    let real = t.restore_strings(&values);
    assert_eq!(real["db"]["password"], json!("hunter2-pw"));
    assert_eq!(real["db"]["port"], json!(5432));
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

/// Issue 31 item 8: numbers and booleans from a `valuesFrom` Secret were handed to the core
/// as they were, so `password: 84736251` reached the config digest's input, traces and the
/// render the core sees, and `cue` errors quote numbers unquoted. Now each is a digest to
/// the core, distinct from the string of the same text, and comes back exactly: type and
/// digits (`0042` as a string stays the string `0042`; a big integer keeps every digit).
#[test]
fn numbers_and_booleans_from_a_secret_are_digested_and_come_back_exactly() {
    let mut t = SecretTable::default();
    let mut values = json!({"password": 84736251, "pin": "0042", "admin": true,
        "big": 12345678901234567890_u64, "ratio": 0.25, "none": null});
    let original = values.clone();
    t.redact_strings(&mut values);
    let seen = values.to_string();
    for leaked in ["84736251", "0042", "12345678901234567890", "0.25", "true"] {
        assert!(!seen.contains(leaked), "{leaked} in {seen}");
    }
    assert_eq!(values["none"], json!(null));
    assert_ne!(
        values["password"],
        json!(opm_core::digest::sha256(b"84736251")),
        "a number and the string of its digits are told apart"
    );
    assert_eq!(t.restore_strings(&values), original);
    // The render copies the number into a ConfigMap as a number and inside a string: both
    // are digests to the core and the API server gets the real ones.
    let mut exported = json!({"kind": "ModuleRelease", "components": {"app": {
        "cm": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
               "data": {"dsn": "db?pw=84736251", "replicas": 3},
               "binaryData": {"n": 84736251}}}}});
    let rendered = exported.clone();
    t.redact_render_strings(&mut exported);
    let text = exported.to_string();
    assert!(!text.contains("84736251"), "{text}");
    assert!(
        text.contains("\"replicas\":3"),
        "short numbers stay: {text}"
    );
    let cm = &exported["components"]["app"]["cm"];
    assert_eq!(t.restore(cm).unwrap(), rendered["components"]["app"]["cm"]);
    // A cue error quoting it unquoted loses it.
    let msg = t.scrub("_m.#config.password: invalid value 84736251 (out of bound <=9999)");
    assert!(!msg.contains("84736251"), "{msg}");
}

/// The no-`targetPath` path: a Secret's YAML parsed and merged at the root. `0042` was a
/// float `42.0` (its leading zeros lost, and YAML 1.1 would read it as octal 34): it is
/// kept as the text it is. Its digits never reach the core, and `cue` gets it back as is.
#[test]
fn yaml_from_a_secret_keeps_leading_zeros_and_hides_every_scalar() {
    let mut v = crate::cue::local_values::parse("pin: 0042\npw: 84736251\nport: 5432\n").unwrap();
    assert_eq!(v, json!({"pin": "0042", "pw": 84736251, "port": 5432}));
    let parsed = v.clone();
    let mut t = SecretTable::default();
    t.redact_strings(&mut v);
    let seen = v.to_string();
    assert!(
        !seen.contains("0042") && !seen.contains("84736251"),
        "{seen}"
    );
    assert_eq!(t.restore_strings(&v), parsed);
}
