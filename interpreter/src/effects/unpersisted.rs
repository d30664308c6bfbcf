//! Failed attempts whose status could not be written (SPEC §24), kept in memory so the
//! core's backoff sees the true count.

use opm_core::{Reason, ReleaseKey, ReleaseObject};

/// Per release: the count of consecutive failed attempts not yet persisted because their
/// status write (or finalizer patch) failed. Without it every such attempt computes the
/// backoff from the same stale persisted counter, so a write that keeps failing retried
/// every 5s forever, each time re-running the dry-runs. The core still decides the delay
/// (`compute_backoff` of the counter it sees); this only feeds it the true count.
#[derive(Default)]
pub struct Unpersisted {
    counts: std::sync::Mutex<std::collections::HashMap<ReleaseKey, i64>>,
}

impl Unpersisted {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<ReleaseKey, i64>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Raises the observed `failureCounters.reconcile` to the count kept in memory.
    pub fn overlay(&self, key: &ReleaseKey, obj: &mut ReleaseObject) {
        let Some(n) = self.lock().get(key).copied() else {
            return;
        };
        let status = match obj {
            ReleaseObject::ModuleRelease(o) => o.status.get_or_insert_with(Default::default),
            ReleaseObject::Release(o) => o.status.get_or_insert_with(Default::default),
        };
        let c = &mut status.failure_counters.reconcile;
        *c = (*c).max(n);
    }

    /// After an attempt that saw `counted` failures: one that could not write its status
    /// adds one in memory; any other exit wrote (or needed no write) and clears it.
    pub fn record(&self, key: &ReleaseKey, reason: Reason, counted: i64, gone: bool) {
        let mut counts = self.lock();
        if !gone && (reason == Reason::StatusPatchFailed || reason == Reason::FinalizerFailed) {
            counts.insert(key.clone(), counted.saturating_add(1));
        } else {
            counts.remove(key);
        }
    }

    /// The count kept for `key`, if any.
    pub fn get(&self, key: &ReleaseKey) -> Option<i64> {
        self.lock().get(key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key() -> ReleaseKey {
        ReleaseKey {
            kind: opm_core::Kind::ModuleRelease,
            namespace: "a".into(),
            name: "web".into(),
        }
    }

    #[test]
    fn unpersisted_failures_count_up_until_a_write_lands() {
        let u = Unpersisted::default();
        let k = key();
        let mut obj: ReleaseObject = serde_json::from_value(serde_json::json!({
            "moduleRelease": {
                "apiVersion": "releases.opmodel.dev/v1alpha1", "kind": "ModuleRelease",
                "metadata": {"name": "web", "namespace": "a"},
                "spec": {"module": {"path": "example.com/m@v0", "version": "v0.1.0"}}
            }
        }))
        .unwrap();
        u.overlay(&k, &mut obj);
        assert!(
            obj.status().is_none(),
            "nothing kept: the object is untouched"
        );
        for n in 0..4 {
            u.record(&k, Reason::StatusPatchFailed, n, false);
            assert_eq!(u.get(&k), Some(n + 1));
        }
        u.overlay(&k, &mut obj);
        assert_eq!(obj.status().unwrap().failure_counters.reconcile, 4);
        // The backoff the core computes from it grows: 5s · 2^3.
        assert_eq!(
            opm_core::backoff::compute_backoff(4 + 1),
            Duration::from_secs(80)
        );
        u.record(&k, Reason::ReconciliationSucceeded, 4, false);
        assert_eq!(u.get(&k), None);
        u.record(&k, Reason::StatusPatchFailed, i64::MAX, false);
        assert_eq!(u.get(&k), Some(i64::MAX));
        u.record(&k, Reason::StatusPatchFailed, 3, true);
        assert_eq!(u.get(&k), None, "a gone release keeps nothing");
    }
}
