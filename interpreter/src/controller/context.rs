//! What the controllers' reconcilers and their extra watches share, in a module of its own
//! so the watches need not reach back into the controllers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use std::future::Future;
use std::pin::Pin;

use futures::channel::mpsc;
use futures::future::Shared;
use kube::runtime::reflector::{ObjectRef, Store};
use opm_core::ReleaseKey;
use opm_core::api::{ModuleRelease, Release};

use crate::controller::driver::Runtime;
use crate::ops::admission::Admission;

/// A shutdown signal both controllers and the trigger tasks can wait on.
pub type Shutdown = Shared<Pin<Box<dyn Future<Output = ()> + Send + Sync>>>;

/// What reconcilers and the extra watches share.
pub(super) struct Ctx {
    pub(super) rt: Arc<Runtime>,
    pub(super) mr_store: Store<ModuleRelease>,
    pub(super) rel_store: Store<Release>,
    pub(super) mr_tx: mpsc::UnboundedSender<ObjectRef<ModuleRelease>>,
    pub(super) rel_tx: mpsc::UnboundedSender<ObjectRef<Release>>,
    /// Per-kind fair gates (`--concurrency`, `--max-concurrent-per-namespace`).
    pub(super) mr_gate: Arc<Admission>,
    pub(super) rel_gate: Arc<Admission>,
    /// Per-kind indexes of the releases with a `dependsOn` (what a Ready re-triggers).
    pub(super) mr_dependents: Arc<super::dependents::Dependents>,
    pub(super) rel_dependents: Arc<super::dependents::Dependents>,
    /// Attempts that failed outside the core, consecutively, per release: drives the
    /// backoff of `error_policy`.
    pub(super) errors: Mutex<HashMap<ReleaseKey, i64>>,
}

/// Feeds a watch stream's items to the `/healthz` heartbeats.
pub(super) fn heartbeat<T, E>(
    health: &Arc<crate::ops::health::Health>,
    name: &'static str,
) -> impl FnMut(Result<T, E>) -> Result<T, E> + use<T, E> {
    let health = health.clone();
    health.watch_started(name);
    move |item| {
        health.watch_item(name, item.is_ok());
        item
    }
}
