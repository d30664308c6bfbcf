//! Remote clusters (SPEC §31) in the simulated world, through the same core path as the
//! operator: a release with `spec.kubeConfig` applies to the cluster its Secret points at
//! and to nothing else; a missing Secret stalls until it is created; a partition is a
//! transient `ClusterUnreachable` with backoff that ends in Ready once it heals; pointing the
//! Secret at another server moves the release there and leaves (and names) the old objects.

use std::time::Duration;

use jiff::Timestamp;
use opm_core::api::{KubeConfigReference, KubeConfigSecretRef, ReleaseStatus};
use opm_core::outcome::Outcome;
use opm_core::{Config, Effect, ReleaseKey};
use opm_world::{ModuleDef, World, WorldEvent, fixtures};

const WEB: &str = "example.com/modules/web@v0";
const EU: &str = "https://eu.example.com:6443";
const US: &str = "https://us.example.com:6443";

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

fn at(secs: u64) -> Timestamp {
    t0() + Duration::from_secs(secs)
}

fn status<'a>(w: &'a World, key: &ReleaseKey) -> &'a ReleaseStatus {
    w.release(key).and_then(|o| o.status()).unwrap()
}

fn ready(w: &World, key: &ReleaseKey) -> String {
    let c = status(w, key)
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    format!("{}/{}", c.status, c.reason)
}

/// Objects in the operator's own cluster but Namespaces.
fn local_objects(w: &World) -> usize {
    w.store()
        .objects()
        .filter(|o| o.id.kind != "Namespace")
        .count()
}

/// A world with the web module and a ModuleRelease `web` naming kubeconfig Secret `kc`.
fn world() -> (World, ReleaseKey) {
    let mut w = World::new(Config::default(), t0(), 7);
    w.add_module(WEB, "v0.2.1", ModuleDef::web());
    let mut mr = fixtures::module_release("demo", "web", WEB, "v0.2.1");
    let common = fixtures::common_mut(&mut mr);
    common.prune = true;
    common.kube_config = Some(KubeConfigReference {
        secret_ref: KubeConfigSecretRef {
            name: "kc".into(),
            key: None,
        },
    });
    let key = w.create_release(mr).unwrap();
    (w, key)
}

