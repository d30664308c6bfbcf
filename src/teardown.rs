//! Ordered teardown (SPEC §32): a release being deleted keeps its finalizer and its objects
//! while a release that depends on it (`dependsOn`) still exists, so deleting a namespace or
//! a set of releases removes dependents first and the chain unwinds leaf first.
//!
//! The rules, decided here and nowhere else:
//! - a dependent blocks until it is gone, including while it is itself being deleted (its
//!   finalizer is what says its objects are gone);
//! - a dependent the deleting release itself depends on, directly or through others, is in a
//!   cycle with it and never blocks: otherwise every release of the cycle would wait for the
//!   next one forever;
//! - `opm.dev/force-delete-orphan: "true"` lets the release go at once, its objects orphaned
//!   (the caller emits the Warning).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::input::{DependencyReport, ReleaseSnapshot};
use crate::object::ReleaseKey;

/// How many blockers a message names before it says how many more there are.
pub(crate) const NAMED: usize = 10;

/// The releases whose existence holds back the deletion of `own` (whose own `dependsOn`,
/// defaults filled in, is `own_refs`), in the report's order without repeats: every release
/// of `report` that depends on `own`, except those `own` reaches through `dependsOn` edges
/// (a cycle through both of them), and, unless `allow_cross_namespace`
/// (`--allow-cross-namespace-refs`), those in another namespace: a dependency the operator
/// does not honour must not let a tenant hold another tenant's deletion back.
pub fn blockers<'a>(
    own: &ReleaseKey,
    own_refs: &[ReleaseKey],
    report: &'a DependencyReport,
    allow_cross_namespace: bool,
) -> Vec<&'a ReleaseSnapshot> {
    let dependents: Vec<&ReleaseSnapshot> = report
        .releases
        .iter()
        .filter(|s| &s.key != own && s.depends_on.contains(own))
        .filter(|s| allow_cross_namespace || s.key.namespace == own.namespace)
        .collect();
    if dependents.is_empty() {
        return dependents;
    }
    let reached = reachable(own, own_refs, report);
    let mut seen = BTreeSet::new();
    dependents
        .into_iter()
        .filter(|s| !reached.contains(&s.key) && seen.insert(&s.key))
        .collect()
}

