//! `kubectl opm tree KIND/NAME`: the release's inventory grouped by component, each object
//! with its live health as the core judges it (SPEC §26, `opm_core::health::assess`, with
//! the release's `healthCheckExprs`), and the releases it depends on.

use std::collections::BTreeMap;

use opm_core::health::{self, HealthRules};
use opm_core::{Kind, ReleaseKey, ReleaseObject, ResourceId};
use serde::Serialize;

use crate::connect::Session;
use crate::error::Result;
use crate::releases;

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Tree {
    pub release: String,
    pub ready: String,
    pub depends_on: Vec<Dependency>,
    pub components: Vec<Component>,
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
}

fn ready_words(obj: &ReleaseObject) -> String {
    let (r, reason, _) = releases::ready(&releases::status(obj));
    format!("Ready={r} {reason}")
}

/// Reads every inventory object as the user and judges its health.
pub async fn build(s: &Session, obj: &ReleaseObject) -> Result<Tree> {
    let key = obj.key();
    let status = releases::status(obj);
    // A rule that does not compile stalls the release (SPEC §26); here the built-in rules
    // still say what they can.
    let rules = health::compile(&obj.common().health_check_exprs).unwrap_or_else(|e| {
        eprintln!("warning: healthCheckExprs do not compile ({e}); using the built-in rules");
        HealthRules::default()
    });
    let resolver = opm_operator::discovery::Resolver::new(s.client.clone());
    let mut by_component: BTreeMap<String, Vec<Node>> = BTreeMap::new();
    for e in status.inventory.iter().flat_map(|i| i.entries.iter()) {
        let id = ResourceId::from_entry(e);
        let (health, message) = judge(s, &resolver, &id, &rules).await;
        let component = if e.component.is_empty() {
            "(none)".to_string()
        } else {
            e.component.clone()
        };
        by_component.entry(component).or_default().push(Node {
            id,
            health,
            message,
        });
    }
    let mut depends_on = Vec::new();
    for d in &obj.common().depends_on {
        let kind = if d.kind.is_empty() {
            key.kind
        } else {
            Kind::parse(&d.kind).unwrap_or(key.kind)
        };
        let dkey = ReleaseKey {
            kind,
            namespace: if d.namespace.is_empty() {
                key.namespace.clone()
            } else {
                d.namespace.clone()
            },
            name: d.name.clone(),
        };
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
        depends_on,
        components: by_component
            .into_iter()
            .map(|(name, objects)| Component { name, objects })
            .collect(),
    })
}

async fn judge(
    s: &Session,
    resolver: &opm_operator::discovery::Resolver,
    id: &ResourceId,
    rules: &HealthRules,
) -> (String, String) {
    let api = match opm_operator::dynamic::api_for(s.client.clone(), resolver, id).await {
        Ok(a) => a,
        Err(e) => return ("Unknown".into(), e.to_string()),
    };
    match api.get_opt(&id.name).await {
        Ok(Some(live)) => {
            let a = health::assess(&opm_operator::dynamic::to_value(&live), rules);
            (a.status.as_str().to_string(), a.message)
        }
        Ok(None) => (
            "Absent".into(),
            "in the inventory, not in the cluster".into(),
        ),
        Err(e) => (
            "Unknown".into(),
            opm_operator::api_error::from_kube(&e).to_string(),
        ),
    }
}

/// The tree as text, with box-drawing branches.
pub fn text(t: &Tree) -> String {
    let mut out = format!("{} ({})\n", t.release, t.ready);
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
            let mut line = format!(
                "{indent}{}{}: {}",
                branch(j + 1 == c.objects.len()),
                o.id.display(),
                o.health
            );
            if !o.message.is_empty() {
                line.push_str(&format!(" ({})", o.message));
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
