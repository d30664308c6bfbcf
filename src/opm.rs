//! OPM modules and the Platform (SPEC §30): the pure rules. Which render a module gets
//! ([`flavour`]), what the operator's glue exported means ([`read_export`]: objects, or the
//! verdicts that fail the render closed), the name of an incomplete output in `cue`'s error
//! ([`incomplete_output`]), the Platform's digest and status ([`platform`]) and how that
//! digest enters an OPM release's config digest ([`config_digest`]).
//!
//! The interpreter runs `cue` and reads files; every decision about what came back is here,
//! so the operator, `opm-operator render` and the tests judge a render the same way.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::digest;

pub mod platform;
#[cfg(test)]
mod tests;

/// The module path of OPM's core schema, line v2: a module depending on it is an OPM module.
pub const CORE_V2: &str = "opmodel.dev/core@v2";
/// The retired core line of the seed's kernel era: refused with a clear stall.
pub const CORE_V0: &str = "opmodel.dev/core@v0";
/// The seed's release packages embedded `#ModuleRelease` from this core v0 package path.
pub const CORE_V0_RELEASE: &str = "opmodel.dev/core/v1alpha1";
/// The `#runtimeName` the glue gives every transformer's context (SPEC §30): the value of
/// `app.kubernetes.io/managed-by` on OPM objects, equal to the operator's own (SPEC §6).
pub const RUNTIME_NAME: &str = "opm-controller";
/// The file of an authored OPM instance package in a `Release` artifact.
pub const INSTANCE_FILE: &str = "instance.cue";
/// The kind an authored instance package exports.
pub const INSTANCE_KIND: &str = "ModuleInstance";

/// How a module version (or a Release package) is rendered. Decided once per module version:
/// versions are immutable.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum Flavour {
    /// The plain contract of DESIGN §3: the module exports `components` itself.
    Plain,
    /// An OPM module of core v2: rendered through the Platform.
    Opm,
    /// A module of the retired core v0: a `RenderFailed` stall, never a CUE error.
    CoreV0,
}

/// The flavour of a module from the module paths it depends on (its `cue.mod/module.cue`
/// `deps`, as `cue` resolved them). Core v2 wins: a module that still carries a v0
/// dependency beside v2 renders as OPM.
pub fn flavour<'a>(deps: impl IntoIterator<Item = &'a str>) -> Flavour {
    let mut v0 = false;
    for d in deps {
        let d = d.trim();
        if d == CORE_V2 {
            return Flavour::Opm;
        }
        if d == CORE_V0 || d.starts_with(CORE_V0_RELEASE) {
            v0 = true;
        }
    }
    if v0 { Flavour::CoreV0 } else { Flavour::Plain }
}

/// The stall message of a core v0 module or package.
pub fn core_v0_message(what: &str) -> String {
    format!(
        "{what} depends on the retired OPM core v0 ({CORE_V0}): core v0 modules must move to core v2 \
         ({CORE_V2}); the operator renders OPM modules of core v2 only"
    )
}

