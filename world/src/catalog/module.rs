//! Modules in the simulated CUE registry: small templates whose string leaves
//! `${release.name}`, `${release.namespace}`, `${values.KEY}` and `${values}` are
//! substituted, so a values edit changes the rendered objects as a real module would.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use opm_core::input::RenderError;

use opm_core::digest;

use super::{Exported, exported};

/// A CUE module version in the registry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleDef {
    /// The `components` value, with placeholders.
    pub components: Value,
    /// `#config` with its defaults; release values are unified over it key by key.
    #[serde(default)]
    pub defaults: Map<String, Value>,
    /// A closed `#config`: keys it does not define are an evaluation error.
    #[serde(default)]
    pub closed: bool,
    /// Evaluating this version always fails this way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RenderError>,
    /// An OPM module of core v2 (its `cue.mod` depends on `opmodel.dev/core@v2`, SPEC §30):
    /// its releases render through the Platform and wait with `PlatformNotReady` without a
    /// Ready one. The flavour is the module version's, as the operator decides it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub opm: bool,
}

impl ModuleDef {
    /// Like `examples/`' web module: a Deployment and a Service (component `web`), a
    /// ConfigMap (component `config`) and a ServiceAccount.
    pub fn web() -> Self {
        let components = json!({
            "web": {
                "deployment": {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "${release.name}"},
                    "spec": {"replicas": "${values.replicas}",
                        "selector": {"matchLabels": {"app": "${release.name}"}},
                        "template": {"spec": {"containers": [{"name": "web",
                            "image": "${values.image}"}]}}}},
                "service": {"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "${release.name}"},
                    "spec": {"ports": [{"port": "${values.port}"}],
                        "selector": {"app": "${release.name}"}}},
            },
            "config": {
                "configmap": {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "${release.name}-config"},
                    "data": {"message": "${values.message}"}},
                "serviceaccount": {"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "${release.name}"}},
            },
        });
        let defaults = json!({"image": "nginx:1.27", "replicas": 1, "port": 8080,
            "message": "hello"});
        Self {
            components,
            defaults: defaults.as_object().cloned().unwrap_or_default(),
            closed: true,
            error: None,
            opm: false,
        }
    }

    /// [`ModuleDef::web`] as an OPM module: the same objects, rendered through the Platform.
    pub fn opm_web() -> Self {
        Self {
            opm: true,
            ..Self::web()
        }
    }

    /// `cue export` of a release of this module.
    pub fn render(&self, name: &str, namespace: &str, values: Option<&Value>) -> Exported {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let mut config = self.defaults.clone();
        match values {
            None | Some(Value::Null) => {}
            Some(Value::Object(vals)) => {
                for (k, v) in vals {
                    match config.get(k) {
                        None if self.closed => {
                            return Err(RenderError::Evaluation {
                                message: format!("#config.{k}: field not allowed"),
                            });
                        }
                        Some(d) if !same_type(d, v) => {
                            return Err(RenderError::Evaluation {
                                message: format!("#config.{k}: conflicting values {} and {}", d, v),
                            });
                        }
                        _ => {
                            config.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            Some(other) => {
                return Err(RenderError::Evaluation {
                    message: format!("#config: conflicting values {other} and {{...}}"),
                });
            }
        }
        let config = Value::Object(config);
        let components = substitute(&self.components, name, namespace, &config);
        Ok(exported(name, namespace, components))
    }
}

fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// The template with its placeholders filled: copied whole (a map copy is one allocation
/// per node), then only the strings holding a placeholder are rewritten in place. Every
/// render of every attempt runs this; rebuilding each map entry by entry cost twice as much.
fn substitute(v: &Value, name: &str, ns: &str, config: &Value) -> Value {
    let mut out = v.clone();
    substitute_in_place(&mut out, name, ns, config);
    out
}

fn substitute_in_place(v: &mut Value, name: &str, ns: &str, config: &Value) {
    match v {
        Value::String(s) if s.contains("${") => *v = substitute_str(s, name, ns, config),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| substitute_in_place(i, name, ns, config)),
        Value::Object(m) => m
            .values_mut()
            .for_each(|i| substitute_in_place(i, name, ns, config)),
        _ => {}
    }
}

fn lookup(placeholder: &str, name: &str, ns: &str, config: &Value) -> Option<Value> {
    match placeholder {
        "release.name" => Some(Value::String(name.into())),
        "release.namespace" => Some(Value::String(ns.into())),
        "values" => Some(Value::String(digest::canonical_json(config))),
        p => p
            .strip_prefix("values.")
            .and_then(|k| config.get(k))
            .cloned(),
    }
}

pub(super) fn substitute_str(s: &str, name: &str, ns: &str, config: &Value) -> Value {
    if let Some(inner) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
        && !inner.contains("${")
        && let Some(v) = lookup(inner, name, ns, config)
    {
        return v;
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            rest = "";
            break;
        };
        match lookup(&after[..end], name, ns, config) {
            Some(Value::String(t)) => out.push_str(&t),
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(&rest[start..start + 3 + end]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Value::String(out)
}
