//! Things that happen to the world over time, and the watch events they cause.
//!
//! Watches follow the interpreter's predicates, the rules of [`opm_core::triggers`]: spec
//! changes (generation), deletion, a new `reconcile.opmodel.dev/requestedAt` value, any
//! annotation change on a deleting release, a source's artifact revision/digest change and
//! a dependency turning Ready re-trigger at once; a ServiceAccount appearing re-triggers the
//! releases of its namespace waiting for one, 3 s later. RBAC edits, object tampering and source
//! readiness alone do not: they are seen at the next periodic attempt.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use opm_core::api::{Condition, ReleaseStatus};
use opm_core::constants::{REQUESTED_AT_ANNOTATION, conditions};
use opm_core::object::{ReleaseKey, ReleaseObject, ResourceId};
use opm_core::triggers;

use super::{ArtifactDef, Fault, FieldPath, Grant, SourceId, World, WorldError};

/// One scheduled change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum WorldEvent {
    /// A user creates a release; it is due at once.
    CreateRelease {
        /// The release as a user would apply it; the world assigns its uid and generation.
        object: Box<ReleaseObject>,
    },
    /// An RFC 7386 merge patch to the release's spec.
    EditSpec {
        /// The release the patch is for.
        key: ReleaseKey,
        /// Merged into the spec; a patch that leaves an invalid spec is an error.
        patch: Value,
    },
    /// A user sets `spec.suspend: true`.
    Suspend {
        /// The release to suspend.
        key: ReleaseKey,
    },
    /// A user removes `spec.suspend`.
    Resume {
        /// The release to resume.
        key: ReleaseKey,
    },
    /// Sets (`value: None` removes) an annotation.
    Annotate {
        /// The release whose annotation changes.
        key: ReleaseKey,
        /// Which annotation, e.g. `opm.dev/force-delete-orphan`.
        name: String,
        /// Its new value; `None` removes it.
        value: Option<String>,
    },
    /// `reconcile.opmodel.dev/requestedAt: <token>` (SPEC §1.4).
    RequestReconcile {
        /// The release to reconcile on demand.
        key: ReleaseKey,
        /// The new annotation value, which the attempt copies into `lastHandledReconcileAt`.
        token: String,
    },
    /// A user deletes the release: it gets a `deletionTimestamp`, or goes at once without a
    /// finalizer.
    Delete {
        /// The release to delete.
        key: ReleaseKey,
    },
    /// The source now advertises this artifact (and is ready).
    NewArtifact {
        /// The source that publishes it, created when missing.
        source: SourceId,
        /// The content; its digest and url are filled in when empty.
        artifact: ArtifactDef,
    },
    /// The source's Ready turns False (its artifact is kept).
    SourceNotReady {
        /// The source whose readiness is lost.
        source: SourceId,
        /// Its Ready message, which the releases' conditions repeat.
        message: String,
    },
    /// A fault is scheduled from now on, after those already there.
    Fault {
        /// What it hits, when, and with what error.
        fault: Fault,
    },
    /// Every fault is removed.
    ClearFaults,
    /// An external release's Ready condition is set (observedGeneration = generation).
    DependencyReady {
        /// The external release whose readiness changes.
        key: ReleaseKey,
        /// Ready `True` (ReconciliationSucceeded) or `False` (Progressing).
        ready: bool,
    },
    /// A ServiceAccount appears; releases of its namespace waiting for one re-trigger soon after.
    CreateServiceAccount {
        /// The namespace it is created in, the only one whose releases may use it.
        namespace: String,
        /// The name `serviceAccountName` or `--default-service-account` refers to it by.
        name: String,
        /// What impersonating it allows, bound as it is created.
        #[serde(default)]
        grants: Vec<Grant>,
    },
    /// A ServiceAccount is deleted; its bindings stay, as in Kubernetes.
    DeleteServiceAccount {
        /// Where the account lives.
        namespace: String,
        /// Which account goes.
        name: String,
    },
    /// A binding is added for a ServiceAccount, which need not exist yet.
    Grant {
        /// The ServiceAccount's namespace, where a grant that is not cluster-wide applies.
        namespace: String,
        /// The ServiceAccount the binding is for.
        name: String,
        /// The verbs and kinds it allows, and where.
        grant: Grant,
    },
    /// Every binding of a ServiceAccount is removed; the account stays.
    RevokeGrants {
        /// Where the account lives.
        namespace: String,
        /// Which account loses its bindings.
        name: String,
    },
    /// Another manager writes one field of a managed object (`null` removes it).
    TamperObject {
        /// The managed object written to.
        id: ResourceId,
        /// The field manager the write is made as (e.g. `kubectl-edit`); it then owns the field.
        manager: String,
        /// The field written.
        field: FieldPath,
        /// Its new value; `null` removes the field.
        value: Value,
    },
    /// Someone deletes a managed object.
    DeleteObject {
        /// The object removed, with no UID precondition.
        id: ResourceId,
    },
    /// The operator process restarts: the work queue is rebuilt from a full list (every
    /// release due at once) and in-memory metrics start from zero.
    OperatorRestart,
    /// The Platform `cluster` is created, or its spec replaced (`kubectl apply`), and the
    /// operator evaluates it (SPEC §30). Turning Ready, or Ready with a new digest,
    /// re-triggers every OPM release at once.
    #[serde(alias = "platformCreate")]
    CreatePlatform {
        /// Its spec, and what evaluating it gives.
        platform: super::PlatformDef,
    },
    /// The existing Platform's spec is replaced, e.g. a catalog version bump: a new digest,
    /// so every OPM release re-renders and applies. Without a Platform, nothing changes.
    #[serde(alias = "platformChange")]
    ChangePlatform {
        /// Its new spec, and what evaluating it gives.
        platform: super::PlatformDef,
    },
    /// The Platform is deleted: OPM releases wait with `PlatformNotReady` from their next
    /// attempt on, keeping their objects.
    #[serde(alias = "platformDelete")]
    DeletePlatform,
    /// A kubeconfig Secret `namespace/name` is created or changed to point at `server`, a
    /// remote cluster (created empty the first time it is named) (SPEC §31).
    SetKubeConfig {
        /// The Secret's namespace, the releases' own.
        namespace: String,
        /// The Secret's name, as `spec.kubeConfig.secretRef.name` names it.
        name: String,
        /// The server URL of the cluster it points at.
        server: String,
    },
    /// The remote cluster `server` is cut off: every request to it fails as unreachable.
    Partition {
        /// The cluster's server URL.
        server: String,
    },
    /// The partition of `server` ends.
    Heal {
        /// The cluster's server URL.
        server: String,
    },
}

