//! From the value `cue export` produced to objects ready to apply (SPEC §6, §18, §19):
//! flatten `components`, check each object, default namespaces, stamp the operator's
//! labels, and order the apply stages.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::constants::{FIELD_MANAGER, labels};
use crate::effect::ApplyStage;
use crate::input::GroupKind;
use crate::object::{DesiredObject, Kind, ResourceId, split_api_version};
use crate::outcome::Failure;
use crate::reason::Reason;

/// The release the objects belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseIdentity {
    /// Which CRD the release is, part of its UUID.
    pub kind: Kind,
    /// Where its namespaced objects must live.
    pub namespace: String,
    /// Stamped as the release-name label.
    pub name: String,
    /// Stamped as the uuid label that ownership and prune compare.
    pub uuid: String,
}

/// Namespace of the release UUIDs: UUIDv5 of `releases.opmodel.dev` in the DNS namespace
/// (`8ba3ccbe-e2a0-5939-9e2c-6337d226ad89`), written out because every attempt derives
/// its release's UUID from it; a test checks it against the derivation.
const UUID_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x8ba3ccbe_e2a0_5939_9e2c_6337d226ad89);

/// UUIDv5 of `<kind>/<namespace>/<name>` (SPEC §6); also `status.releaseUUID`.
pub fn release_uuid(kind: Kind, namespace: &str, name: &str) -> String {
    let id = format!("{}/{namespace}/{name}", kind.as_str());
    uuid::Uuid::new_v5(&UUID_NAMESPACE, id.as_bytes()).to_string()
}

/// Kinds that are cluster-scoped in every Kubernetes, in addition to what the interpreter
/// reports from discovery.
const BUILTIN_CLUSTER_SCOPED: [(&str, &str); 14] = [
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("storage.k8s.io", "StorageClass"),
    ("networking.k8s.io", "IngressClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
];

fn is_cluster_scoped(group: &str, kind: &str, reported: &[GroupKind]) -> bool {
    BUILTIN_CLUSTER_SCOPED.contains(&(group, kind))
        || reported
            .iter()
            .any(|gk| gk.group == group && gk.kind == kind)
}

fn render_failed(message: String) -> Failure {
    Failure::stalled(Reason::RenderFailed, message)
}

/// Turns the exported value into stamped objects, sorted by (group, kind, namespace, name).
/// Borrowing form of [`build_owned`] (it clones the value once).
pub fn build(
    value: &Value,
    cluster_scoped: &[GroupKind],
    release: &ReleaseIdentity,
) -> Result<Vec<DesiredObject>, Failure> {
    build_owned(value.clone(), cluster_scoped, release)
}

/// [`build`] consuming the exported value: each object's manifest is moved into its
/// [`DesiredObject`], never copied, so a render at the caps is held once here (SPEC §24).
pub fn build_owned(
    value: Value,
    cluster_scoped: &[GroupKind],
    release: &ReleaseIdentity,
) -> Result<Vec<DesiredObject>, Failure> {
    let Value::Object(mut top) = value else {
        return Err(render_failed("exported value is not an object".to_string()));
    };
    match top.get("kind").and_then(Value::as_str) {
        Some("ModuleRelease") => {}
        Some(other) => {
            return Err(Failure::stalled(
                Reason::UnsupportedKind,
                format!("exported kind \"{other}\" is not supported (expected ModuleRelease)"),
            ));
        }
        None => {
            return Err(Failure::stalled(
                Reason::UnsupportedKind,
                "exported value has no kind (expected ModuleRelease)",
            ));
        }
    }
    let Some(Value::Object(components)) = top.remove("components") else {
        return Err(render_failed(
            "exported value has no components object".to_string(),
        ));
    };

    let mut seen: BTreeMap<ResourceId, String> = BTreeMap::new();
    let mut out = Vec::new();
    for (component, entries) in sorted(components) {
        let Value::Object(entries) = entries else {
            return Err(render_failed(format!(
                "component \"{component}\" is not an object"
            )));
        };
        for (key, obj) in sorted(entries) {
            let where_ = format!("component \"{component}\" key \"{key}\"");
            let d = build_one(obj, &component, cluster_scoped, release)
                .map_err(|why| render_failed(format!("{where_}: {why}")))?;
            let mut identity = d.id.clone();
            identity.version.clear();
            if let Some(other) = seen.insert(identity, where_.clone()) {
                return Err(render_failed(format!(
                    "duplicate object {}: {other} and {where_}",
                    d.id.display()
                )));
            }
            out.push(d);
        }
    }
    out.sort_by(|a, b| a.id.identity().cmp(&b.id.identity()));
    Ok(out)
}

/// The objects a render holds: entries of every `components.<c>` struct.
pub(crate) fn object_count(value: &Value) -> u64 {
    value
        .get("components")
        .and_then(Value::as_object)
        .map(|cs| {
            cs.values()
                .filter_map(Value::as_object)
                .map(|objs| objs.len() as u64)
                .sum()
        })
        .unwrap_or(0)
}

/// The render caps of SPEC §24, checked before any object is built: over
/// `--max-render-objects` or `--max-render-bytes` is a stall `RenderFailed` naming the
/// count or size and the cap. `bytes` is what the interpreter measured (0: unknown).
pub fn check_caps(
    value: &Value,
    bytes: u64,
    max_objects: u64,
    max_bytes: u64,
) -> Result<(), Failure> {
    let n = object_count(value);
    if n > max_objects {
        return Err(render_failed(format!(
            "rendered {n} objects; the cap is {max_objects} (--max-render-objects)"
        )));
    }
    if bytes > max_bytes {
        return Err(render_failed(format!(
            "rendered {bytes} bytes of JSON ({}); the cap is {max_bytes} ({}, --max-render-bytes)",
            human_bytes(bytes),
            human_bytes(max_bytes)
        )));
    }
    Ok(())
}

/// The message of a render whose output passed the byte cap while it was read.
pub(crate) fn too_large_message(err: &crate::input::RenderError) -> String {
    match err {
        crate::input::RenderError::TooLarge {
            bytes_at_least,
            cap,
        } => format!(
            "rendered more than {bytes_at_least} bytes of JSON; the cap is {cap} ({}, --max-render-bytes)",
            human_bytes(*cap)
        ),
        other => other.to_string(),
    }
}

/// `1.5 MiB`-style text for messages (binary units, one decimal).
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

fn sorted(map: Map<String, Value>) -> Vec<(String, Value)> {
    let mut v: Vec<_> = map.into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn non_empty_str<'a>(
    obj: &'a Map<String, Value>,
    field: &str,
    path: &str,
) -> Result<&'a str, String> {
    match obj.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) | Some(Value::Null) | None => Err(format!("missing {path}")),
        Some(_) => Err(format!("{path} is not a string")),
    }
}

