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
use serde_json::Value;

use crate::digest;

mod export;
pub mod platform;

pub use export::{incomplete_output, read_export};
#[cfg(test)]
mod tests;

/// The module path of OPM's core schema, line v2: a module depending on it is an OPM module.
pub(crate) const CORE_V2: &str = "opmodel.dev/core@v2";
/// The retired core line of the seed's kernel era: refused with a clear stall.
pub const CORE_V0: &str = "opmodel.dev/core@v0";
/// The seed's release packages embedded `#ModuleRelease` from this core v0 package path.
pub(crate) const CORE_V0_RELEASE: &str = "opmodel.dev/core/v1alpha1";
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
