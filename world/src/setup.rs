//! Setting a world up (command mutators): namespaces, modules, artifacts, ServiceAccounts,
//! releases, faults and scheduled events.

use std::time::Duration;

use jiff::Timestamp;

use opm_core::input::SourceArtifact;
use opm_core::object::{ReleaseKey, ReleaseObject};
use opm_core::triggers;

use super::{ArtifactDef, Fault, Grant, ModuleDef, SourceId, World, WorldError, WorldEvent, add};

impl World {
    /// Creates a namespace.
    pub fn namespace(&mut self, ns: &str) -> &mut Self {
        self.epoch += 1;
        self.cluster.store.ensure_namespace(ns);
        self
    }

    /// Publishes a module version to the registry.
    pub fn add_module(&mut self, path: &str, version: &str, def: ModuleDef) -> &mut Self {
        self.epoch += 1;
        self.cluster.catalog.add_module(path, version, def);
        self
    }

    /// Stores `artifact` and makes `source` ready with it (creating the source if needed),
    /// re-triggering every release that uses the source when the artifact changed.
    pub fn publish(&mut self, source: &SourceId, artifact: ArtifactDef) -> SourceArtifact {
        self.epoch += 1;
        let adv = self.cluster.catalog.add_artifact(artifact);
        let entry = self
            .cluster
            .catalog
            .sources
            .entry(source.clone())
            .or_default();
        let changed = entry.artifact.as_ref() != Some(&adv);
        entry.ready = true;
        entry.message.clear();
        entry.artifact = Some(adv.clone());
        if changed {
            self.trigger_source_users(source, "newArtifact");
        }
        adv
    }

    /// Creates a ServiceAccount with its grants; the releases of its namespace waiting for
    /// one re-trigger [`triggers::SERVICE_ACCOUNT_SETTLE`] later, as the operator does.
    pub fn add_service_account(&mut self, ns: &str, name: &str, grants: Vec<Grant>) -> &mut Self {
        self.epoch += 1;
        self.cluster.rbac.create_account(ns, name);
        for g in grants {
            self.cluster.rbac.grant(ns, name, g);
        }
        let keys: Vec<ReleaseKey> = self
            .cluster
            .releases
            .iter()
            .filter(|(k, r)| {
                k.namespace == ns && triggers::waits_for_service_account(r.object.status())
            })
            .map(|(k, _)| k.clone())
            .collect();
        let at = add(self.now, triggers::SERVICE_ACCOUNT_SETTLE);
        for k in keys {
            self.trigger_at(&k, at, "serviceAccountCreated");
        }
        self
    }

    /// Creates a release (due at once). Its namespace is created too.
    pub fn create_release(&mut self, object: ReleaseObject) -> Result<ReleaseKey, WorldError> {
        self.epoch += 1;
        let ns = object.meta().namespace.clone().unwrap_or_default();
        self.cluster.store.ensure_namespace(&ns);
        let uid = self.schedule.rng.uuid();
        let key = self.cluster.releases.create(object, false, uid, self.now)?;
        self.trigger(&key, "created");
        Ok(key)
    }

    /// A release someone else reconciles, only read by dependency checks.
    pub fn add_external_release(
        &mut self,
        object: ReleaseObject,
    ) -> Result<ReleaseKey, WorldError> {
        self.epoch += 1;
        let uid = self.schedule.rng.uuid();
        Ok(self.cluster.releases.create(object, true, uid, self.now)?)
    }

    /// Schedules a fault; refused when its error cannot hit that effect kind.
    pub fn add_fault(&mut self, fault: Fault) -> Result<(), WorldError> {
        self.epoch += 1;
        Ok(self.schedule.faults.add(fault)?)
    }

    /// Schedules `event` at `at` (applied before attempts due at the same time).
    pub fn schedule(&mut self, at: Timestamp, event: WorldEvent) {
        self.schedule
            .events
            .insert((at, self.schedule.next_seq), event);
        self.schedule.next_seq += 1;
    }

    /// Schedules `event` at now + `after`.
    pub fn schedule_after(&mut self, after: Duration, event: WorldEvent) {
        let at = add(self.now, after);
        self.schedule(at, event);
    }
}
