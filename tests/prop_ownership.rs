//! Properties of the ownership check before the first write (SPEC §25) and of the prune
//! guard (SPEC §9), over generated live states, inventories and `adoptExisting`.

mod support;

use std::collections::BTreeMap;

use opm_core::api::{Inventory, InventoryEntry, ReleaseStatus, Rollout};
use opm_core::constants::labels;
use opm_core::effect::{Effect, EffectKind};
use opm_core::input::{LiveMeta, LiveObject};
use opm_core::object::{Kind, ResourceId};
use opm_core::render_value::release_uuid;
use opm_core::{Outcome, prune};
use proptest::prelude::*;
use support::*;

/// What the live object looks like before the attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Live {
    Absent,
    Ours,
    OtherRelease,
    /// Exists without a uuid label (perhaps with our managed-by label).
    Unowned {
        managed_by_us: bool,
    },
}

fn live() -> impl Strategy<Value = Live> {
    prop_oneof![
        Just(Live::Absent),
        Just(Live::Ours),
        Just(Live::OtherRelease),
        any::<bool>().prop_map(|m| Live::Unowned { managed_by_us: m }),
    ]
}

fn meta(state: Live, ours: &str) -> Result<Option<LiveMeta>, opm_core::ApiError> {
    let other = release_uuid(Kind::ModuleRelease, "demo", "other");
    let mut l = BTreeMap::new();
    match state {
        Live::Absent => return Ok(None),
        Live::Ours => {
            l.insert(labels::MANAGED_BY.to_string(), "opm-controller".to_string());
            l.insert(labels::RELEASE_UUID.to_string(), ours.to_string());
        }
        Live::OtherRelease => {
            l.insert(labels::MANAGED_BY.to_string(), "opm-controller".to_string());
            l.insert(labels::RELEASE_UUID.to_string(), other);
            l.insert(labels::RELEASE_NAME.to_string(), "other".to_string());
            l.insert(labels::RELEASE_NAMESPACE.to_string(), "demo".to_string());
        }
        Live::Unowned { managed_by_us } => {
            if managed_by_us {
                l.insert(labels::MANAGED_BY.to_string(), "opm-controller".to_string());
            }
            l.insert("k8s-app".to_string(), "kube-dns".to_string());
        }
    }
    Ok(Some(LiveMeta {
        uid: "u".into(),
        labels: l,
    }))
}

/// The example module's objects by name: `web` (Deployment and Service) and `web-config`.
const NAMES: [&str; 2] = ["web", "web-config"];

