//! What would start an attempt earlier: SPEC §5's watch events, §1.4's annotation, and
//! what ends the wait the Ready reason names.

use opm_core::constants::conditions as ct;
use opm_core::reason::Reason;
use opm_core::{Kind, ReleaseKey, ReleaseObject};

use super::{Seen, is_true};
use crate::target;

/// What would start an attempt earlier.
pub(super) fn triggers(seen: &Seen<'_>, state: &str) -> Vec<String> {
    let Seen {
        obj,
        status,
        reason,
        stalled,
        ..
    } = *seen;
    let key = obj.key();
    let mut triggers = Vec::new();
    if state != "Ready" || stalled {
        triggers.push("a change of its spec (a new generation)".to_string());
    }
    input_triggers(obj, &key, reason, &mut triggers);
    reason_triggers(obj, &key, reason, &mut triggers);
    if reason == Reason::HealthCheckFailed
        || reason == Reason::Progressing
        || is_true(status, ct::HEALTHY)
    {
        triggers.push("a health change of one of its objects".into());
    }
    if !obj.common().suspend {
        triggers.push(format!(
            "`kubectl opm reconcile {}/{}` (the {} annotation)",
            target::short(key.kind),
            key.name,
            opm_core::constants::REQUESTED_AT_ANNOTATION
        ));
    }
    if key.kind == Kind::ModuleRelease && reason == Reason::ResolutionFailed {
        triggers.push("nothing in the registry: publishing the module version does not re-trigger; change the spec or request a reconcile".into());
    }
    triggers
}

/// Changes of what the release reads: its source or `valuesFrom`, its ServiceAccount, its
/// kubeconfig Secret.
fn input_triggers(obj: &ReleaseObject, key: &ReleaseKey, reason: &str, out: &mut Vec<String>) {
    match obj {
        ReleaseObject::Release(r) => {
            let s = &r.spec.source_ref;
            let ns = if s.namespace.is_empty() {
                key.namespace.clone()
            } else {
                s.namespace.clone()
            };
            out.push(format!(
                "a new artifact (revision or digest) of its source {} {ns}/{}",
                s.kind, s.name
            ));
        }
        ReleaseObject::ModuleRelease(m) => {
            for v in &m.spec.values_from {
                out.push(format!(
                    "a change of {} {}/{} (valuesFrom)",
                    v.kind.as_str(),
                    key.namespace,
                    v.name
                ));
            }
        }
    }
    if reason == Reason::ImpersonationFailed || reason == Reason::DeletionSAMissing {
        match &obj.common().service_account_name {
            Some(sa) => out.push(format!(
                "the ServiceAccount {}/{sa} appearing (or its RBAC changing)",
                key.namespace
            )),
            None => out.push(
                "setting spec.serviceAccountName to a ServiceAccount of the namespace".into(),
            ),
        }
    }
    if let Some(kc) = &obj.common().kube_config {
        out.push(format!(
            "the kubeconfig Secret {}/{} being created or changed",
            key.namespace, kc.secret_ref.name
        ));
    }
}

/// What ends the wait its Ready reason names: dependencies, dependents, a failed hook.
fn reason_triggers(obj: &ReleaseObject, key: &ReleaseKey, reason: &str, out: &mut Vec<String>) {
    if reason == Reason::DependenciesNotReady {
        for d in &obj.common().depends_on {
            if !opm_core::deps::is_release_ref(d) {
                out.push(format!(
                    "the dependency {} {} {} becoming ready (checked every 30s)",
                    d.api_version, d.kind, d.name
                ));
                continue;
            }
            let dep = opm_core::deps::key_of(key, d);
            // As written when not one we know (the release is stalled naming it).
            let kind = if d.kind.is_empty() {
                dep.kind.as_str()
            } else {
                d.kind.as_str()
            };
            out.push(format!(
                "the dependency {kind} {} becoming Ready",
                dep.display()
            ));
        }
    }
    if reason == Reason::DependentsExist {
        out.push("each release that depends on it going away (deleted, its finalizer gone)".into());
        out.push(format!(
            "the annotation {}: \"true\" (lets it go at once, its objects orphaned)",
            opm_core::constants::ORPHAN_ANNOTATION
        ));
    }
    if reason == Reason::HookFailed {
        out.push(
            "the retry after the backoff, which runs a failed hook Job again (deleted and created); a new render runs it at once".into(),
        );
    }
}
