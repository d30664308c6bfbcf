//! `releases.opmodel.dev/force: enabled` (SPEC §28): when an apply refused because of an
//! immutable field may delete and recreate the object.
//!
//! Deleting is the one write here that loses what the object held, so the decision reads
//! only what the API server typed, never its prose: a 422 whose `details.causes` each say
//! that a field is immutable, with the detail the API server's validation code writes
//! (the value it quotes sits before the detail, so a tenant's value never reads as one).
//! A refusal with any other cause is not recreated: the create that follows the delete
//! would be refused too, and the object would be gone. A message that merely contains
//! "immutable" (a webhook's denial, a quoted value) is never enough.
//!
//! Some kinds are never recreated, whatever the annotation says: deleting a Namespace
//! deletes everything in it, a CustomResourceDefinition every resource of its kind in the
//! cluster, a PersistentVolume or PersistentVolumeClaim the data it holds. For those an
//! immutable-field refusal is the usual `ApplyFailed`.

use serde::{Deserialize, Serialize};

use crate::object::ResourceId;

/// One entry of a refusal's `details.causes` (the API server's `StatusCause`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueForbidden`, … (`reason`, a machine-readable type).
    pub reason: String,
    /// The field path (`spec.selector`).
    pub field: String,
    /// The cause's message (`Invalid value: "x": field is immutable`).
    pub message: String,
}

/// An apply the API server refused, as typed as it answered.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Refusal {
    /// The HTTP status code.
    pub code: u16,
    /// `details.causes`.
    pub causes: Vec<Cause>,
}

/// The details the API server's validation writes for a field that may not change, by
/// cause type. `field is immutable` is apimachinery's `FieldImmutableErrorMsg` (what
/// `ValidateImmutableField` reports: Job templates, selectors, Service types, Secret and
/// ConfigMap `immutable`); the others are the kinds that word it their own way.
const IMMUTABLE_DETAILS: [(&str, &str); 4] = [
    ("FieldValueInvalid", "field is immutable"),
    ("FieldValueForbidden", "field is immutable"),
    (
        "FieldValueForbidden",
        "field is immutable when `immutable` is set",
    ),
    ("FieldValueInvalid", "cannot change roleRef"),
];

/// The StatefulSet wording of an immutable spec field (`FieldValueForbidden`).
const STATEFULSET_SPEC: (&str, &str) = (
    "updates to statefulset spec for fields other than",
    "are forbidden",
);

/// Kinds never deleted to be recreated (see the module docs).
pub fn never_recreated(id: &ResourceId) -> bool {
    matches!(
        (id.group.as_str(), id.kind.as_str()),
        ("", "Namespace")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("", "PersistentVolume")
            | ("", "PersistentVolumeClaim")
    )
}

/// Whether one cause says an immutable field would change.
fn immutable_cause(c: &Cause) -> bool {
    // The API server's cause message is `<type>: <detail>` (Forbidden) or
    // `<type>: <quoted value>: <detail>` (Invalid); the detail always ends it.
    let m = c.message.trim_end();
    let known = IMMUTABLE_DETAILS
        .iter()
        .any(|(reason, detail)| c.reason == *reason && ends_with_detail(m, detail));
    let statefulset = c.reason == "FieldValueForbidden"
        && m.strip_prefix("Forbidden: ")
            .is_some_and(|d| d.starts_with(STATEFULSET_SPEC.0) && d.ends_with(STATEFULSET_SPEC.1));
    known || statefulset
}

/// `message` is `…: detail` (or the detail alone).
fn ends_with_detail(message: &str, detail: &str) -> bool {
    message == detail
        || message
            .strip_suffix(detail)
            .is_some_and(|head| head.ends_with(": "))
}

/// Whether `refusal` is the API server saying an immutable field would change: a 422 with
/// at least one cause, every cause an immutable field.
pub fn immutable(refusal: &Refusal) -> bool {
    refusal.code == 422 && !refusal.causes.is_empty() && refusal.causes.iter().all(immutable_cause)
}