/// Every release `own` depends on, directly or through others, by the report's `dependsOn`
/// (and `own_refs` for `own` itself). Breadth first, each release visited once: linear in
/// the edges, whatever the graph's shape.
fn reachable<'a>(
    own: &'a ReleaseKey,
    own_refs: &'a [ReleaseKey],
    report: &'a DependencyReport,
) -> BTreeSet<&'a ReleaseKey> {
    let mut graph: BTreeMap<&ReleaseKey, &[ReleaseKey]> = report
        .releases
        .iter()
        .map(|s| (&s.key, s.depends_on.as_slice()))
        .collect();
    graph.insert(own, own_refs);
    let mut seen: BTreeSet<&ReleaseKey> = BTreeSet::new();
    let mut queue: VecDeque<&ReleaseKey> = VecDeque::from([own]);
    while let Some(node) = queue.pop_front() {
        for next in graph.get(node).copied().unwrap_or(&[]) {
            if seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
    seen
}

/// `Kind ns/name`, with ` (deleting)` when it is on its way.
fn describe(s: &ReleaseSnapshot) -> String {
    let going = if s.deleting { " (deleting)" } else { "" };
    format!("{} {}{going}", s.key.kind.as_str(), s.key.display())
}

/// The first [`NAMED`] blockers, then how many more.
fn list(blockers: &[&ReleaseSnapshot]) -> String {
    let mut names: Vec<String> = blockers.iter().take(NAMED).map(|s| describe(s)).collect();
    if blockers.len() > NAMED {
        names.push(format!("… ({} more)", blockers.len() - NAMED));
    }
    names.join(", ")
}

/// `Ready=False/DependentsExist` message: who it waits for, and the ways out.
pub(crate) fn waiting_message(blockers: &[&ReleaseSnapshot]) -> String {
    format!(
        "waiting for dependents to be deleted: {}; delete them, remove this release from their \
         dependsOn, or set the annotation {}: \"true\" to orphan this release's objects",
        list(blockers),
        crate::constants::ORPHAN_ANNOTATION
    )
}

/// `OrphanedOnDeletion` note when the annotation lets a release with dependents go.
pub(crate) fn orphaned_message(count: usize, blockers: &[&ReleaseSnapshot]) -> String {
    format!(
        "Orphaned {count} managed resources; dependents still exist ({}) and {} annotation set",
        list(blockers),
        crate::constants::ORPHAN_ANNOTATION
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Kind;

    fn key(ns: &str, name: &str) -> ReleaseKey {
        ReleaseKey {
            kind: Kind::ModuleRelease,
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn snap(k: &ReleaseKey, deps: &[&ReleaseKey], deleting: bool) -> ReleaseSnapshot {
        ReleaseSnapshot {
            key: k.clone(),
            generation: 1,
            observed_generation: 1,
            ready: "True".into(),
            depends_on: deps.iter().map(|d| (*d).clone()).collect(),
            deleting,
        }
    }

    fn keys(b: &[&ReleaseSnapshot]) -> Vec<ReleaseKey> {
        b.iter().map(|s| s.key.clone()).collect()
    }

    #[test]
    fn a_dependent_blocks_until_it_is_gone_even_while_deleting() {
        let (db, app, web) = (key("a", "db"), key("b", "app"), key("a", "web"));
        let report = DependencyReport {
            releases: vec![
                snap(&app, &[&db], true),
                snap(&web, &[&db], false),
                snap(&key("a", "other"), &[&key("a", "x")], false),
            ],
            objects: Vec::new(),
        };
        let b = blockers(&db, &[], &report, true);
        assert_eq!(keys(&b), vec![app.clone(), web.clone()]);
        // Without --allow-cross-namespace-refs, the dependent in namespace b does not count.
        assert_eq!(keys(&blockers(&db, &[], &report, false)), vec![web.clone()]);
        let m = waiting_message(&b);
        assert!(
            m.starts_with(
                "waiting for dependents to be deleted: ModuleRelease b/app (deleting), ModuleRelease a/web;"
            ),
            "{m}"
        );
        assert!(m.contains("opm.dev/force-delete-orphan"), "{m}");
        // Once the dependents are gone nothing blocks.
        assert!(blockers(&db, &[], &DependencyReport::default(), true).is_empty());
        // A release of the other kind with the same name is not us.
        let rel = ReleaseKey {
            kind: Kind::Release,
            ..db.clone()
        };
        assert!(blockers(&rel, &[], &report, true).is_empty());
    }

    #[test]
    fn a_cycle_never_blocks() {
        // a -> b -> c -> a: each is a dependent of the next, and each reaches the others.
        let (a, b, c) = (key("n", "a"), key("n", "b"), key("n", "c"));
        let report = DependencyReport {
            releases: vec![
                snap(&a, &[&b], true),
                snap(&b, &[&c], true),
                snap(&c, &[&a], true),
            ],
            objects: Vec::new(),
        };
        for own in [&a, &b, &c] {
            let refs = report
                .releases
                .iter()
                .find(|s| &s.key == own)
                .unwrap()
                .depends_on
                .clone();
            assert!(blockers(own, &refs, &report, true).is_empty(), "{own:?}");
        }
        // A dependent outside the cycle still blocks.
        let d = key("n", "d");
        let mut with_d = report.clone();
        with_d.releases.push(snap(&d, &[&a], false));
        assert_eq!(
            keys(&blockers(&a, std::slice::from_ref(&b), &with_d, false)),
            vec![d]
        );
    }

    #[test]
    fn messages_name_ten_then_count() {
        let db = key("a", "db");
        let report = DependencyReport {
            releases: (0..13)
                .map(|i| snap(&key("a", &format!("app{i:02}")), &[&db], false))
                .collect(),
            objects: Vec::new(),
        };
        let b = blockers(&db, &[], &report, false);
        assert_eq!(b.len(), 13);
        let m = waiting_message(&b);
        assert!(m.contains("a/app09, … (3 more);"), "{m}");
        assert!(!m.contains("app10"), "{m}");
        assert_eq!(
            orphaned_message(2, &b[..1]),
            "Orphaned 2 managed resources; dependents still exist (ModuleRelease a/app00) and opm.dev/force-delete-orphan annotation set"
        );
    }
}
