//! Drift results (SPEC §20): the `Drifted` message and how the result is classified.

use crate::fields::FieldDrift;
use crate::input::{ApiError, DriftReport, ObjectDrift};
use crate::object::{DesiredObject, ResourceId};
use crate::policy::SsaPolicy;

/// Objects named in the `Drifted` message.
const NAMED: usize = 5;

/// "N resource(s) drifted from desired state: Kind/ns/name, …" (first five named).
pub fn message(drifted: &[ResourceId]) -> String {
    summary(drifted, ResourceId::display)
}

/// "N resource(s) drifted from desired state: a, b, …", naming the first few.
fn summary<T>(drifted: &[T], describe: impl Fn(&T) -> String) -> String {
    let mut names: Vec<String> = drifted.iter().take(NAMED).map(describe).collect();
    if drifted.len() > NAMED {
        names.push("…".to_string());
    }
    format!(
        "{} resource(s) drifted from desired state: {}",
        drifted.len(),
        names.join(", ")
    )
}

/// Fields named per object in the message.
const FIELDS_NAMED: usize = 3;

/// The objects that count as drifted under their policies (SPEC §20, §28), with what
/// drifted: `ssa: Ignore` objects never drift (they are not checked at all);
/// `IfNotPresent` ones only when missing; `Merge` ones only on fields no other manager
/// owns (those are left to their owners). Ignored paths were left out by the comparison.
pub fn assess(report: &DriftReport, desired: &[DesiredObject]) -> Vec<ObjectDrift> {
    let mut out = Vec::new();
    for id in &report.drifted {
        let detail = report
            .details
            .iter()
            .find(|d| &d.id == id)
            .cloned()
            .unwrap_or_else(|| ObjectDrift {
                id: id.clone(),
                ..Default::default()
            });
        let ssa = desired
            .iter()
            .find(|d| &d.id == id)
            .map(|d| d.policy.ssa)
            .unwrap_or_default();
        let counts = match ssa {
            SsaPolicy::Ignore => false,
            SsaPolicy::IfNotPresent => detail.missing,
            SsaPolicy::Merge => {
                detail.missing
                    || detail.fields.is_empty()
                    || detail.fields.iter().any(|f| f.manager.is_empty())
            }
            SsaPolicy::Override => true,
        };
        if !counts {
            continue;
        }
        let mut detail = detail;
        if ssa == SsaPolicy::Merge {
            detail.fields.retain(|f| f.manager.is_empty());
        }
        out.push(detail);
    }
    out
}

/// "N resource(s) drifted from desired state: Kind/ns/name (/path by manager, …), …":
/// first five objects, first three fields of each, and who changed them.
pub fn detailed_message(drifted: &[ObjectDrift]) -> String {
    summary(drifted, describe)
}

fn describe(d: &ObjectDrift) -> String {
    let name = d.id.display();
    if d.missing {
        return format!("{name} (missing)");
    }
    if d.fields.is_empty() {
        return name;
    }
    let mut parts: Vec<String> = d.fields.iter().take(FIELDS_NAMED).map(field).collect();
    if d.fields.len() > FIELDS_NAMED {
        parts.push("…".to_string());
    }
    format!("{name} ({})", parts.join(", "))
}

fn field(f: &FieldDrift) -> String {
    if f.manager.is_empty() {
        f.path.clone()
    } else {
        format!("{} changed by {}", f.path, f.manager)
    }
}

/// The first Forbidden error of the check, if any.
pub fn forbidden(report: &DriftReport) -> Option<(&ResourceId, &ApiError)> {
    report.errors.iter().find_map(|e| match &e.result {
        Err(err @ ApiError::Forbidden { .. }) => Some((&e.id, err)),
        _ => None,
    })
}

/// Whether the check ran cleanly (no per-object errors).
pub fn clean(report: &DriftReport) -> bool {
    report.errors.iter().all(|e| e.result.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> ResourceId {
        ResourceId {
            kind: "ConfigMap".into(),
            namespace: "demo".into(),
            name: format!("c{n}"),
            version: "v1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_first_five() {
        assert_eq!(
            message(&[id(1)]),
            "1 resource(s) drifted from desired state: ConfigMap/demo/c1"
        );
        let many: Vec<_> = (1..=7).map(id).collect();
        assert_eq!(
            message(&many),
            "7 resource(s) drifted from desired state: ConfigMap/demo/c1, ConfigMap/demo/c2, ConfigMap/demo/c3, ConfigMap/demo/c4, ConfigMap/demo/c5, …"
        );
    }
}