/// Whether the apply of `id`, refused with `refusal`, deletes and recreates the object:
/// only with `force: enabled`, only on a typed immutability refusal, never for the kinds
/// of [`never_recreated`].
pub fn recreate(id: &ResourceId, force: bool, refusal: &Refusal) -> bool {
    force && !never_recreated(id) && immutable(refusal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(group: &str, kind: &str) -> ResourceId {
        ResourceId {
            group: group.into(),
            kind: kind.into(),
            namespace: "demo".into(),
            name: "x".into(),
            version: "v1".into(),
        }
    }

    fn cause(reason: &str, field: &str, message: &str) -> Cause {
        Cause {
            reason: reason.into(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn refusal(causes: Vec<Cause>) -> Refusal {
        Refusal { code: 422, causes }
    }

    /// What kube-apiserver answers for a changed Job template and selector, a ConfigMap
    /// marked immutable, a RoleBinding's roleRef and a StatefulSet's volumeClaimTemplates.
    #[test]
    fn the_api_servers_immutability_causes_are_recognised() {
        let typed = [
            cause(
                "FieldValueInvalid",
                "spec.template",
                "Invalid value: core.PodTemplateSpec{...}: field is immutable",
            ),
            cause(
                "FieldValueInvalid",
                "spec.selector",
                "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"b\"}}: field is immutable",
            ),
            cause(
                "FieldValueForbidden",
                "data",
                "Forbidden: field is immutable when `immutable` is set",
            ),
            cause(
                "FieldValueInvalid",
                "roleRef",
                "Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"b\"}: cannot change roleRef",
            ),
            cause(
                "FieldValueForbidden",
                "spec",
                "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ),
        ];
        for c in typed {
            assert!(immutable(&refusal(vec![c.clone()])), "{c:?}");
            assert!(recreate(
                &id("batch", "Job"),
                true,
                &refusal(vec![c.clone()])
            ));
            assert!(!recreate(&id("batch", "Job"), false, &refusal(vec![c])));
        }
    }

    /// The word "immutable" anywhere else is not the API server's cause: in the top-level
    /// message only (no causes), in a quoted value, in a webhook's denial, with another
    /// cause beside it (the create after the delete would be refused), or on another code.
    #[test]
    fn a_message_that_merely_says_immutable_is_not_enough() {
        let not = [
            refusal(Vec::new()),
            refusal(vec![cause(
                "FieldValueInvalid",
                "data.k",
                "Invalid value: \"field is immutable\": must be no more than 63 characters",
            )]),
            refusal(vec![cause(
                "FieldValueInvalid",
                "metadata.labels",
                "Invalid value: \"x: field is immutable\": a valid label must be an empty string or consist of alphanumeric characters",
            )]),
            refusal(vec![cause(
                "",
                "",
                "admission webhook \"deny.example.com\" denied the request: this field is immutable",
            )]),
            refusal(vec![
                cause(
                    "FieldValueInvalid",
                    "spec.selector",
                    "Invalid value: x: field is immutable",
                ),
                cause(
                    "FieldValueRequired",
                    "spec.template.spec.containers",
                    "Required value",
                ),
            ]),
            Refusal {
                code: 409,
                causes: vec![cause(
                    "FieldValueInvalid",
                    "spec.selector",
                    "Invalid value: x: field is immutable",
                )],
            },
        ];
        for r in not {
            assert!(!immutable(&r), "{r:?}");
            assert!(!recreate(&id("batch", "Job"), true, &r), "{r:?}");
        }
    }

    /// Namespaces, CRDs, PVs and PVCs are never deleted to be recreated (SPEC §28).
    #[test]
    fn kinds_that_hold_more_than_themselves_are_never_recreated() {
        let r = refusal(vec![cause(
            "FieldValueInvalid",
            "spec",
            "Invalid value: x: field is immutable",
        )]);
        for (g, k) in [
            ("", "Namespace"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
            ("", "PersistentVolume"),
            ("", "PersistentVolumeClaim"),
        ] {
            assert!(never_recreated(&id(g, k)));
            assert!(!recreate(&id(g, k), true, &r), "{k}");
        }
        // The same kind name in another group is another kind.
        assert!(!never_recreated(&id("example.com", "Namespace")));
    }
}
