//! Ordered teardown (SPEC §32) never deadlocks: releases with objects, then any `dependsOn`
//! graph among them (cycles included, across two namespaces), then any set of them deleted at
//! any times. After the world settles:
//! - every deleted release still there waits (`DependentsExist`) for a dependent, and
//!   following what it waits for always ends at a release nobody deletes: no group of
//!   deleting releases waits on itself;
//! - a dependent outside any cycle with its dependency was gone before the dependency let go
//!   of its objects;
//! - a deleted release that nothing not deleted depends on, transitively, is gone.

mod world_support;

use std::collections::{BTreeMap, BTreeSet};

use opm_core::input::DependencyReport;
use opm_core::{Config, Kind, ReleaseKey};
use opm_world::{ModuleDef, Retention, World, WorldEvent, fixtures};
use proptest::prelude::*;
use serde_json::json;
use world_support::{at, pt_config, t0};

const MODULE: &str = "example.com/modules/web@v0";
const N: usize = 7;

fn key(i: usize) -> ReleaseKey {
    ReleaseKey {
        kind: Kind::ModuleRelease,
        namespace: if i.is_multiple_of(2) { "t1" } else { "t2" }.into(),
        name: format!("r{i}"),
    }
}

#[derive(Clone, Debug)]
struct Case {
    /// `edges[i]`: the releases release `i` depends on.
    edges: Vec<BTreeSet<usize>>,
    /// Deleted releases and when (seconds after the edges are set).
    deletions: Vec<(usize, u32)>,
}

fn case() -> impl Strategy<Value = Case> {
    let edges = proptest::collection::vec(proptest::collection::btree_set(0..N, 0..3), N).prop_map(
        |mut e| {
            for (i, s) in e.iter_mut().enumerate() {
                s.remove(&i);
            }
            e
        },
    );
    let deletions = proptest::collection::btree_map(0..N, 0u32..300, 1..=N)
        .prop_map(|m| m.into_iter().collect::<Vec<_>>());
    (edges, deletions).prop_map(|(edges, deletions)| Case { edges, deletions })
}

fn world(c: &Case) -> World {
    let cfg = Config {
        allow_cross_namespace_refs: true,
        ..Config::default()
    }
    .with_operator_identity(opm_core::AllowOperatorIdentity::On);
    let mut w = World::new(cfg, t0(), 7).with_retention(Retention::Full);
    w.add_module(MODULE, "v0.2.1", ModuleDef::web());
    for i in 0..N {
        let k = key(i);
        let mut o = fixtures::module_release(&k.namespace, &k.name, MODULE, "v0.2.1");
        fixtures::common_mut(&mut o).prune = true;
        w.create_release(o).unwrap();
    }
    // Applied first, so every release has objects to delete; the graph comes after (a cycle
    // stalls the reconcile, never the objects already applied).
    let edges_at = 120;
    for (i, deps) in c.edges.iter().enumerate() {
        let refs: Vec<_> = deps
            .iter()
            .map(|d| json!({"name": key(*d).name, "namespace": key(*d).namespace}))
            .collect();
        w.schedule(
            at(edges_at),
            WorldEvent::EditSpec {
                key: key(i),
                patch: json!({"dependsOn": refs}),
            },
        );
    }
    for (i, secs) in &c.deletions {
        w.schedule(
            at(edges_at + 1 + u64::from(*secs)),
            WorldEvent::Delete { key: key(*i) },
        );
    }
    w
}

/// The dependents of `k` that hold its deletion back in the world as it is, by the core's
/// own rule.
fn blockers(w: &World, k: &ReleaseKey) -> Vec<ReleaseKey> {
    let report = DependencyReport {
        releases: w
            .releases()
            .iter()
            .filter(|(_, r)| !r.object.common().depends_on.is_empty())
            .map(|(_, r)| opm_core::deps::snapshot(&r.object))
            .collect(),
        objects: Vec::new(),
    };
    let own: Vec<_> = w
        .release(k)
        .map(|o| opm_core::deps::release_keys(k, &o.common().depends_on))
        .unwrap_or_default();
    opm_core::teardown::blockers(k, &own, &report, true)
        .into_iter()
        .map(|s| s.key.clone())
        .collect()
}

