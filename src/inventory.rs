//! Inventory and the stale set (SPEC §8).

use crate::api::{Inventory, InventoryEntry};
use crate::digest;
use crate::object::DesiredObject;

/// Entries for the objects about to be applied, in digest order.
pub fn entries_for(objects: &[DesiredObject]) -> Vec<InventoryEntry> {
    let mut entries: Vec<InventoryEntry> =
        objects.iter().map(DesiredObject::inventory_entry).collect();
    entries.sort_by(|a, b| digest::inventory_order(a).cmp(&digest::inventory_order(b)));
    entries
}

fn identity(e: &InventoryEntry) -> (&str, &str, &str, &str) {
    (&e.group, &e.kind, &e.namespace, &e.name)
}

/// Previous entries whose (group, kind, namespace, name) is not in `current`: an API-version
/// change or a component rename is not stale.
pub fn stale(previous: &[InventoryEntry], current: &[InventoryEntry]) -> Vec<InventoryEntry> {
    previous
        .iter()
        .filter(|p| !current.iter().any(|c| identity(c) == identity(p)))
        .cloned()
        .collect()
}

/// The inventory recorded after full success: revision + 1, digest, count, entries.
pub fn next(previous: Option<&Inventory>, entries: Vec<InventoryEntry>) -> Inventory {
    // Saturating: a stored status is input like any other (`i64::MAX` must not panic).
    let revision = previous.map_or(0, |p| p.revision).saturating_add(1);
    Inventory {
        revision,
        cluster: previous.map(|p| p.cluster.clone()).unwrap_or_default(),
        digest: digest::inventory(&entries),
        count: entries.len() as i64,
        entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(kind: &str, name: &str, v: &str, component: &str) -> InventoryEntry {
        InventoryEntry {
            group: String::new(),
            kind: kind.into(),
            namespace: "demo".into(),
            name: name.into(),
            v: v.into(),
            component: component.into(),
            prune: String::new(),
        }
    }

    #[test]
    fn version_or_component_change_is_not_stale() {
        let prev = vec![
            e("ConfigMap", "a", "v1", "x"),
            e("Service", "b", "v1", "x"),
            e("Secret", "c", "v1", "x"),
        ];
        let cur = vec![
            e("ConfigMap", "a", "v2", "x"),
            e("Service", "b", "v1", "renamed"),
        ];
        assert_eq!(stale(&prev, &cur), vec![e("Secret", "c", "v1", "x")]);
        assert!(stale(&[], &cur).is_empty());
    }

    #[test]
    fn next_bumps_revision_and_digest() {
        let first = next(None, vec![e("ConfigMap", "a", "v1", "x")]);
        assert_eq!((first.revision, first.count), (1, 1));
        assert_eq!(first.digest, digest::inventory(&first.entries));
        let second = next(Some(&first), vec![]);
        assert_eq!((second.revision, second.count), (2, 0));
        assert_eq!(second.digest, digest::EMPTY_DIGEST);
    }
}