fn entries_for(name: &str) -> Vec<InventoryEntry> {
    let e = |group: &str, kind: &str| InventoryEntry {
        group: group.into(),
        kind: kind.into(),
        namespace: "demo".into(),
        name: name.into(),
        v: "v1".into(),
        ..Default::default()
    };
    if name == "web" {
        vec![e("apps", "Deployment"), e("", "Service")]
    } else {
        vec![e("", "ConfigMap")]
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Nothing is written when any object belongs to another release, or exists unowned
    /// without `adoptExisting` and outside the inventory; otherwise the apply goes ahead.
    /// Every object is read, in the inventory or not: `status.inventory` is the release's
    /// own status, which a tenant may forge to list another release's object (SPEC §25).
    #[test]
    fn the_apply_never_writes_what_is_not_ours(
        states in proptest::collection::vec(live(), 2),
        in_inventory in proptest::collection::vec(any::<bool>(), 2),
        adopt in any::<bool>(),
    ) {
        let mut mr = module_release();
        let uuid = release_uuid(Kind::ModuleRelease, "demo", "web");
        mr.spec.common.rollout = Some(Rollout { adopt_existing: adopt, ..Default::default() });
        let entries: Vec<InventoryEntry> = NAMES
            .iter()
            .zip(&in_inventory)
            .filter(|(_, inv)| **inv)
            .flat_map(|(n, _)| entries_for(n))
            .collect();
        if !entries.is_empty() {
            mr.status = Some(ReleaseStatus {
                inventory: Some(Inventory {
                    cluster: String::new(),
                    revision: 1,
                    digest: opm_core::digest::inventory(&entries),
                    count: entries.len() as i64,
                    entries,
                }),
                ..Default::default()
            });
        }
        let mut canned = Canned::default();
        for (n, s) in NAMES.iter().zip(&states) {
            canned.owners.insert(n.to_string(), meta(*s, &uuid));
        }
        let r = run_mr(&operator_cfg(), mr, &canned);
        let new: Vec<(&str, Live)> = NAMES
            .iter()
            .zip(&states)
            .map(|(n, s)| (*n, *s))
            .collect();
        match r.find(EffectKind::InspectOwners) {
            None => prop_assert!(false, "objects written unread: {new:?}"),
            Some(Effect::InspectOwners { targets, .. }) => {
                let mut asked: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
                asked.sort();
                asked.dedup();
                let want: Vec<&str> = new.iter().map(|(n, _)| *n).collect();
                prop_assert_eq!(asked, want);
            }
            Some(_) => unreachable!(),
        }
        let refused = new.iter().zip(&in_inventory).any(|((_, s), inv)| match s {
            Live::OtherRelease => true,
            Live::Unowned { .. } => !adopt && !inv,
            _ => false,
        });
        if refused {
            prop_assert!(r.find(EffectKind::Apply).is_none(), "wrote despite a conflict");
            prop_assert_eq!(r.outcome, Outcome::FailedStalled);
            prop_assert_eq!(r.reason.as_str(), "OwnershipConflict");
            let (_, reason, msg) = r.cond3("Ready").unwrap();
            prop_assert_eq!(reason.as_str(), "OwnershipConflict");
            if new.iter().any(|(_, s)| *s == Live::OtherRelease) {
                prop_assert!(msg.contains("belongs to ModuleRelease demo/other"), "{}", msg);
            }
        } else {
            prop_assert!(r.find(EffectKind::Apply).is_some());
            prop_assert_eq!(r.outcome, Outcome::Applied);
        }
    }

    /// Prune deletes an object only when its uuid label is present and ours, whatever its
    /// `managed-by` says; a `prune: disabled` target is orphaned, never deleted.
    #[test]
    fn prune_deletes_only_provably_ours(
        manager in prop::sample::select(vec!["opm-controller", "opm-cli", "open-platform-model", "helm", ""]),
        uuid in prop::sample::select(vec!["ours", "theirs", ""]),
        orphan in any::<bool>(),
    ) {
        let id = ResourceId { kind: "ConfigMap".into(), namespace: "demo".into(), name: "x".into(), version: "v1".into(), ..Default::default() };
        let mut l = BTreeMap::new();
        if !manager.is_empty() { l.insert(labels::MANAGED_BY.to_string(), manager.to_string()); }
        if !uuid.is_empty() { l.insert(labels::RELEASE_UUID.to_string(), uuid.to_string()); }
        let obs = [LiveObject { id: id.clone(), result: Ok(Some(LiveMeta { uid: "u".into(), labels: l })) }];
        let orphaned = if orphan { vec![id.clone()] } else { vec![] };
        let d = prune::decide(std::slice::from_ref(&id), &obs, "ours", &orphaned);
        let ours = uuid == "ours" && ["opm-controller", "opm-cli", "open-platform-model"].contains(&manager);
        prop_assert_eq!(d.deletions.len(), usize::from(ours));
        if let Some(del) = d.deletions.first() {
            prop_assert_eq!(del.orphan, orphan);
        }
    }
}

#[test]
fn a_conflict_names_the_object_and_its_owner_and_emits_one_warning() {
    let uuid = release_uuid(Kind::ModuleRelease, "demo", "web");
    let canned = Canned {
        owners: BTreeMap::from([("web-config".to_string(), meta(Live::OtherRelease, &uuid))]),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_stall(
        &r,
        "OwnershipConflict",
        "Apply",
        "ConfigMap demo/web-config belongs to ModuleRelease demo/other",
    );
    assert!(r.find(EffectKind::Apply).is_none());
}

/// A first run whose ConfigMap is marked `prune: disabled`: the annotation is not applied
/// and the inventory remembers the policy.
fn applied_with_policy() -> ReleaseStatus {
    let canned = Canned {
        render: Ok(opm_core::input::RenderOutput {
            value: exported(
                serde_json::json!({"keep": {"cm": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kept", "annotations": {"releases.opmodel.dev/prune": "disabled"}}}}}),
            ),
            cluster_scoped: vec![],
            bytes: 0,
            platform: String::new(),
        }),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), module_release(), &canned);
    assert_eq!(r.outcome, Outcome::Applied);
    match r.find(EffectKind::Apply) {
        Some(Effect::Apply { stages, .. }) => {
            let kept = stages
                .iter()
                .flat_map(|s| &s.objects)
                .find(|o| o.id.name == "kept")
                .unwrap();
            assert!(
                kept.manifest["metadata"].get("annotations").is_none(),
                "{kept:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let inv = r.status.inventory.clone().unwrap();
    let e = inv.entries.iter().find(|e| e.name == "kept").unwrap();
    assert_eq!(e.prune, "disabled");
    r.status
}

#[test]
fn a_prune_disabled_object_leaving_the_render_is_orphaned_even_without_prune() {
    let mut mr = module_release();
    mr.status = Some(applied_with_policy());
    mr.spec.common.prune = false;
    let uuid = release_uuid(Kind::ModuleRelease, "demo", "web");
    let canned = Canned {
        live: BTreeMap::from([(
            "kept".to_string(),
            Ok(Some(LiveMeta {
                uid: "u-kept".into(),
                labels: ours(&uuid),
            })),
        )]),
        ..Default::default()
    };
    let r = run_mr(&operator_cfg(), mr, &canned);
    match r.find(EffectKind::Prune) {
        Some(Effect::Prune { deletions, .. }) => {
            assert_eq!(deletions.len(), 1);
            assert_eq!(deletions[0].id.name, "kept");
            assert!(deletions[0].orphan, "orphaned, not deleted");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.outcome, Outcome::AppliedAndPruned);
    assert!(
        r.events().iter().all(|e| e.reason != "Pruned"),
        "nothing was deleted"
    );
}

#[test]
fn deleting_the_release_orphans_its_prune_disabled_objects_and_deletes_the_rest() {
    let mut mr = module_release();
    mr.status = Some(applied_with_policy());
    mr.spec.common.prune = true;
    mr.metadata.deletion_timestamp = Some(time(t0()));
    let r = run_mr(&operator_cfg(), mr, &Canned::default());
    match r.find(EffectKind::Prune) {
        Some(Effect::Prune { deletions, .. }) => {
            assert_eq!(deletions.len(), 4);
            for d in deletions {
                assert_eq!(d.orphan, d.id.name == "kept", "{d:?}");
            }
        }
        other => panic!("{other:?}"),
    }
}

/// A `status.inventory` a tenant forged to list another release's ConfigMap and an
/// unlabelled one (SPEC §25: prune and deletion trust the live `uuid` label, never the
/// status alone): neither is deleted, on a revision that drops them nor on deletion.
#[test]
fn a_forged_inventory_prunes_and_deletes_nothing_that_is_not_ours() {
    let forged = |name: &str| InventoryEntry {
        kind: "ConfigMap".into(),
        namespace: "demo".into(),
        name: name.into(),
        v: "v1".into(),
        ..Default::default()
    };
    let entries = vec![forged("victim"), forged("unlabelled")];
    let status = ReleaseStatus {
        inventory: Some(Inventory {
            cluster: String::new(),
            revision: 1,
            digest: opm_core::digest::inventory(&entries),
            count: entries.len() as i64,
            entries,
        }),
        ..Default::default()
    };
    let uuid = release_uuid(Kind::ModuleRelease, "demo", "web");
    let live = BTreeMap::from([
        ("victim".to_string(), meta(Live::OtherRelease, &uuid)),
        (
            "unlabelled".to_string(),
            meta(
                Live::Unowned {
                    managed_by_us: true,
                },
                &uuid,
            ),
        ),
    ]);
    for deleting in [false, true] {
        let mut mr = module_release();
        mr.spec.common.prune = true;
        mr.status = Some(status.clone());
        if deleting {
            mr.metadata.deletion_timestamp = Some(time(t0()));
        }
        let canned = Canned {
            live: live.clone(),
            ..Default::default()
        };
        let r = run_mr(&operator_cfg(), mr, &canned);
        let deleted: Vec<&str> = match r.find(EffectKind::Prune) {
            Some(Effect::Prune { deletions, .. }) => {
                deletions.iter().map(|d| d.id.name.as_str()).collect()
            }
            _ => Vec::new(),
        };
        assert!(
            !deleted.contains(&"victim") && !deleted.contains(&"unlabelled"),
            "deleting={deleting}: {deleted:?}"
        );
    }
}