impl World {
    /// Applies `event` now. Edits of a release that no longer exists change nothing (as a
    /// `kubectl` call on a deleted object would), so histories stay valid whatever
    /// deletions they contain; a patch that makes the spec invalid is an error.
    pub fn apply_event(&mut self, event: WorldEvent) -> Result<(), WorldError> {
        self.epoch += 1;
        match self.apply_event_inner(event) {
            Err(WorldError::Edit(super::EditError::NotFound(_))) => Ok(()),
            other => other,
        }
    }

    fn apply_event_inner(&mut self, event: WorldEvent) -> Result<(), WorldError> {
        match event {
            WorldEvent::CreateRelease { object } => {
                self.create_release(*object)?;
            }
            WorldEvent::EditSpec { key, patch } => self.edit_spec(&key, &patch)?,
            WorldEvent::Suspend { key } => self.edit_spec(&key, &json!({"suspend": true}))?,
            WorldEvent::Resume { key } => self.edit_spec(&key, &json!({"suspend": null}))?,
            WorldEvent::Annotate { key, name, value } => self.annotate(&key, &name, value),
            WorldEvent::RequestReconcile { key, token } => {
                self.annotate(&key, REQUESTED_AT_ANNOTATION, Some(token))
            }
            WorldEvent::Delete { key } => self.delete_release(&key),
            WorldEvent::NewArtifact { source, artifact } => {
                self.publish(&source, artifact);
            }
            WorldEvent::SourceNotReady { source, message } => {
                self.source_not_ready(source, message)
            }
            WorldEvent::Fault { fault } => self.add_fault(fault)?,
            WorldEvent::ClearFaults => self.schedule.faults.clear(),
            WorldEvent::DependencyReady { key, ready } => self.set_external_ready(&key, ready),
            WorldEvent::CreateServiceAccount {
                namespace,
                name,
                grants,
            } => {
                self.add_service_account(&namespace, &name, grants);
            }
            WorldEvent::DeleteServiceAccount { namespace, name } => {
                self.cluster.rbac.delete_account(&namespace, &name)
            }
            WorldEvent::Grant {
                namespace,
                name,
                grant,
            } => self.cluster.rbac.grant(&namespace, &name, grant),
            WorldEvent::RevokeGrants { namespace, name } => {
                self.cluster.rbac.revoke_all(&namespace, &name)
            }
            WorldEvent::TamperObject {
                id,
                manager,
                field,
                value,
            } => self.cluster.store.write_field(&id, &manager, field, value),
            WorldEvent::DeleteObject { id } => {
                let _ = self.cluster.store.delete(&id, None);
            }
            WorldEvent::CreatePlatform { platform } => {
                self.apply_platform(&platform);
            }
            WorldEvent::ChangePlatform { platform } => {
                self.change_platform(&platform);
            }
            WorldEvent::DeletePlatform => {
                self.delete_platform();
            }
            WorldEvent::SetKubeConfig {
                namespace,
                name,
                server,
            } => self.set_kubeconfig(namespace, name, server),
            WorldEvent::Partition { server } => self.set_partition(&server, true),
            WorldEvent::Heal { server } => self.set_partition(&server, false),
            WorldEvent::OperatorRestart => self.restart_operator(),
        }
        Ok(())
    }

