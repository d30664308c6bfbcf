//! The fleet the renderer renders ahead from ([`crate::cue::render::ahead`]): the
//! ModuleRelease watch's store, each release judged by the core's
//! [`opm_core::render_ahead::render_ahead`].

use std::collections::HashMap;
use std::sync::Mutex;

use kube::runtime::reflector::Store;
use opm_core::api::ModuleRelease;
use serde_json::Value;

use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};
use crate::cue::opm::{Prefetch, PrefetchJob};
use crate::cue::render::Ahead;
use crate::effects::local::module_parts;
use crate::effects::render::Gate;
use crate::effects::runtime::Runtime;

/// Runs the OPM read-ahead ([`crate::cue::opm::Prefetch`]) as tasks of the operator's
/// runtime, in turns of its render gate. Holds the runtime weakly: the runtime owns the
/// renderer that holds this.
pub(super) struct Spawner {
    rt: std::sync::Weak<Runtime>,
}

impl Spawner {
    pub(super) fn new(rt: &std::sync::Arc<Runtime>) -> Self {
        Self {
            rt: std::sync::Arc::downgrade(rt),
        }
    }
}

impl Prefetch for Spawner {
    fn spawn(&self, job: PrefetchJob) {
        let rt = self.rt.clone();
        tokio::spawn(async move {
            let Some(rt) = rt.upgrade() else { return };
            let gate = Gate(&rt.render_gate);
            rt.local
                .opm
                .run_prefetch(&rt.local.renderer, job, &gate)
                .await;
        });
    }
}

/// ModuleReleases of the watch that may be rendered ahead.
pub(super) struct StoreAhead {
    store: Store<ModuleRelease>,
    /// The generation last offered, per release: each is offered once per generation.
    offered: Mutex<HashMap<(String, String), i64>>,
}

impl StoreAhead {
    pub(super) fn new(store: Store<ModuleRelease>) -> Self {
        Self {
            store,
            offered: Mutex::new(HashMap::new()),
        }
    }
}

impl Ahead for StoreAhead {
    fn candidates(
        &self,
        module: &ModuleRef,
        namespace: &str,
        n: usize,
    ) -> Vec<(Value, ReleaseIdentity)> {
        let fleet = self.store.state();
        let mut offered = self.offered.lock().unwrap_or_else(|p| p.into_inner());
        // Forgets releases long gone without a scan per call.
        if offered.len() > 2 * fleet.len() + 64 {
            offered.clear();
        }
        // In name order: the order the watch's first list, and so the work queue, holds
        // a namespace's releases, so what is rendered ahead is what the workers reach next.
        let mut mine: Vec<_> = fleet
            .iter()
            .filter(|mr| {
                let spec = &mr.spec.module;
                mr.metadata.namespace.as_deref() == Some(namespace)
                    && spec.path == module.path
                    && spec.version == module.version
            })
            .collect();
        mine.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut out = Vec::new();
        for mr in mine {
            if out.len() == n {
                break;
            }
            let Some(request) = opm_core::render_ahead::render_ahead(mr) else {
                continue;
            };
            let Ok((m, values, identity)) = module_parts(&request, false) else {
                continue;
            };
            let generation = mr.metadata.generation.unwrap_or(0);
            let id = (identity.namespace.clone(), identity.name.clone());
            if m.package != module.package || offered.get(&id) == Some(&generation) {
                continue;
            }
            offered.insert(id, generation);
            out.push((values, identity));
        }
        out
    }
}
