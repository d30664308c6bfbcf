//! Health in the simulated world (SPEC §26): each object reports the status its controller
//! would write. By default a workload is rolled out as soon as it is applied (so scenarios
//! without health faults converge as before); [`World::simulate_rollout`] makes an object's
//! rollout take a while, or fail, so scenarios show waits, fail-fast and timeouts.

use serde::{Deserialize, Serialize};

use opm_core::object::ResourceId;

use super::World;

/// How one simulated object rolls out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SimRollout {
    /// Seconds from its last apply to healthy.
    #[serde(default)]
    pub after_secs: u64,
    /// Never healthy: the workload fails (a Deployment past its progress deadline, a Job
    /// past its backoff limit, a crash-looping Pod) once `after` has passed.
    #[serde(default)]
    pub fails: bool,
}

pub(crate) fn key(id: &ResourceId) -> (String, String, String, String) {
    (
        id.group.clone(),
        id.kind.clone(),
        id.namespace.clone(),
        id.name.clone(),
    )
}

impl World {
    /// Makes the object named `name` (any kind) roll out `after_secs` after each apply, or
    /// fail then.
    pub fn simulate_rollout(&mut self, name: &str, rollout: SimRollout) {
        self.epoch += 1;
        self.cluster.rollouts.insert(name.to_string(), rollout);
    }
}