    /// A user deletes the release: it gets a `deletionTimestamp` (an attempt follows), or
    /// goes at once without a finalizer.
    fn delete_release(&mut self, key: &ReleaseKey) {
        let before = self.meta_of(key);
        if self.cluster.releases.delete(key, self.now) {
            if self.cluster.releases.get(key).is_some() {
                self.trigger_on_change(key, before, "deleting");
            } else {
                // Gone at once (no finalizer): no attempt follows.
                self.clear_due(key);
                self.metrics.forget(key);
            }
        }
    }

    fn source_not_ready(&mut self, source: SourceId, message: String) {
        let s = self.cluster.catalog.sources.entry(source).or_default();
        s.ready = false;
        s.message = message;
    }

    /// The operator restarts: metrics from zero, every release due at once.
    fn restart_operator(&mut self) {
        self.metrics = Default::default();
        let keys: Vec<ReleaseKey> = self.cluster.releases.keys().cloned().collect();
        for k in keys {
            self.trigger(&k, "operatorRestart");
        }
        self.platform_controller_restarted();
    }

    fn annotate(&mut self, key: &ReleaseKey, name: &str, value: Option<String>) {
        let before = self.meta_of(key);
        let current = before
            .as_ref()
            .and_then(|m| m.annotations.as_ref()?.get(name));
        if current == value.as_ref() {
            return;
        }
        if self.cluster.releases.annotate(key, name, value.as_deref()) {
            self.trigger_on_change(key, before, "annotationChanged");
        }
    }

    fn edit_spec(&mut self, key: &ReleaseKey, patch: &Value) -> Result<(), WorldError> {
        let before = self.meta_of(key);
        if self.cluster.releases.edit_spec(key, patch)? {
            self.trigger_on_change(key, before, "specChanged");
        }
        Ok(())
    }

    fn meta_of(&self, key: &ReleaseKey) -> Option<ObjectMeta> {
        self.cluster.releases.get(key).map(|o| o.meta().clone())
    }

    /// The watch predicate ([`triggers::starts_attempt`]): the release is due when its
    /// metadata changed from `before` in a way that starts an attempt.
    fn trigger_on_change(
        &mut self,
        key: &ReleaseKey,
        before: Option<ObjectMeta>,
        why: &'static str,
    ) {
        let starts = match (before, self.cluster.releases.get(key)) {
            (Some(b), Some(a)) => triggers::starts_attempt(&b, a.meta()),
            _ => false,
        };
        if starts {
            self.trigger(key, why);
        }
    }

    fn set_external_ready(&mut self, key: &ReleaseKey, ready: bool) {
        let Some(o) = self.cluster.releases.get(key) else {
            return;
        };
        let generation = o.meta().generation.unwrap_or(0);
        let was_ready = triggers::is_ready(o.status());
        let mut status: ReleaseStatus = o.status().cloned().unwrap_or_default();
        status.observed_generation = generation;
        status.conditions.retain(|c| c.type_ != conditions::READY);
        status.conditions.push(Condition {
            type_: conditions::READY.to_string(),
            status: if ready { "True" } else { "False" }.to_string(),
            reason: if ready {
                "ReconciliationSucceeded"
            } else {
                "Progressing"
            }
            .to_string(),
            message: String::new(),
            last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                self.now,
            )),
            observed_generation: generation,
        });
        let retrigger = triggers::retriggers_dependents(was_ready, Some(&status));
        self.cluster.releases.set_status(key, status);
        if retrigger {
            self.trigger_dependents(key);
        }
    }
}
