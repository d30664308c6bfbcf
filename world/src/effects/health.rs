//! `AssessHealth`: each object with the status its controller would have written by now
//! (SPEC §26), and the `dependsOn` objects' reads (SPEC §32).

use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

use opm_core::effect::{HealthTarget, Impersonation};
use opm_core::input::{ApiError, HealthObject, InputKind};
use opm_core::object::ResourceId;

use crate::add;
use crate::cluster::Cluster;
use crate::health::key;
use crate::rbac::Verb;

impl Cluster {
    /// Called for every object an apply wrote: its rollout starts again.
    pub(crate) fn note_applied(&mut self, id: &ResourceId, now: Timestamp) {
        self.applied_at.insert(key(id), now);
    }

    pub(crate) fn read_health(
        &self,
        targets: &[HealthTarget],
        identity: Option<&Impersonation>,
        api_err: Option<ApiError>,
        now: Timestamp,
    ) -> InputKind {
        let mut objects = Vec::with_capacity(targets.len());
        for (i, t) in targets.iter().enumerate() {
            let result = match (&api_err, i) {
                (Some(e), 0) => Err(e.clone()),
                _ => self.authorize(identity, Verb::Get, &t.id).map(|()| {
                    self.store
                        .get(&t.id)
                        .map(|o| self.with_status(&t.id, o.manifest(), now))
                }),
            };
            objects.push(HealthObject {
                id: t.id.clone(),
                result,
                pods: Vec::new(),
            });
        }
        InputKind::HealthRead { objects }
    }

    /// Each `dependsOn` object (SPEC §32) as `identity` reads it: its JSON with the status
    /// its controller would have written by now, `Ok(None)` when absent.
    pub(crate) fn read_objects(
        &self,
        ids: &[ResourceId],
        identity: Option<&Impersonation>,
        now: Timestamp,
    ) -> Vec<HealthObject> {
        ids.iter()
            .map(|id| HealthObject {
                id: id.clone(),
                result: self.authorize(identity, Verb::Get, id).map(|()| {
                    self.store
                        .get(id)
                        .map(|o| self.with_status(id, o.manifest(), now))
                }),
                pods: Vec::new(),
            })
            .collect()
    }

    /// Whether the object's rollout has come to its end (done or failed) by now: from then
    /// on its health read no longer changes with time, only with a new apply.
    pub(crate) fn rollout_due(&self, id: &ResourceId, now: Timestamp) -> bool {
        let after_secs = self.rollouts.get(&id.name).map_or(0, |r| r.after_secs);
        let since = self
            .applied_at
            .get(id as &dyn crate::store::KeyParts)
            .copied()
            .unwrap_or(Timestamp::MIN);
        add(since, Duration::from_secs(after_secs)) <= now
    }

    /// The object with the status its controller would have written by now.
    fn with_status(&self, id: &ResourceId, mut obj: Value, now: Timestamp) -> Value {
        let rollout = self.rollouts.get(&id.name).cloned().unwrap_or_default();
        let due = self.rollout_due(id, now);
        let (done, failed) = (due && !rollout.fails, due && rollout.fails);
        let replicas = obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let have = if done { replicas } else { 0 };
        let status = match (id.group.as_str(), id.kind.as_str()) {
            ("apps", "Deployment") => {
                let progressing = if failed {
                    json!({"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                           "message": format!("ReplicaSet \"{}-sim\" has timed out progressing.", id.name)})
                } else {
                    json!({"type": "Progressing", "status": "True",
                           "reason": if done { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" }})
                };
                json!({"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                       "readyReplicas": have, "availableReplicas": have,
                       "conditions": [{"type": "Available", "status": if done { "True" } else { "False" }}, progressing]})
            }
            ("apps", "StatefulSet") => json!({"observedGeneration": 1, "replicas": replicas,
                "readyReplicas": have, "updatedReplicas": replicas, "currentRevision": "r1", "updateRevision": "r1"}),
            ("apps", "DaemonSet") => json!({"observedGeneration": 1, "desiredNumberScheduled": 1,
                "currentNumberScheduled": 1, "updatedNumberScheduled": 1,
                "numberAvailable": i64::from(done), "numberReady": i64::from(done)}),
            ("apps", "ReplicaSet") => json!({"observedGeneration": 1, "replicas": replicas,
                "fullyLabeledReplicas": replicas, "readyReplicas": have, "availableReplicas": have}),
            // A suspended Job runs nothing (SPEC §32 `pre-delete`): resuming it starts its
            // rollout clock (the executor notes it as applied).
            ("batch", "Job") if obj.pointer("/spec/suspend") == Some(&json!(true)) => {
                json!({"conditions": [{"type": "Suspended", "status": "True"}]})
            }
            ("batch", "Job") => {
                let conds = if failed {
                    json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                            "message": "Job has reached the specified backoff limit"}])
                } else if done {
                    json!([{"type": "Complete", "status": "True"}])
                } else {
                    json!([])
                };
                let started = self
                    .applied_at
                    .get(id as &dyn crate::store::KeyParts)
                    .map(|t| t.to_string());
                json!({"active": i64::from(!due), "conditions": conds, "startTime": started})
            }
            ("", "Pod") => {
                if failed {
                    json!({"phase": "Running", "containerStatuses": [{"name": "main",
                        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off restarting failed container"}}}]})
                } else {
                    json!({"phase": if done { "Running" } else { "Pending" },
                           "conditions": [{"type": "Ready", "status": if done { "True" } else { "False" }}]})
                }
            }
            ("", "PersistentVolumeClaim") => {
                json!({"phase": if done { "Bound" } else { "Pending" }})
            }
            ("", "Service") if done => json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
            ("apiextensions.k8s.io", "CustomResourceDefinition") => json!({"conditions": [
                {"type": "Established", "status": if done { "True" } else { "False" }}]}),
            _ => return obj,
        };
        if let Some(m) = obj.as_object_mut() {
            if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("generation".into(), json!(1));
            }
            m.insert("status".into(), status);
        }
        obj
    }
}
