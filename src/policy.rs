//! Per-object policies (SPEC §28): the `releases.opmodel.dev/ssa` and
//! `releases.opmodel.dev/force` annotations, and `driftDetection.ignore` rules.
//!
//! The annotations are instructions to the operator: they are read from the rendered object
//! and stripped before anything is applied (after the render digest was taken, so changing a
//! policy is a change). Ignore rules follow Flux's shape (`paths` as JSON pointers and an
//! optional `target` selector) and its field-ownership semantics: an ignored field another
//! manager owns is left out of what we apply, so we never claim it; one only we manage keeps
//! its live value, so an apply never resets it. Either way it is never drift.
//!
//! Whether an object is written at all, and forced, is [`write_plan`] (skip, apply, force),
//! the one home of that rule for the operator's apply, the simulated world and
//! `kubectl opm diff`; what is written is [`prepare`].

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{IgnoreRule, IgnoreTarget};
use crate::fields;
use crate::object::DesiredObject;
pub use crate::object::{ObjectPolicy, SsaPolicy};
use crate::outcome::Failure;
use crate::reason::Reason;

pub mod recreate;
mod write_plan;

pub use write_plan::{WritePlan, write_plan};

/// `releases.opmodel.dev/ssa`.
pub(crate) const SSA_ANNOTATION: &str = "releases.opmodel.dev/ssa";
/// `releases.opmodel.dev/force`.
pub(crate) const FORCE_ANNOTATION: &str = "releases.opmodel.dev/force";
/// The value of [`FORCE_ANNOTATION`] that allows delete-and-recreate.
pub(crate) const FORCE_ENABLED: &str = "enabled";

/// The Normal `Recreated` event's note.
pub(crate) fn recreated_message(id: &crate::object::ResourceId) -> String {
    format!(
        "Recreated {}: an immutable field changed and it is annotated {FORCE_ANNOTATION}: {FORCE_ENABLED}",
        id.display()
    )
}

/// Reads and strips the `ssa` and `force` annotations and attaches the matching ignore
/// paths. An annotation value the operator does not know is a `RenderFailed` stall naming
/// the object and the values it takes (a typo must not silently mean "Override").
pub fn extract(objects: &mut [DesiredObject], rules: &[IgnoreRule]) -> Result<(), Failure> {
    for o in objects.iter_mut() {
        let mut policy = ObjectPolicy::default();
        if let Some(v) = take_annotation(&mut o.manifest, SSA_ANNOTATION) {
            policy.ssa = SsaPolicy::parse(&v).ok_or_else(|| {
                Failure::stalled(
                    Reason::RenderFailed,
                    format!(
                        "{}: annotation {SSA_ANNOTATION}: {v:?} is not one of Override, Merge, IfNotPresent, Ignore",
                        o.id.display()
                    ),
                )
            })?;
        }
        if let Some(v) = take_annotation(&mut o.manifest, FORCE_ANNOTATION) {
            policy.force = match v.as_str() {
                FORCE_ENABLED => true,
                "disabled" => false,
                _ => {
                    return Err(Failure::stalled(
                        Reason::RenderFailed,
                        format!(
                            "{}: annotation {FORCE_ANNOTATION}: {v:?} is not one of enabled, disabled",
                            o.id.display()
                        ),
                    ));
                }
            };
        }
        for rule in rules {
            if rule.target.as_ref().is_none_or(|t| matches(t, o)) {
                for p in &rule.paths {
                    if !policy.ignore.contains(p) {
                        policy.ignore.push(p.clone());
                    }
                }
            }
        }
        o.policy = policy;
    }
    Ok(())
}

