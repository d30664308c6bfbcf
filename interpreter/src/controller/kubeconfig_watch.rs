//! Re-triggers releases when the kubeconfig Secret they name (`spec.kubeConfig.secretRef`,
//! SPEC §31) appears, changes or goes: a missing Secret is a stall that its creation ends,
//! and a changed one moves the release to its new cluster at once.
//!
//! One metadata-only watch per referenced Secret (`fieldSelector=metadata.name=<name>` in
//! the release's namespace), opened as the operator, which reads these Secrets anyway:
//! nothing is watched when no release names a kubeconfig, no Secret data arrives through
//! the watch, and an unreferenced Secret is never seen. The index is rebuilt from the
//! release stores every [`REFRESH`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use opm_core::api::ReleaseStatus;
use opm_core::constants::conditions as ct;

use super::context::Ctx;

/// How often the index is rebuilt (bounds how late a new reference's watch opens).
const REFRESH: Duration = Duration::from_secs(1);

/// `(namespace, name)` of a kubeconfig Secret.
type SecretKey = (String, String);

/// Keeps one watch per referenced Secret until aborted.
pub(super) async fn run(ctx: Arc<Ctx>) {
    let mut watches: BTreeMap<SecretKey, tokio::task::JoinHandle<()>> = BTreeMap::new();
    loop {
        let wanted = referenced(&ctx);
        watches.retain(|k, task| {
            let keep = wanted.contains(k) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for key in wanted {
            if let std::collections::btree_map::Entry::Vacant(slot) = watches.entry(key) {
                let task = tokio::spawn(watch_one(ctx.clone(), slot.key().clone()));
                slot.insert(task);
            }
        }
        tokio::time::sleep(REFRESH).await;
    }
}

fn secret_of(ns: Option<&String>, common: &opm_core::api::ReleaseCommon) -> Option<SecretKey> {
    let kc = common.kube_config.as_ref()?;
    Some((ns.cloned().unwrap_or_default(), kc.secret_ref.name.clone()))
}

fn referenced(ctx: &Ctx) -> BTreeSet<SecretKey> {
    let mrs = ctx.mr_store.state();
    let rels = ctx.rel_store.state();
    mrs.iter()
        .filter_map(|m| secret_of(m.metadata.namespace.as_ref(), &m.spec.common))
        .chain(
            rels.iter()
                .filter_map(|r| secret_of(r.metadata.namespace.as_ref(), &r.spec.common)),
        )
        .collect()
}

/// Stalled on its kubeconfig: the first listing of a Secret created between the release's
/// read and the watch's start re-triggers it.
fn waits_for_kubeconfig(status: Option<&ReleaseStatus>) -> bool {
    status.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == ct::READY && c.status != "True" && c.reason == "InvalidKubeConfig")
    })
}

/// Sends every release naming `key` (only those waiting on it, when `only_waiting`).
fn trigger(ctx: &Ctx, key: &SecretKey, only_waiting: bool) {
    for mr in ctx.mr_store.state() {
        if secret_of(mr.metadata.namespace.as_ref(), &mr.spec.common).as_ref() == Some(key)
            && (!only_waiting || waits_for_kubeconfig(mr.status.as_ref()))
        {
            let _ = ctx.mr_tx.unbounded_send(ObjectRef::from_obj(&*mr));
        }
    }
    for rel in ctx.rel_store.state() {
        if secret_of(rel.metadata.namespace.as_ref(), &rel.spec.common).as_ref() == Some(key)
            && (!only_waiting || waits_for_kubeconfig(rel.status.as_ref()))
        {
            let _ = ctx.rel_tx.unbounded_send(ObjectRef::from_obj(&*rel));
        }
    }
}

async fn watch_one(ctx: Arc<Ctx>, key: SecretKey) {
    let api = Api::<PartialObjectMeta<Secret>>::namespaced(ctx.rt.clients.operator(), &key.0);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", key.1));
    let mut events = watcher::watcher(api, config).default_backoff().boxed();
    let seen: Mutex<Option<String>> = Mutex::new(None);
    let mut listed: Option<String> = None;
    while let Some(event) = events.next().await {
        let version = match event {
            Ok(Event::Init) => {
                listed = None;
                continue;
            }
            Ok(Event::InitApply(o)) => {
                listed = o.metadata.resource_version;
                continue;
            }
            Ok(Event::InitDone) => {
                let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                // The first listing is compared with what the releases' last read saw (a
                // change between that read and this watch's start); a relist after a gap,
                // with what this watch saw before it.
                let before = match s.as_ref() {
                    Some(v) => Some(v.clone()),
                    None => ctx.rt.clusters.read_version(&key.0, &key.1),
                };
                let now = listed.clone().unwrap_or_default();
                *s = Some(now.clone());
                drop(s);
                match before {
                    Some(v) if v != now => trigger(&ctx, &key, false),
                    Some(_) => {}
                    // Never read (or missing when read): only releases stalled on it.
                    None => trigger(&ctx, &key, true),
                }
                continue;
            }
            Ok(Event::Apply(o)) => o.metadata.resource_version.unwrap_or_default(),
            Ok(Event::Delete(_)) => String::new(),
            Err(e) => {
                tracing::debug!(error = %e, secret = %key.1, "kubeconfig Secret watch failed; retrying");
                continue;
            }
        };
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        if s.as_deref() != Some(version.as_str()) {
            *s = Some(version);
            drop(s);
            trigger(&ctx, &key, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opm_core::api::Condition;

    #[test]
    fn only_a_release_stalled_on_its_kubeconfig_waits_for_it() {
        let status = |reason: &str, s: &str| ReleaseStatus {
            conditions: vec![Condition {
                type_: ct::READY.into(),
                status: s.into(),
                reason: reason.into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(waits_for_kubeconfig(Some(&status(
            "InvalidKubeConfig",
            "False"
        ))));
        assert!(!waits_for_kubeconfig(Some(&status("ApplyFailed", "False"))));
        assert!(!waits_for_kubeconfig(Some(&status(
            "ReconciliationSucceeded",
            "True"
        ))));
        assert!(!waits_for_kubeconfig(None));
    }
}