/// Whether `from` reaches `to` by the `dependsOn` edges of the case.
fn reaches(edges: &[BTreeSet<usize>], from: usize, to: usize) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(n) = stack.pop() {
        for &m in &edges[n] {
            if m == to {
                return true;
            }
            if seen.insert(m) {
                stack.push(m);
            }
        }
    }
    false
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    let mut w = world(c);
    w.drive_until(at(120 + 301 + 1800))
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let deleted: BTreeSet<usize> = c.deletions.iter().map(|(i, _)| *i).collect();
    // When each release let go (its finalizer removed).
    let gone_at: BTreeMap<ReleaseKey, jiff::Timestamp> = w
        .timeline()
        .iter()
        .filter(|e| e.reason == "Deleted")
        .map(|e| (e.key.clone(), e.finished_at))
        .collect();
    // When each release first deleted objects (its prune on deletion).
    let mut pruned_at: BTreeMap<ReleaseKey, jiff::Timestamp> = BTreeMap::new();
    for log in w.logs() {
        if !log.deleted.is_empty() {
            pruned_at.entry(log.key.clone()).or_insert(log.finished_at);
        }
    }
    for &i in &deleted {
        let k = key(i);
        if w.release(&k).is_none() {
            continue;
        }
        let b = blockers(&w, &k);
        prop_assert!(!b.is_empty(), "{:?} still there and nothing blocks it", k);
        let ready = w
            .release(&k)
            .and_then(|o| o.status())
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.reason.clone());
        prop_assert_eq!(ready.as_deref(), Some("DependentsExist"), "{:?}", k);
        // Following what it waits for ends at a release nobody deletes.
        let mut seen = BTreeSet::new();
        let mut frontier = vec![k.clone()];
        let mut external = false;
        while let Some(n) = frontier.pop() {
            if !seen.insert(n.clone()) {
                continue;
            }
            let deleting = w
                .release(&n)
                .is_some_and(|o| o.meta().deletion_timestamp.is_some());
            if !deleting {
                external = true;
                break;
            }
            frontier.extend(blockers(&w, &n));
        }
        prop_assert!(
            external,
            "{:?} waits on deleting releases only: {:?}",
            k,
            seen
        );
    }
    // A dependent outside any cycle with its dependency was gone before the dependency
    // deleted anything.
    for &i in &deleted {
        for &j in &deleted {
            if i == j || !c.edges[j].contains(&i) || reaches(&c.edges, i, j) {
                continue;
            }
            if let Some(pruned) = pruned_at.get(&key(i)) {
                let gone = gone_at.get(&key(j));
                prop_assert!(
                    gone.is_some_and(|g| g <= pruned),
                    "{:?} pruned at {} while its dependent {:?} was gone at {:?}",
                    key(i),
                    pruned,
                    key(j),
                    gone
                );
            }
        }
    }
    // A deleted release that no release outside the deleted set depends on, transitively,
    // is gone.
    for &i in &deleted {
        let held = (0..N).any(|j| !deleted.contains(&j) && reaches(&c.edges, j, i));
        if !held {
            prop_assert!(
                w.release(&key(i)).is_none(),
                "{:?} should be gone; blockers {:?}",
                key(i),
                blockers(&w, &key(i))
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(pt_config("proptest-regressions/prop_teardown.txt", 48))]

    #[test]
    fn no_sequence_of_deletions_deadlocks(c in case()) {
        check(&c)?;
    }
}

/// The case a property run may miss: a two-release cycle deleted one after the other.
#[test]
fn a_cycle_deleted_in_turn_goes_entirely() {
    let mut edges = vec![BTreeSet::new(); N];
    edges[0].insert(1);
    edges[1].insert(0);
    let c = Case {
        edges,
        deletions: vec![(0, 10), (1, 20)],
    };
    check(&c).unwrap();
    let mut w = world(&c);
    w.drive_until(at(120 + 301 + 1800)).unwrap();
    assert!(w.release(&key(0)).is_none() && w.release(&key(1)).is_none());
}
