//! `dependsOn` (SPEC §14, §32): defaults, self-reference, cross-namespace policy, cycles,
//! readiness of releases ([`evaluate`]) and of any other object ([`objects`]).

pub mod objects;

use std::collections::{BTreeMap, BTreeSet};

use crate::api::DependencyRef;
use crate::constants::conditions;
use crate::input::{DependencyReport, ReleaseSnapshot};
use crate::object::{Kind, ReleaseKey, ReleaseObject, ResourceId};
use crate::outcome::Failure;
use crate::reason::Reason;

/// Whether `r` names a release (no `apiVersion` or the releases' group, and a release kind
/// or none) rather than any other object (SPEC §32).
pub fn is_release_ref(r: &DependencyRef) -> bool {
    (r.api_version.is_empty() || r.api_version.starts_with(RELEASES_GROUP))
        && (r.kind.is_empty() || Kind::parse(&r.kind).is_some())
}

const RELEASES_GROUP: &str = "releases.opmodel.dev/";

/// A `dependsOn` entry naming an object that is not a release, defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectDependency {
    /// The object: its namespace the entry's, else the release's (the interpreter drops it
    /// for a cluster-scoped kind).
    pub id: ResourceId,
    /// The entry's `readyExpr`, if any.
    pub ready_expr: Option<String>,
}

/// The `dependsOn` entries, defaults filled in: releases (namespace: the release's; kind:
/// its own) and other objects, each in spec order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Resolved {
    /// The releases depended on.
    pub releases: Vec<ReleaseKey>,
    /// The other objects depended on.
    pub objects: Vec<ObjectDependency>,
}

/// Splits the entries into releases and other objects (SPEC §14, §32). An object entry
/// without `apiVersion`, or whose `readyExpr` does not compile, is a stall naming it.
pub fn resolve(own: &ReleaseKey, refs: &[DependencyRef]) -> Result<Resolved, Failure> {
    let mut out = Resolved::default();
    for (i, r) in refs.iter().enumerate() {
        if is_release_ref(r) {
            let kind = Kind::parse(&r.kind).unwrap_or(own.kind);
            out.releases.push(ReleaseKey {
                kind,
                namespace: namespace_of(own, r).to_owned(),
                name: r.name.clone(),
            });
            continue;
        }
        if r.api_version.is_empty() {
            return Err(Failure::stalled(
                Reason::DependenciesNotReady,
                format!(
                    "dependsOn[{i}] names kind \"{}\" without apiVersion: set apiVersion for \
                     any kind other than ModuleRelease or Release",
                    r.kind
                ),
            ));
        }
        let (group, version) = match r.api_version.rsplit_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), r.api_version.clone()),
        };
        let id = ResourceId {
            group,
            kind: r.kind.clone(),
            namespace: namespace_of(own, r).to_owned(),
            name: r.name.clone(),
            version,
        };
        let ready_expr = (!r.ready_expr.trim().is_empty()).then(|| r.ready_expr.clone());
        if let Some(src) = &ready_expr
            && let Err(e) = crate::health::ReadyExpr::compile(src)
        {
            return Err(Failure::stalled(
                Reason::DependenciesNotReady,
                format!(
                    "dependsOn[{i}] ({}) readyExpr does not compile: {e}",
                    id.display()
                ),
            ));
        }
        out.objects.push(ObjectDependency { id, ready_expr });
    }
    Ok(out)
}

/// The namespace `r` names from release `own`: its own, or the release's.
fn namespace_of<'a>(own: &'a ReleaseKey, r: &'a DependencyRef) -> &'a str {
    if r.namespace.is_empty() {
        &own.namespace
    } else {
        &r.namespace
    }
}

/// The key `r` names from release `own`, defaults filled in. An unsupported kind is read as
/// the release's own kind here; [`resolve`] is what reports it.
pub fn key_of(own: &ReleaseKey, r: &DependencyRef) -> ReleaseKey {
    ReleaseKey {
        kind: Kind::parse(&r.kind).unwrap_or(own.kind),
        namespace: namespace_of(own, r).to_owned(),
        name: r.name.clone(),
    }
}

/// A release as the dependency check sees it: its Ready status, generations and
/// `dependsOn` resolved with [`key_of`] (the interpreter's read and the simulated world
/// both build their reports with it).
pub fn snapshot(obj: &ReleaseObject) -> ReleaseSnapshot {
    let key = obj.key();
    let status = obj.status();
    let ready = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == conditions::READY))
        .map(|c| c.status.clone())
        .unwrap_or_default();
    let depends_on = obj
        .common()
        .depends_on
        .iter()
        .filter(|d| is_release_ref(d))
        .map(|d| key_of(&key, d))
        .collect();
    ReleaseSnapshot {
        generation: obj.meta().generation.unwrap_or_default(),
        observed_generation: status.map(|s| s.observed_generation).unwrap_or_default(),
        ready,
        depends_on,
        deleting: obj.meta().deletion_timestamp.is_some(),
        key,
    }
}

