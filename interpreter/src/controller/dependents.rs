//! The releases of one kind that have a `dependsOn`, kept from the kind's watch, so that a
//! release turning Ready looks only at those (SPEC §14) and not at every release in the
//! stores: at 10 000 releases, a scan of both stores per Ready transition made the converge
//! O(N²) in the controller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Resource;
use kube::runtime::watcher::Event;
use opm_core::api::DependencyRef;
use opm_core::{Kind, ReleaseKey};

/// The releases of one kind with a non-empty `dependsOn`, and their references.
pub(super) struct Dependents {
    kind: Kind,
    state: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    live: HashMap<ReleaseKey, Vec<DependencyRef>>,
    /// During a relist (`Init` … `InitDone`): the new contents, swapped in at the end.
    relist: Option<HashMap<ReleaseKey, Vec<DependencyRef>>>,
}

impl Dependents {
    pub(super) fn new(kind: Kind) -> Arc<Self> {
        Arc::new(Self {
            kind,
            state: Mutex::default(),
        })
    }

    /// Follows one watch event; `refs` reads an object's `dependsOn`.
    pub(super) fn observe<K: Resource>(
        &self,
        event: &Event<K>,
        refs: impl Fn(&K) -> &[DependencyRef],
    ) {
        let key = |o: &K| ReleaseKey {
            kind: self.kind,
            namespace: o.meta().namespace.clone().unwrap_or_default(),
            name: o.meta().name.clone().unwrap_or_default(),
        };
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::Init => s.relist = Some(HashMap::new()),
            Event::InitApply(o) => {
                let r = refs(o);
                if !r.is_empty() {
                    let into = s.relist.get_or_insert_with(HashMap::new);
                    into.insert(key(o), r.to_vec());
                }
            }
            Event::InitDone => {
                s.live = s.relist.take().unwrap_or_default();
            }
            Event::Apply(o) => {
                let r = refs(o);
                if r.is_empty() {
                    // Every status write of every release passes here: no key is built
                    // while no release of the kind has a `dependsOn`.
                    if !s.live.is_empty() {
                        s.live.remove(&key(o));
                    }
                } else {
                    s.live.insert(key(o), r.to_vec());
                }
            }
            Event::Delete(o) => {
                s.live.remove(&key(o));
            }
        }
    }

    /// The releases of this kind that depend on `dep`.
    pub(super) fn of(&self, dep: &ReleaseKey) -> Vec<ReleaseKey> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.live
            .iter()
            .filter(|(own, refs)| opm_core::deps::depends_on(own, refs, dep))
            .map(|(own, _)| own.clone())
            .collect()
    }

    /// A watch-stream step that records each event and passes it on.
    pub(super) fn follow<K: Resource, E>(
        self: &Arc<Self>,
        refs: fn(&K) -> &[DependencyRef],
    ) -> impl FnMut(Result<Event<K>, E>) -> Result<Event<K>, E> + use<K, E> {
        let this = self.clone();
        move |item| {
            if let Ok(event) = &item {
                this.observe(event, refs);
            }
            item
        }
    }
}

#[cfg(test)]
mod tests {
    use opm_core::api::Release;
    use serde_json::json;

    use super::*;

    fn obj(name: &str, dep: Option<&str>) -> Release {
        let depends_on: Vec<_> = dep.map(|d| json!({"name": d})).into_iter().collect();
        serde_json::from_value(json!({
            "apiVersion": "releases.opmodel.dev/v1alpha1",
            "kind": "Release",
            "metadata": {"name": name, "namespace": "a"},
            "spec": {
                "sourceRef": {"kind": "OCIRepository", "name": "src"},
                "path": ".",
                "dependsOn": depends_on,
            },
        }))
        .unwrap()
    }

    fn key(name: &str) -> ReleaseKey {
        ReleaseKey {
            kind: Kind::Release,
            namespace: "a".into(),
            name: name.into(),
        }
    }

    fn feed(d: &Dependents, event: Event<Release>) {
        d.observe(&event, |r: &Release| &r.spec.common.depends_on);
    }

    #[test]
    fn follows_applies_deletes_and_relists() {
        let d = Dependents::new(Kind::Release);
        feed(&d, Event::Apply(obj("app", Some("db"))));
        feed(&d, Event::Apply(obj("db", None)));
        assert_eq!(d.of(&key("db")), vec![key("app")]);
        assert!(d.of(&key("app")).is_empty());

        // dependsOn removed: no longer a dependent.
        feed(&d, Event::Apply(obj("app", None)));
        assert!(d.of(&key("db")).is_empty());
        feed(&d, Event::Apply(obj("app", Some("db"))));
        feed(&d, Event::Delete(obj("app", Some("db"))));
        assert!(d.of(&key("db")).is_empty());

        // A relist replaces the contents only once done.
        feed(&d, Event::Apply(obj("old", Some("db"))));
        feed(&d, Event::Init);
        feed(&d, Event::InitApply(obj("new", Some("db"))));
        assert_eq!(d.of(&key("db")), vec![key("old")]);
        feed(&d, Event::InitDone);
        assert_eq!(d.of(&key("db")), vec![key("new")]);
    }
}