fn build_one(
    obj: Value,
    component: &str,
    cluster_scoped: &[GroupKind],
    release: &ReleaseIdentity,
) -> Result<DesiredObject, String> {
    let Value::Object(mut manifest) = obj else {
        return Err("object is not a JSON object".to_string());
    };
    let api_version = non_empty_str(&manifest, "apiVersion", "apiVersion")?.to_string();
    let kind = non_empty_str(&manifest, "kind", "kind")?.to_string();
    let (group, version) = split_api_version(&api_version);
    let meta = match manifest.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err("metadata is not an object".to_string()),
        None => return Err("missing metadata.name".to_string()),
    };
    let name = non_empty_str(meta, "name", "metadata.name")?.to_string();
    let namespace = if is_cluster_scoped(&group, &kind, cluster_scoped) {
        meta.remove("namespace");
        String::new()
    } else {
        let ns = match meta.get("namespace") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => release.namespace.clone(),
            Some(_) => return Err("metadata.namespace is not a string".to_string()),
        };
        meta.insert("namespace".to_string(), Value::String(ns.clone()));
        ns
    };
    let labels_value = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if labels_value.is_null() {
        *labels_value = Value::Object(Map::new());
    }
    let labels_map = labels_value
        .as_object_mut()
        .ok_or_else(|| "metadata.labels is not an object".to_string())?;
    let wanted = [
        (labels::MANAGED_BY, FIELD_MANAGER),
        (labels::RELEASE_NAME, release.name.as_str()),
        (labels::RELEASE_NAMESPACE, release.namespace.as_str()),
        (labels::RELEASE_UUID, release.uuid.as_str()),
        (labels::COMPONENT, component),
    ];
    for (k, v) in wanted {
        match labels_map.get(k) {
            Some(Value::String(s)) if s == v => {}
            Some(existing) => {
                return Err(format!(
                    "label \"{k}\" is {existing}, but the operator sets \"{v}\""
                ));
            }
            None => {
                labels_map.insert(k.to_string(), Value::String(v.to_string()));
            }
        }
    }
    Ok(DesiredObject {
        id: ResourceId {
            group,
            kind,
            namespace,
            name,
            version,
        },
        component: component.to_string(),
        manifest: Value::Object(manifest),
        policy: Default::default(),
    })
}

/// (stage, rank within the stage) of SPEC §19.
pub(crate) fn apply_rank(group: &str, kind: &str) -> (u8, u8) {
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition")
        | ("", "Namespace")
        | ("rbac.authorization.k8s.io", "ClusterRole") => (1, 0),
        (_, k) if k.ends_with("Class") => (2, 0),
        ("", "ServiceAccount") => (3, 0),
        ("rbac.authorization.k8s.io", _) => (3, 1),
        ("", "ConfigMap") | ("", "Secret") => (3, 2),
        ("", "Service") => (3, 3),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet")
        | ("batch", "Job" | "CronJob")
        | ("", "Pod" | "ReplicationController") => (3, 5),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
            | "MutatingAdmissionPolicy"
            | "MutatingAdmissionPolicyBinding",
        ) => (3, 6),
        _ => (3, 4),
    }
}

/// Sort key of the apply order: stage, rank, then identity.
pub fn apply_order_key(id: &ResourceId) -> ((u8, u8), (&str, &str, &str, &str)) {
    (apply_rank(&id.group, &id.kind), id.identity())
}

/// The apply stages, in order, empty stages left out.
pub fn stages(objects: &[DesiredObject]) -> Vec<ApplyStage> {
    let mut sorted: Vec<&DesiredObject> = objects.iter().collect();
    sorted.sort_by(|a, b| apply_order_key(&a.id).cmp(&apply_order_key(&b.id)));
    let mut out: Vec<ApplyStage> = Vec::new();
    for o in sorted {
        let stage = apply_rank(&o.id.group, &o.id.kind).0;
        match out.last_mut() {
            Some(s) if s.stage == stage => s.objects.push(o.clone()),
            _ => out.push(ApplyStage {
                stage,
                objects: vec![o.clone()],
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests;
