//! Reading what the OPM glue exported (SPEC §30): the objects of a render, or the verdicts
//! that fail it closed; and the incomplete output `cue`'s error text names.

use serde_json::{Map, Value};

use super::Verdict;

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
    unhandled(&top, &mut verdicts);
    duplicates(&top, &mut verdicts);
    let components = matches(top.remove("matches"), &mut verdicts);
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

/// `unhandled`: components whose kind no transformer handles.
fn unhandled(top: &Map<String, Value>, verdicts: &mut Vec<Verdict>) {
    if let Some(list) = list(top.get("unhandled"), "unhandled", verdicts) {
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
}

/// `duplicates`: transformers that more than one catalog provides.
fn duplicates(top: &Map<String, Value>, verdicts: &mut Vec<Verdict>) {
    if let Some(list) = list(top.get("duplicates"), "duplicates", verdicts) {
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
}

/// `matches`: each component's objects by transformer, a list flattened to `<fqn>/<index>`.
fn matches(matches: Option<Value>, verdicts: &mut Vec<Verdict>) -> Map<String, Value> {
    let mut components = Map::new();
    match matches {
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
    components
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
