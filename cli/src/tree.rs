//! `kubectl opm tree KIND/NAME`: the release's inventory grouped by component, each object
//! with its live health as the core judges it (SPEC §26, `opm_core::health::assess`, with
//! the release's `healthCheckExprs`), and the releases it depends on.

use std::collections::BTreeMap;

use opm_core::health::{self, HealthRules};
use opm_core::{ReleaseObject, ResourceId};
use serde::Serialize;

use crate::connect::Session;
use crate::error::Result;
use crate::releases;

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Tree {
    pub release: String,
    pub ready: String,
    /// The `Drifted=True` condition's message, when the operator found drift.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drifted: Option<String>,
    pub depends_on: Vec<Dependency>,
    /// While it is being deleted: the releases that depend on it, whose going its deletion
    /// waits for (ordered teardown), as the operator judges them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<Dependent>,
    pub components: Vec<Component>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Dependent {
    pub release: String,
    /// It is being deleted itself.
    pub deleting: bool,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    pub release: String,
    pub ready: String,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Component {
    pub name: String,
    pub objects: Vec<Node>,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    #[serde(flatten)]
    pub id: ResourceId,
    /// `Current`, `InProgress`, `Failed`, `Unknown`, or `Absent` (in the inventory, not in
    /// the cluster).
    pub health: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Named by the operator's last drift check.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub drifted: bool,
    /// The hook phase (SPEC §32: `pre-apply`, `post-apply`, `pre-delete`) its live
    /// `releases.opmodel.dev/hook` annotation names; empty for an ordinary object.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hook: String,
}

/// Whether the `Drifted` message (`opm_core::drift::detailed_message`: "N resource(s)
/// drifted from desired state: Kind/ns/name (…), …") names this object.
fn named_in(message: &str, id: &ResourceId) -> bool {
    let Some((_, names)) = message.split_once(": ") else {
        return false;
    };
    let display = id.display();
    names.match_indices(&display).any(|(i, _)| {
        let before = &names[..i];
        let after = &names[i + display.len()..];
        (before.is_empty() || before.ends_with(", "))
            && (after.is_empty() || after.starts_with(" (") || after.starts_with(", "))
    })
}

fn ready_words(obj: &ReleaseObject) -> String {
    let (r, reason, _) = releases::ready(&releases::status(obj));
    format!("Ready={r} {reason}")
}

/// Reads every inventory object as the user and judges its health.
pub async fn build(s: &Session, obj: &ReleaseObject) -> Result<Tree> {
    let key = obj.key();
    let status = releases::status(obj);
    // A rule that does not compile stalls the release; here the built-in rules
    // still say what they can.
    let rules = health::compile(&obj.common().health_check_exprs).unwrap_or_else(|e| {
        let e = crate::output::for_terminal(&e.to_string());
        eprintln!("warning: healthCheckExprs do not compile ({e}); using the built-in rules");
        HealthRules::default()
    });
    let resolver = opm_operator::kube::discovery::Resolver::new(s.client.clone());
    let drifted_message = releases::condition(&status, opm_core::constants::conditions::DRIFTED)
        .filter(|c| c.status == "True")
        .map(|c| c.message.clone());
    let mut by_component: BTreeMap<String, Vec<Node>> = BTreeMap::new();
    for e in status.inventory.iter().flat_map(|i| i.entries.iter()) {
        let id = ResourceId::from_entry(e);
        let (health, message, hook) = judge(s, &resolver, &id, &rules).await;
        let drifted = drifted_message.as_deref().is_some_and(|m| named_in(m, &id));
        let component = if e.component.is_empty() {
            "(none)".to_string()
        } else {
            e.component.clone()
        };
        by_component.entry(component).or_default().push(Node {
            id,
            health,
            message,
            drifted,
            hook,
        });
    }
    let mut depends_on = Vec::new();
    for d in &obj.common().depends_on {
        if !opm_core::deps::is_release_ref(d) {
            depends_on.push(Dependency {
                release: format!("{} {} {}", d.api_version, d.kind, d.name),
                ready: if d.ready_expr.is_empty() {
                    "ready when Current".to_string()
                } else {
                    format!("ready when {}", d.ready_expr)
                },
            });
            continue;
        }
        let dkey = opm_core::deps::key_of(&key, d);
        let ready = match releases::read(&s.client, &dkey).await {
            Ok(o) => ready_words(&o),
            Err(e) => format!("unreadable: {e}"),
        };
        depends_on.push(Dependency {
            release: releases::describe(&dkey),
            ready,
        });
    }
    Ok(Tree {
        release: releases::describe(&key),
        ready: ready_words(obj),
        drifted: drifted_message,
        depends_on,
        waiting_for: waiting_for(s, obj).await?,
        components: by_component
            .into_iter()
            .map(|(name, objects)| Component { name, objects })
            .collect(),
    })
}

/// A deleting release's dependents that hold its deletion back (`opm_core::teardown`),
/// listed as the user; none when it is not being deleted.
async fn waiting_for(s: &Session, obj: &ReleaseObject) -> Result<Vec<Dependent>> {
    if obj.meta().deletion_timestamp.is_none() {
        return Ok(Vec::new());
    }
    let key = obj.key();
    let report = opm_operator::steps::deps::dependents(s.client.clone())
        .await
        .map_err(|error| crate::error::CliError::Api {
            what: "listing the releases that depend on it".into(),
            error,
        })?;
    let own = opm_core::deps::release_keys(&key, &obj.common().depends_on);
    // The operator's --allow-cross-namespace-refs is not known here: dependents in other
    // namespaces are listed too (without the flag the operator does not wait for them).
    Ok(opm_core::teardown::blockers(&key, &own, &report, true)
        .into_iter()
        .map(|b| Dependent {
            release: releases::describe(&b.key),
            deleting: b.deleting,
        })
        .collect())
}

async fn judge(
    s: &Session,
    resolver: &opm_operator::kube::discovery::Resolver,
    id: &ResourceId,
    rules: &HealthRules,
) -> (String, String, String) {
    let api = match opm_operator::kube::dynamic::api_for(s.client.clone(), resolver, id).await {
        Ok(a) => a,
        Err(e) => return ("Unknown".into(), e.to_string(), String::new()),
    };
    match api.get_opt(&id.name).await {
        Ok(Some(live)) => {
            let v = opm_operator::kube::dynamic::to_value(&live);
            let a = health::assess(&v, rules);
            let hook = hook_phase(&v);
            (a.status.as_str().to_string(), a.message, hook)
        }
        Ok(None) => (
            "Absent".into(),
            "in the inventory, not in the cluster".into(),
            String::new(),
        ),
        Err(e) => (
            "Unknown".into(),
            opm_operator::kube::api_error::from_kube(&e).to_string(),
            String::new(),
        ),
    }
}

/// The hook phase of a live object, only when it is one the operator knows (a tenant's
/// other values never reach the terminal).
pub fn hook_phase(v: &serde_json::Value) -> String {
    opm_core::hooks::phase_of(v)
        .map(|p| p.as_str().to_string())
        .unwrap_or_default()
}

/// The tree as text, with box-drawing branches.
pub fn text(t: &Tree) -> String {
    let mut out = format!("{} ({})\n", t.release, t.ready);
    if let Some(d) = &t.drifted {
        out.push_str(&format!("Drifted: {d}\n"));
    }
    for w in &t.waiting_for {
        let going = if w.deleting { " (deleting)" } else { "" };
        out.push_str(&format!(
            "Deletion waits for dependent {}{going}\n",
            w.release
        ));
    }
    let n = t.depends_on.len() + t.components.len();
    let mut i = 0;
    let branch = |last: bool| if last { "└── " } else { "├── " };
    for d in &t.depends_on {
        i += 1;
        out.push_str(&format!(
            "{}dependsOn {} ({})\n",
            branch(i == n),
            d.release,
            d.ready
        ));
    }
    for c in &t.components {
        i += 1;
        let last = i == n;
        out.push_str(&format!("{}{}\n", branch(last), c.name));
        let indent = if last { "    " } else { "│   " };
        for (j, o) in c.objects.iter().enumerate() {
            let hook = if o.hook.is_empty() {
                String::new()
            } else {
                format!(" [{} hook]", o.hook)
            };
            let mut line = format!(
                "{indent}{}{}{hook}: {}",
                branch(j + 1 == c.objects.len()),
                o.id.display(),
                o.health
            );
            if !o.message.is_empty() {
                line.push_str(&format!(" ({})", o.message));
            }
            if o.drifted {
                line.push_str(", drifted");
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    if t.components.is_empty() {
        out.push_str("(no inventory: nothing applied yet)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, name: &str) -> ResourceId {
        ResourceId {
            kind: kind.into(),
            namespace: "demo".into(),
            name: name.into(),
            version: "v1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn objects_named_by_the_drift_message() {
        let ids = [
            id("Service", "web"),
            id("ConfigMap", "web"),
            id("ConfigMap", "web-config"),
        ];
        let drifted: Vec<ResourceId> = ids[1..].to_vec();
        let details: Vec<opm_core::input::ObjectDrift> = drifted
            .iter()
            .map(|i| opm_core::input::ObjectDrift {
                id: i.clone(),
                missing: true,
                fields: vec![],
            })
            .collect();
        for m in [
            opm_core::drift::message(&drifted),
            opm_core::drift::detailed_message(&details),
        ] {
            assert!(!named_in(&m, &ids[0]), "{m}");
            assert!(named_in(&m, &ids[1]) && named_in(&m, &ids[2]), "{m}");
        }
        assert!(
            !named_in(&opm_core::drift::message(&ids[2..]), &ids[1]),
            "a prefix is not a name"
        );
    }
}

#[cfg(test)]
mod hook_tests {
    use super::*;

    #[test]
    fn the_tree_shows_the_hook_phase_of_a_hook_and_nothing_for_others() {
        let job = serde_json::json!({"metadata": {"annotations": {"releases.opmodel.dev/hook": "pre-apply"}}});
        let odd = serde_json::json!({"metadata": {"annotations": {"releases.opmodel.dev/hook": "\u{1b}[31mx"}}});
        assert_eq!(hook_phase(&job), "pre-apply");
        assert_eq!(hook_phase(&odd), "");
        let node = |name: &str, hook: &str| Node {
            id: ResourceId {
                group: "batch".into(),
                kind: "Job".into(),
                namespace: "demo".into(),
                name: name.into(),
                version: "v1".into(),
            },
            health: "Current".into(),
            message: String::new(),
            drifted: false,
            hook: hook.into(),
        };
        let t = Tree {
            release: "ModuleRelease demo/web".into(),
            ready: "Ready=True ReconciliationSucceeded".into(),
            drifted: None,
            waiting_for: vec![],
            depends_on: vec![],
            components: vec![Component {
                name: "db".into(),
                objects: vec![node("migrate", "pre-apply"), node("worker", "")],
            }],
        };
        let out = text(&t);
        assert!(
            out.contains("Job/demo/migrate [pre-apply hook]: Current\n"),
            "{out}"
        );
        assert!(out.contains("Job/demo/worker: Current\n"), "{out}");
    }
}
