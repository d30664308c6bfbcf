//! Reading releases of either kind as the user, and what the views need from them.

use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ListParams};
use opm_core::api::{Condition, ModuleRelease, Release, ReleaseStatus};
use opm_core::constants::conditions as ct;
use opm_core::{Kind, ReleaseKey, ReleaseObject};

use crate::error::{CliError, Result};

/// Reads one release; a missing one is an error naming it.
pub async fn read(client: &Client, key: &ReleaseKey) -> Result<ReleaseObject> {
    opm_operator::kube::releases::read(client.clone(), key)
        .await
        .map_err(|e| {
            CliError::api(
                format!("reading {} {}", key.kind.as_str(), key.display()),
                &e,
            )
        })?
        .ok_or_else(|| {
            CliError::Usage(format!("{} {} not found", key.kind.as_str(), key.display()))
        })
}

/// Lists releases of `kind` in `namespace` (every namespace when `None`), sorted by
/// namespace and name.
pub async fn list(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
) -> Result<Vec<ReleaseObject>> {
    let what = || match namespace {
        Some(ns) => format!("listing {}s in namespace {ns}", kind.as_str()),
        None => format!("listing {}s", kind.as_str()),
    };
    let lp = ListParams::default();
    let mut out: Vec<ReleaseObject> = match kind {
        Kind::ModuleRelease => {
            let api: Api<ModuleRelease> = match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            api.list(&lp)
                .await
                .map_err(|e| CliError::api(what(), &e))?
                .items
                .into_iter()
                .map(ReleaseObject::ModuleRelease)
                .collect()
        }
        Kind::Release => {
            let api: Api<Release> = match namespace {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            };
            api.list(&lp)
                .await
                .map_err(|e| CliError::api(what(), &e))?
                .items
                .into_iter()
                .map(ReleaseObject::Release)
                .collect()
        }
    };
    out.sort_by_key(|r| r.key());
    Ok(out)
}

/// The status, or an empty one for a release the operator has not seen yet.
pub fn status(obj: &ReleaseObject) -> ReleaseStatus {
    obj.status().cloned().unwrap_or_default()
}

/// A condition of the status by type.
pub fn condition<'a>(s: &'a ReleaseStatus, type_: &str) -> Option<&'a Condition> {
    s.conditions.iter().find(|c| c.type_ == type_)
}

/// `Ready` as (status, reason, message); `-` when the operator has not set it yet.
pub fn ready(s: &ReleaseStatus) -> (String, String, String) {
    match condition(s, ct::READY) {
        Some(c) => (c.status.clone(), c.reason.clone(), c.message.clone()),
        None => ("-".into(), "-".into(), String::new()),
    }
}

/// Module version (ModuleRelease) or artifact revision (Release).
pub fn revision(obj: &ReleaseObject) -> String {
    let r = match obj {
        ReleaseObject::ModuleRelease(m) => m.spec.module.version.clone(),
        ReleaseObject::Release(r) => r
            .status
            .as_ref()
            .and_then(|s| s.source.as_ref())
            .map(|s| s.artifact_revision.clone())
            .unwrap_or_default(),
    };
    if r.is_empty() { "-".into() } else { r }
}

/// Where the configuration comes from: `path@version`, or the Flux source.
pub fn source(obj: &ReleaseObject) -> String {
    match obj {
        ReleaseObject::ModuleRelease(m) => {
            format!("{} {}", m.spec.module.path, m.spec.module.version)
        }
        ReleaseObject::Release(r) => {
            let s = &r.spec.source_ref;
            let ns = if s.namespace.is_empty() {
                r.metadata.namespace.clone().unwrap_or_default()
            } else {
                s.namespace.clone()
            };
            format!("{}/{}/{} path {}", s.kind, ns, s.name, r.spec.path)
        }
    }
}

/// The creation time.
pub fn created(obj: &ReleaseObject) -> Option<Timestamp> {
    obj.meta().creation_timestamp.as_ref().map(|t| t.0)
}

/// The object as printed by `-o yaml|json`: everything but `managedFields` (as kubectl
/// without `--show-managed-fields`).
pub fn printable(obj: &ReleaseObject) -> serde_json::Value {
    let mut v = match obj {
        ReleaseObject::ModuleRelease(m) => serde_json::to_value(m),
        ReleaseObject::Release(r) => serde_json::to_value(r),
    }
    .unwrap_or_default();
    if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    v
}

/// `ModuleRelease demo/web`.
pub fn describe(key: &ReleaseKey) -> String {
    format!("{} {}", key.kind.as_str(), key.display())
}