/// Why an OPM render fails closed (SPEC §30): each names the component and what is missing,
/// doubled or not concrete.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(
    tag = "verdict",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Verdict {
    /// No transformer of the Platform matches the component.
    Unmatched {
        /// The component's name.
        component: String,
    },
    /// A resource or trait of the component that no matched transformer declares.
    Unhandled {
        /// The component's name.
        component: String,
        /// `resource` or `trait`.
        kind: String,
        /// The resource's or trait's FQN.
        fqn: String,
    },
    /// One transformer provided by two enabled catalogs.
    Duplicate {
        /// The transformer's name (or FQN).
        transformer: String,
        /// The catalogs providing it.
        catalogs: Vec<String>,
    },
    /// A transformer's output is not concrete (`cue` stopped at `matches.<c>."<fqn>"...`).
    Incomplete {
        /// The component's name.
        component: String,
        /// The transformer's FQN.
        transformer: String,
        /// The field that is not concrete, below the output (may be empty).
        field: String,
    },
    /// A transformer's output (or an element of its list) is not a Kubernetes object.
    NotAnObject {
        /// The component's name.
        component: String,
        /// The transformer's FQN.
        transformer: String,
    },
    /// The export does not have the glue's shape (the operator's glue and core disagree).
    Malformed {
        /// What was missing or of the wrong type.
        message: String,
    },
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Unmatched { component } => {
                write!(
                    f,
                    "component {component:?} is matched by no transformer of the Platform"
                )
            }
            Verdict::Unhandled {
                component,
                kind,
                fqn,
            } => write!(
                f,
                "component {component:?} has {kind} {fqn:?} that no matched transformer handles"
            ),
            Verdict::Duplicate {
                transformer,
                catalogs,
            } => write!(
                f,
                "transformer {transformer:?} is provided by more than one catalog: {}",
                catalogs.join(", ")
            ),
            Verdict::Incomplete {
                component,
                transformer,
                field,
            } if field.is_empty() => write!(
                f,
                "component {component:?}: the output of transformer {transformer:?} is not concrete"
            ),
            Verdict::Incomplete {
                component,
                transformer,
                field,
            } => write!(
                f,
                "component {component:?}: the output of transformer {transformer:?} is not concrete at {field}"
            ),
            Verdict::NotAnObject {
                component,
                transformer,
            } => write!(
                f,
                "component {component:?}: transformer {transformer:?} produced an output that is not a Kubernetes object"
            ),
            Verdict::Malformed { message } => write!(f, "the OPM render is malformed: {message}"),
        }
    }
}

/// Most verdicts named in one message; the rest are counted.
const MAX_NAMED: usize = 8;

/// The `RenderFailed` message for a set of verdicts: every one named up to a bound.
pub fn verdict_message(verdicts: &[Verdict]) -> String {
    let mut sorted: Vec<&Verdict> = verdicts.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut parts: Vec<String> = sorted
        .iter()
        .take(MAX_NAMED)
        .map(|v| v.to_string())
        .collect();
    if sorted.len() > MAX_NAMED {
        parts.push(format!("and {} more", sorted.len() - MAX_NAMED));
    }
    format!("OPM render failed: {}", parts.join("; "))
}

/// Reads the glue's export (the contract in `interpreter/src/cue/opm/`): any verdict fails the
/// render closed; otherwise the plain release shape of DESIGN §3 (`kind`, `metadata`,
/// `components: {<component>: {<key>: object}}`) that the rest of the reconcile consumes.
/// A transformer's output that is one object is one object (key: its FQN); a list is several
/// (keys `<fqn>/<index>`), flattened here and never inside CUE (SPEC §30). Objects keep the
/// labels core and the transformers set; the operator stamps its own later (SPEC §6).
pub fn read_export(export: Value, name: &str, namespace: &str) -> Result<Value, Vec<Verdict>> {
    let Value::Object(mut top) = export else {
        return Err(vec![malformed("the export is not a struct")]);
    };
    let mut verdicts = Vec::new();
    for c in strings(top.get("unmatched"), "unmatched", &mut verdicts) {
        verdicts.push(Verdict::Unmatched { component: c });
    }
    if let Some(list) = list(top.get("unhandled"), "unhandled", &mut verdicts) {
        for u in list {
            let field = |k: &str| u.get(k).and_then(Value::as_str).map(str::to_owned);
            match (field("component"), field("kind"), field("fqn")) {
                (Some(component), Some(kind), Some(fqn)) => verdicts.push(Verdict::Unhandled {
                    component,
                    kind,
                    fqn,
                }),
                _ => verdicts.push(malformed("an unhandled entry lacks component, kind or fqn")),
            }
        }
    }
    if let Some(list) = list(top.get("duplicates"), "duplicates", &mut verdicts) {
        for d in list {
            let transformer = d.get("transformer").and_then(Value::as_str);
            let catalogs: Option<Vec<String>> =
                d.get("catalogs").and_then(Value::as_array).map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(str::to_owned))
                        .collect()
                });
            match (transformer, catalogs) {
                (Some(t), Some(mut catalogs)) => {
                    catalogs.sort();
                    verdicts.push(Verdict::Duplicate {
                        transformer: t.to_owned(),
                        catalogs,
                    })
                }
                _ => verdicts.push(malformed(
                    "a duplicates entry lacks transformer or catalogs",
                )),
            }
        }
    }
    let mut components = Map::new();
    match top.remove("matches") {
        Some(Value::Object(matches)) => {
            for (component, by_fqn) in matches {
                let Value::Object(by_fqn) = by_fqn else {
                    verdicts.push(malformed(&format!("matches.{component} is not a struct")));
                    continue;
                };
                let mut objects = Map::new();
                for (fqn, output) in by_fqn {
                    match output {
                        Value::Object(_) => {
                            objects.insert(fqn, output);
                        }
                        Value::Array(items) => {
                            for (i, item) in items.into_iter().enumerate() {
                                if item.is_object() {
                                    objects.insert(format!("{fqn}/{i}"), item);
                                } else {
                                    verdicts.push(Verdict::NotAnObject {
                                        component: component.clone(),
                                        transformer: fqn.clone(),
                                    });
                                }
                            }
                        }
                        _ => verdicts.push(Verdict::NotAnObject {
                            component: component.clone(),
                            transformer: fqn,
                        }),
                    }
                }
                components.insert(component, Value::Object(objects));
            }
        }
        Some(_) => verdicts.push(malformed("matches is not a struct")),
        None => verdicts.push(malformed("the export has no matches")),
    }
    if !verdicts.is_empty() {
        verdicts.sort();
        verdicts.dedup();
        return Err(verdicts);
    }
    Ok(serde_json::json!({
        "kind": "ModuleRelease",
        "metadata": {"name": name, "namespace": namespace},
        "components": Value::Object(components),
    }))
}