#[test]
fn a_remote_release_applies_there_and_writes_nothing_here() {
    let (mut w, key) = world();
    w.apply_event(WorldEvent::SetKubeConfig {
        namespace: "demo".into(),
        name: "kc".into(),
        server: EU.into(),
    })
    .unwrap();
    w.drive_until(at(10)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    assert_eq!(local_objects(&w), 0, "nothing in the operator's cluster");
    let remote = w.cluster_objects(EU);
    assert_eq!(remote.len(), 4, "{remote:?}");
    let s = status(&w, &key);
    assert_eq!(s.inventory.as_ref().unwrap().cluster, EU);
    assert!(s.left_behind.is_none());
    // No ServiceAccount and operator identity off: the kubeconfig's own identity is used
    // in the remote cluster (SPEC §31), nothing stalls ImpersonationFailed.
    let effects: Vec<&Effect> = w
        .logs()
        .iter()
        .flat_map(|l| l.batches.iter().flatten())
        .collect();
    let applies: Vec<_> = effects
        .iter()
        .filter(|e| matches!(e, Effect::Apply { .. }))
        .collect();
    assert!(!applies.is_empty());
    for e in applies {
        assert_eq!(e.cluster().map(|c| c.server.as_str()), Some(EU));
    }
}

#[test]
fn a_missing_secret_stalls_until_its_creation_retriggers() {
    let (mut w, key) = world();
    w.drive_until(at(60)).unwrap();
    assert_eq!(ready(&w, &key), "False/InvalidKubeConfig");
    let first = &w.timeline()[0];
    assert_eq!(first.outcome, Some(Outcome::FailedStalled));
    assert!(
        first.message.contains("Secret demo/kc not found"),
        "{}",
        first.message
    );
    assert_eq!(local_objects(&w), 0);
    w.schedule(
        at(120),
        WorldEvent::SetKubeConfig {
            namespace: "demo".into(),
            name: "kc".into(),
            server: EU.into(),
        },
    );
    w.drive_until(at(121)).unwrap();
    let last = w.timeline().last().unwrap();
    assert_eq!(
        last.started_at,
        at(120),
        "re-triggered by the Secret, not the 30m recheck"
    );
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
}

#[test]
fn a_partition_is_transient_with_backoff_and_heals_to_ready_with_nothing_lost() {
    let (mut w, key) = world();
    w.apply_event(WorldEvent::SetKubeConfig {
        namespace: "demo".into(),
        name: "kc".into(),
        server: US.into(),
    })
    .unwrap();
    w.drive_until(at(10)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    let before = w.cluster_objects(US);
    w.schedule(at(100), WorldEvent::Partition { server: US.into() });
    w.schedule(at(100 + 3600), WorldEvent::Heal { server: US.into() });
    // The periodic attempt at 300s meets the partition.
    w.drive_until(at(3600)).unwrap();
    assert_eq!(ready(&w, &key), "False/ClusterUnreachable");
    let failed: Vec<_> = w
        .timeline()
        .iter()
        .filter(|e| e.reason == "ClusterUnreachable")
        .collect();
    assert!(failed.len() >= 5, "{}", failed.len());
    assert!(
        failed
            .iter()
            .all(|e| e.outcome == Some(Outcome::FailedTransient))
    );
    assert!(failed[0].message.contains(US), "{}", failed[0].message);
    let delays: Vec<_> = failed.iter().map(|e| e.requeue_after.unwrap()).collect();
    assert_eq!(delays[0], Duration::from_secs(5));
    assert!(delays.windows(2).all(|d| d[1] >= d[0]), "{delays:?}");
    assert!(delays.iter().all(|d| *d <= Duration::from_secs(300)));
    w.drive_until(at(100 + 3600 + 310)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    assert_eq!(w.cluster_objects(US), before, "nothing lost, nothing new");
}

#[test]
fn a_secret_pointed_at_another_server_moves_the_release_and_leaves_the_old_objects_named() {
    let (mut w, key) = world();
    w.apply_event(WorldEvent::SetKubeConfig {
        namespace: "demo".into(),
        name: "kc".into(),
        server: EU.into(),
    })
    .unwrap();
    w.drive_until(at(10)).unwrap();
    let eu_before = w.cluster_objects(EU);
    assert_eq!(eu_before.len(), 4);
    w.schedule(
        at(50),
        WorldEvent::SetKubeConfig {
            namespace: "demo".into(),
            name: "kc".into(),
            server: US.into(),
        },
    );
    w.drive_until(at(60)).unwrap();
    assert_eq!(ready(&w, &key), "True/ReconciliationSucceeded");
    assert_eq!(w.cluster_objects(US).len(), 4, "applied in the new cluster");
    assert_eq!(
        w.cluster_objects(EU),
        eu_before,
        "left in the old one, not pruned"
    );
    let s = status(&w, &key);
    assert_eq!(s.inventory.as_ref().unwrap().cluster, US);
    let left = s.left_behind.as_ref().expect("leftBehind");
    assert_eq!(left.cluster, EU);
    assert_eq!(left.count, 4);
    assert_eq!(left.entries.len(), 4);
    let moved: Vec<_> = w
        .events()
        .iter()
        .filter(|e| e.event.reason == opm_core::Reason::ClusterChanged)
        .collect();
    assert_eq!(moved.len(), 1);
    assert!(moved[0].event.note.contains(EU) && moved[0].event.note.contains(US));
    // Deleting the release prunes in the cluster it now points at, not the old one.
    w.apply_event(WorldEvent::Delete { key: key.clone() })
        .unwrap();
    w.drive_until(at(120)).unwrap();
    assert!(w.release(&key).is_none(), "finalizer removed");
    assert!(w.cluster_objects(US).is_empty());
    assert_eq!(w.cluster_objects(EU), eu_before);
}
