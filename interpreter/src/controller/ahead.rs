//! The fleet the renderer renders ahead from ([`crate::cue::render::ahead`]): the
//! ModuleRelease watch's store, each release judged by the core's
//! [`opm_core::render_ahead::render_ahead`].

use std::collections::HashMap;
use std::sync::Mutex;

use kube::runtime::reflector::Store;
use opm_core::api::ModuleRelease;
use serde_json::Value;

use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};
use crate::cue::render::Ahead;
use crate::effects::local::module_parts;

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
        let mut out = Vec::new();
        for mr in &fleet {
            if out.len() == n {
                break;
            }
            let spec = &mr.spec.module;
            if mr.metadata.namespace.as_deref() != Some(namespace)
                || spec.path != module.path
                || spec.version != module.version
            {
                continue;
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