fn malformed(message: &str) -> Verdict {
    Verdict::Malformed {
        message: message.to_owned(),
    }
}

fn list<'a>(
    v: Option<&'a Value>,
    name: &str,
    verdicts: &mut Vec<Verdict>,
) -> Option<&'a Vec<Value>> {
    match v {
        Some(Value::Array(a)) => Some(a),
        // The contract exports empty lists; tolerate an absent one as empty.
        None | Some(Value::Null) => None,
        Some(_) => {
            verdicts.push(malformed(&format!("{name} is not a list")));
            None
        }
    }
}

fn strings(v: Option<&Value>, name: &str, verdicts: &mut Vec<Verdict>) -> Vec<String> {
    let Some(items) = list(v, name, verdicts) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in items {
        match i.as_str() {
            Some(s) => out.push(s.to_owned()),
            None => verdicts.push(malformed(&format!("{name} holds a non-string"))),
        }
    }
    out
}

/// The incomplete-output verdict in `cue`'s error text, if it names one: the path
/// `matches.<component>."<fqn>".<field…>: incomplete value …` (or `non-concrete value`).
pub fn incomplete_output(stderr: &str) -> Option<Verdict> {
    stderr.lines().find_map(|line| {
        let line = line.trim_start();
        let rest = line.strip_prefix("matches.")?;
        if !(line.contains("incomplete value") || line.contains("non-concrete value")) {
            return None;
        }
        let (component, rest) = path_element(rest)?;
        let rest = rest.strip_prefix('.')?;
        let (transformer, rest) = path_element(rest)?;
        let field = rest
            .split_once(':')
            .map(|(f, _)| f)
            .unwrap_or_default()
            .trim_start_matches('.')
            .to_owned();
        Some(Verdict::Incomplete {
            component,
            transformer,
            field,
        })
    })
}

/// One element of a CUE path: an identifier, or a quoted label (`"a.b/c@v1#X"`).
fn path_element(s: &str) -> Option<(String, &str)> {
    if let Some(rest) = s.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        out.push(n);
                    }
                }
                '"' => return Some((out, &rest[i + 1..])),
                c => out.push(c),
            }
        }
        None
    } else {
        let end = s.find(['.', ':', ' ']).unwrap_or(s.len());
        (end > 0).then(|| (s[..end].to_owned(), &s[end..]))
    }
}

/// The config digest of an OPM release: the plain config digest (SPEC §7) and the Platform's
/// digest together, so a Platform change is a change of every OPM release's inputs.
pub fn config_digest(plain: &str, platform_digest: &str) -> String {
    digest::sha256(
        digest::canonical_json(&serde_json::json!({
            "config": plain,
            "platform": platform_digest,
        }))
        .as_bytes(),
    )
}

/// The component names of an OPM render's inventory: every component of the export, sorted
/// (for messages and tests).
pub fn components(plain: &Value) -> BTreeSet<String> {
    plain
        .get("components")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}