/// The releases (not other objects) that `refs`, in release `own`'s `dependsOn`, name.
pub fn release_keys(own: &ReleaseKey, refs: &[DependencyRef]) -> Vec<ReleaseKey> {
    refs.iter()
        .filter(|d| is_release_ref(d))
        .map(|d| key_of(own, d))
        .collect()
}

/// Whether `r`, in release `own`'s `dependsOn`, names `dep`; allocates nothing, as it runs
/// for every release on every Ready transition.
pub fn names(own: &ReleaseKey, r: &DependencyRef, dep: &ReleaseKey) -> bool {
    r.name == dep.name
        && is_release_ref(r)
        && Kind::parse(&r.kind).unwrap_or(own.kind) == dep.kind
        && namespace_of(own, r) == dep.namespace
}

/// Whether release `own`, with these `dependsOn` entries, depends on `dep`: what a
/// dependency turning Ready re-triggers (SPEC §14, [`crate::triggers`]).
pub fn depends_on(own: &ReleaseKey, refs: &[DependencyRef], dep: &ReleaseKey) -> bool {
    refs.iter().any(|r| names(own, r, dep))
}

/// Checks made before anything is read: self-reference and cross-namespace policy, in order.
pub fn precheck(
    own: &ReleaseKey,
    refs: &[ReleaseKey],
    objects: &[ObjectDependency],
    allow_cross_namespace: bool,
) -> Result<(), Failure> {
    for o in objects {
        if o.id.namespace != own.namespace && !allow_cross_namespace {
            return Err(Failure::stalled(
                Reason::CrossNamespaceRefDenied,
                format!(
                    "cross-namespace dependency on {} is not allowed (--allow-cross-namespace-refs is off)",
                    o.id.display()
                ),
            ));
        }
    }
    for r in refs {
        if r == own {
            return Err(Failure::stalled(
                Reason::DependenciesNotReady,
                format!("release {} depends on itself", own.display()),
            ));
        }
        if r.namespace != own.namespace && !allow_cross_namespace {
            return Err(Failure::stalled(
                Reason::CrossNamespaceRefDenied,
                format!(
                    "cross-namespace dependency on {} {} is not allowed (--allow-cross-namespace-refs is off)",
                    r.kind.as_str(),
                    r.display()
                ),
            ));
        }
    }
    Ok(())
}

/// A cycle through `own`, as the path `own -> … -> own`, using the release's current refs
/// for itself and the reported `dependsOn` for everyone else.
pub fn find_cycle(
    own: &ReleaseKey,
    refs: &[ReleaseKey],
    report: &DependencyReport,
) -> Option<Vec<ReleaseKey>> {
    let mut graph: BTreeMap<&ReleaseKey, &[ReleaseKey]> = report
        .releases
        .iter()
        .map(|s| (&s.key, s.depends_on.as_slice()))
        .collect();
    graph.insert(own, refs);
    let mut visited: BTreeSet<&ReleaseKey> = BTreeSet::new();
    let mut path: Vec<&ReleaseKey> = vec![own];
    // Explicit stack of (node, next child index) keeps this iterative and deterministic.
    let mut stack: Vec<(&ReleaseKey, usize)> = vec![(own, 0)];
    visited.insert(own);
    while let Some((node, idx)) = stack.pop() {
        let children = graph.get(node).copied().unwrap_or(&[]);
        if idx >= children.len() {
            path.pop();
            continue;
        }
        stack.push((node, idx + 1));
        let child = &children[idx];
        if child == own {
            let mut cycle: Vec<ReleaseKey> = path.iter().map(|k| (*k).clone()).collect();
            cycle.push(own.clone());
            return Some(cycle);
        }
        if visited.insert(child) {
            path.push(child);
            stack.push((child, 0));
        }
    }
    None
}

/// The verdict on a dependency report: a stall for a cycle, else the first blocker in order.
pub fn evaluate(
    own: &ReleaseKey,
    refs: &[ReleaseKey],
    report: &DependencyReport,
) -> Result<(), Failure> {
    if let Some(cycle) = find_cycle(own, refs, report) {
        let path: Vec<String> = cycle.iter().map(ReleaseKey::display).collect();
        return Err(Failure::stalled(
            Reason::DependenciesNotReady,
            format!("dependency cycle detected: {}", path.join(" -> ")),
        ));
    }
    for r in refs {
        let ready = report
            .releases
            .iter()
            .find(|s| &s.key == r)
            .is_some_and(|s| s.ready == "True" && s.observed_generation == s.generation);
        if !ready {
            return Err(Failure::soft(
                Reason::DependenciesNotReady,
                format!("waiting for dependency {}", r.display()),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
