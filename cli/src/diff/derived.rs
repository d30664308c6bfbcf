//! What a `valuesFrom` Secret value reaches in a render, so that it is never printed.

use serde_json::Value;

/// The rendered values a `valuesFrom` Secret value reaches (issue 31 item 9): every
/// string and number of the real render's objects that differs in a render with each
/// Secret value changed (`other`, see
/// [`SecretTable::restore_strings_perturbed`]), however the module transformed it (upper
/// case, base64, a hash). The digests of [`SecretTable::redact_render_strings`] catch
/// only values that contain the Secret's text. When the changed render fails (a schema
/// that refuses the changed value), every value of every object counts: nothing derived
/// from a Secret is printed, at the price of hiding the rest too.
pub(super) fn secret_derived(real: &Value, other: Option<&Value>) -> Vec<String> {
    fn walk(a: &Value, b: Option<&Value>, out: &mut Vec<String>) {
        match a {
            Value::Object(m) => {
                for (k, v) in m {
                    walk(v, b.and_then(|b| b.get(k)), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, b.and_then(|b| b.get(i)), out);
                }
            }
            Value::String(s) if b != Some(a) && !s.is_empty() => out.push(s.clone()),
            Value::Number(n) if b != Some(a) => out.push(n.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let components = |v: &Value| v.get("components").cloned();
    let theirs = other.and_then(components);
    if let Some(mine) = components(real) {
        walk(&mine, theirs.as_ref(), &mut out);
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}
