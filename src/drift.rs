//! Drift results (SPEC §20): the `Drifted` message and how the result is classified.

use crate::input::{ApiError, DriftReport};
use crate::object::ResourceId;

/// Objects named in the `Drifted` message.
const NAMED: usize = 5;

/// "N resource(s) drifted from desired state: Kind/ns/name, …" (first five named).
pub fn message(drifted: &[ResourceId]) -> String {
    let mut names: Vec<String> = drifted
        .iter()
        .take(NAMED)
        .map(ResourceId::display)
        .collect();
    if drifted.len() > NAMED {
        names.push("…".to_string());
    }
    format!(
        "{} resource(s) drifted from desired state: {}",
        drifted.len(),
        names.join(", ")
    )
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