/// Removes one annotation (and an `annotations` map left empty), returning its value.
fn take_annotation(manifest: &mut Value, key: &str) -> Option<String> {
    let meta = manifest.get_mut("metadata")?.as_object_mut()?;
    let ann = meta.get_mut("annotations")?.as_object_mut()?;
    let v = ann.remove(key)?;
    if ann.is_empty() {
        meta.remove("annotations");
    }
    Some(match v {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// Whether an ignore rule's target selects the object. Every given field must match
/// exactly; `labelSelector` is Kubernetes label-selector syntax over the rendered labels.
pub fn matches(t: &IgnoreTarget, o: &DesiredObject) -> bool {
    let eq = |want: &str, got: &str| want.is_empty() || want == got;
    if !(eq(&t.group, &o.id.group)
        && eq(&t.version, &o.id.version)
        && eq(&t.kind, &o.id.kind)
        && eq(&t.name, &o.id.name)
        && eq(&t.namespace, &o.id.namespace))
    {
        return false;
    }
    if t.label_selector.is_empty() {
        return true;
    }
    let labels: BTreeMap<String, String> = o
        .manifest
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    selector_matches(&t.label_selector, &labels)
}

/// Kubernetes label-selector syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
/// `k notin (a,b)`, comma-separated (all must hold). A requirement that does not parse
/// selects nothing, so a typo never widens a rule.
pub(crate) fn selector_matches(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    split_requirements(selector)
        .iter()
        .all(|r| requirement(r.trim(), labels).unwrap_or(false))
}

/// Splits on commas outside parentheses.
fn split_requirements(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().filter(|r| !r.trim().is_empty()).collect()
}

fn requirement(r: &str, labels: &BTreeMap<String, String>) -> Option<bool> {
    if let Some(k) = r.strip_prefix('!') {
        return Some(!labels.contains_key(k.trim()));
    }
    for (op, negate) in [(" notin ", true), (" in ", false)] {
        if let Some((k, set)) = r.split_once(op) {
            let set = set.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values: Vec<&str> = set.split(',').map(str::trim).collect();
            let hit = labels
                .get(k.trim())
                .is_some_and(|v| values.contains(&v.as_str()));
            return Some(hit != negate);
        }
    }
    if let Some((k, v)) = r.split_once("!=") {
        return Some(labels.get(k.trim()).map(String::as_str) != Some(v.trim()));
    }
    if let Some((k, v)) = r.split_once("==").or_else(|| r.split_once('=')) {
        return Some(labels.get(k.trim()).map(String::as_str) == Some(v.trim()));
    }
    if r.contains(|c: char| c.is_whitespace() || "()".contains(c)) {
        return None;
    }
    Some(labels.contains_key(r))
}

/// The manifest to apply once the live object is known (SPEC §28), as the interpreter
/// calls it right before the dry-run and the write:
/// - an ignored path another manager owns in `live` is removed (we never claim it);
/// - an ignored path only we manage keeps its live value (or stays unset when the live
///   object has none), so the apply never changes it;
/// - with `ssa: Merge`, every field whose live value another manager owns and that our
///   manifest would change is removed, so the apply never takes it.
///
/// Without a live object (a create) the manifest is applied as rendered.
pub fn prepare(manifest: &Value, live: Option<&Value>, policy: &ObjectPolicy, ours: &str) -> Value {
    let mut out = manifest.clone();
    let Some(live) = live else {
        return out;
    };
    for p in &policy.ignore {
        let segs = fields::parse_pointer(p);
        if segs.is_empty() {
            continue;
        }
        if !fields::other_owners(live, &segs, ours).is_empty() {
            fields::remove(&mut out, &segs);
        } else if let Some(v) = fields::get(live, &segs) {
            fields::set(&mut out, &segs, v.clone());
        } else {
            fields::remove(&mut out, &segs);
        }
    }
    if policy.ssa == SsaPolicy::Merge {
        let view = fields::managed_view(manifest);
        for segs in leaves(&view) {
            if fields::get(live, &segs) != fields::get(manifest, &segs)
                && !fields::other_owners(live, &segs, ours).is_empty()
            {
                fields::remove(&mut out, &segs);
            }
        }
    }
    out
}

/// Leaf paths of a value (scalars and empty containers), deepest first within arrays so
/// removing one element never shifts another path still to be removed.
fn leaves(v: &Value) -> Vec<Vec<String>> {
    fn go(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, c) in m {
                    path.push(k.clone());
                    go(c, path, out);
                    path.pop();
                }
            }
            Value::Array(a) if !a.is_empty() => {
                for (i, c) in a.iter().enumerate().rev() {
                    path.push(i.to_string());
                    go(c, path, out);
                    path.pop();
                }
            }
            _ => out.push(path.clone()),
        }
    }
    let mut out = Vec::new();
    go(v, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests;
