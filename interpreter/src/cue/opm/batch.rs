//! Batched OPM renders (SPEC §30: "caching and batching key on the module version and the
//! Platform digest"): concurrent renders of one module version through one Platform share
//! one `cue export` of LAYOUT.md's (a′) package ([`super::layout::batch_files`]); core, the
//! module, the platform package and the catalogs load once (LAYOUT.md: about 13 ms of CPU a
//! member against about 30 ms a single render).
//!
//! The first release to arrive leads: it waits for a fair render turn, then takes every
//! release that joined meanwhile (at most `max_batch`). A batch that fails in any way
//! answers each member "render alone": each then renders alone in a turn of its own and gets
//! its own answer, so a bad release never decides another's outcome.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opm_core::opm::platform::Normalised;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{Opm, OpmError, export, layout, read};
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};
use crate::cue::render::{RenderGate, RenderKey, Rendered, Renderer};

/// What must be equal to share a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct BatchKey {
    /// A batch holds one namespace (as plain batches do): it runs in that namespace's
    /// render turn, and no other tenant's release rides in it or can break it.
    pub(super) namespace: String,
    module: String,
    version: String,
    /// The Platform's digest.
    pub(super) platform: String,
    credentials: Option<String>,
}

#[cfg(test)]
impl BatchKey {
    pub(super) fn for_tests(namespace: &str) -> Self {
        Self {
            namespace: namespace.into(),
            module: "example.com/m@v1".into(),
            version: "v1.0.0".into(),
            platform: "p".into(),
            credentials: None,
        }
    }
}

impl BatchKey {
    fn new(
        namespace: &str,
        module: &ModuleRef,
        platform_digest: &str,
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Self {
        Self {
            namespace: namespace.to_owned(),
            module: module.path.clone(),
            version: module.version.clone(),
            platform: platform_digest.to_owned(),
            credentials: credentials.map(|(d, _)| d.clone()),
        }
    }
}

pub(super) struct Member {
    values: Value,
    identity: ReleaseIdentity,
    key: RenderKey,
    reply: oneshot::Sender<Reply>,
}

impl Member {
    /// A member rendering `values` for `identity`, and where its reply arrives.
    fn new(
        values: &Value,
        identity: &ReleaseIdentity,
        key: &RenderKey,
    ) -> (Self, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        let me = Member {
            values: values.clone(),
            identity: identity.clone(),
            key: key.clone(),
            reply: tx,
        };
        (me, rx)
    }
}

/// The releases already in a batch: its leader, then the others.
fn taken<'a>(leader: &'a ReleaseIdentity, others: &'a [Member]) -> Vec<&'a ReleaseIdentity> {
    std::iter::once(leader)
        .chain(others.iter().map(|m| &m.identity))
        .collect()
}

enum Reply {
    Done(Result<Arc<Rendered>, OpmError>),
    Alone,
}

/// One open batch: members joined so far.
pub(super) struct Open {
    id: u64,
    members: Vec<Member>,
}

/// The open batches by key.
#[derive(Default)]
pub(super) struct Batches {
    open: Mutex<HashMap<BatchKey, Arc<Mutex<Open>>>>,
    next: std::sync::atomic::AtomicU64,
    /// Render keys of releases taken ahead into a batch that failed: never taken ahead
    /// again (their own attempts render them alone), so one bad release breaks one batch.
    no_ahead: Mutex<std::collections::HashSet<RenderKey>>,
}

/// Most keys remembered in [`Batches::no_ahead`]; past it the set starts over.
const NO_AHEAD_CAPACITY: usize = 4096;

/// A release rendered ahead of its attempt ([`crate::cue::render::Ahead`]).
pub(super) struct AheadMember {
    pub(super) values: Value,
    pub(super) identity: ReleaseIdentity,
    pub(super) key: RenderKey,
}

enum Role {
    Leader(Arc<Mutex<Open>>, u64, BatchKey),
    Follower(oneshot::Receiver<Reply>),
}

impl Batches {
    fn join(&self, key: BatchKey, member: Member, max: usize) -> Role {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(batch) = open.get(&key).cloned() {
            let mut b = batch.lock().unwrap_or_else(|p| p.into_inner());
            let (tx, rx) = oneshot::channel();
            b.members.push(Member {
                reply: tx,
                ..member
            });
            if b.members.len() >= max {
                // Full: later arrivals open a new batch; the leader still takes these.
                open.remove(&key);
            }
            return Role::Follower(rx);
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let batch = Arc::new(Mutex::new(Open {
            id,
            members: vec![member],
        }));
        open.insert(key.clone(), batch.clone());
        Role::Leader(batch, id, key)
    }

    /// Closes the batch to newcomers and takes its members (the leader first).
    fn seal(&self, batch: &Arc<Mutex<Open>>, id: u64, key: &BatchKey) -> Vec<Member> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open
            .get(key)
            .is_some_and(|b| b.lock().unwrap_or_else(|p| p.into_inner()).id == id)
        {
            open.remove(key);
        }
        drop(open);
        std::mem::take(&mut batch.lock().unwrap_or_else(|p| p.into_inner()).members)
    }
}

impl Opm {
    /// [`Opm::render_module`] in fair turns of `gate`, batched with concurrent renders of
    /// the same namespace, module version, Platform and credentials.
    #[allow(clippy::too_many_arguments)]
    pub async fn render_module_fair<G: RenderGate>(
        &self,
        renderer: &Renderer,
        module: &ModuleRef,
        facts: &super::ModuleFacts,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<&(String, Vec<u8>)>,
        gate: &G,
        namespace: &str,
    ) -> Result<(Arc<Rendered>, String), OpmError> {
        let (platform, digest) = self.ready().map_err(OpmError::PlatformNotReady)?;
        let key = super::opm_key(renderer, module, values, identity, &digest, credentials).await?;
        let bkey = BatchKey::new(namespace, module, &digest, credentials);
        if let Some(hit) = self.cached(renderer, module, &bkey, &key) {
            return Ok((hit?, digest));
        }
        let max = renderer.config().max_batch;
        let alone = || async {
            let _turn = gate.turn(namespace).await;
            self.render_module(renderer, module, facts, values, identity, credentials)
                .await
        };
        if max <= 1 || !matches!(values, Value::Null | Value::Object(_)) {
            return alone().await;
        }
        let (me, _leader_rx) = Member::new(values, identity, &key);
        let (batch, id, bkey) = match self.batches.join(bkey, me, max) {
            Role::Follower(rx) => {
                return match rx.await {
                    Ok(Reply::Done(r)) => r.map(|r| (r, digest)),
                    // The batch failed, or its leader went away: alone.
                    Ok(Reply::Alone) | Err(_) => alone().await,
                };
            }
            Role::Leader(batch, id, bkey) => (batch, id, bkey),
        };
        let _turn = gate.turn(namespace).await;
        let mut members = self.batches.seal(&batch, id, &bkey);
        let others = members.split_off(1.min(members.len()));
        // Room left: releases of this module version that will need this render soon
        // (credentials belong to the attempts holding them: nothing rides along).
        let (ahead, more) = match credentials {
            None => {
                let taken = taken(identity, &others);
                let room = max.saturating_sub(taken.len());
                self.ahead_members(renderer, module, namespace, &digest, &taken, room)
                    .await
            }
            Some(_) => (Vec::new(), false),
        };
        if others.is_empty() && ahead.is_empty() {
            return self
                .render_module(renderer, module, facts, values, identity, credentials)
                .await;
        }
        let inputs: Vec<(&Value, &ReleaseIdentity)> = std::iter::once((values, identity))
            .chain(others.iter().map(|m| (&m.values, &m.identity)))
            .chain(ahead.iter().map(|a| (&a.values, &a.identity)))
            .collect();
        let Some(all) = export_members(renderer, module, &platform, &inputs, credentials).await
        else {
            for m in others {
                let _ = m.reply.send(Reply::Alone);
            }
            self.refuse_ahead(ahead);
            tracing::debug!(module = %module.path, "OPM batch failed; each member renders alone");
            return self
                .render_module(renderer, module, facts, values, identity, credentials)
                .await;
        };
        let (mine, kept) = share_out(renderer, all, (key, identity), others, ahead);
        if credentials.is_none() {
            self.leads.kept(&bkey, kept, more);
            self.read_ahead(module, &bkey);
        }
        match mine {
            Reply::Done(r) => r.map(|r| (r, digest)),
            Reply::Alone => {
                self.render_module(renderer, module, facts, values, identity, credentials)
                    .await
            }
        }
    }
}

/// The batch's export, by member field (`None`: the batch failed in some way).
pub(super) async fn export_members(
    renderer: &Renderer,
    module: &ModuleRef,
    platform: &Normalised,
    inputs: &[(&Value, &ReleaseIdentity)],
    credentials: Option<&(String, Vec<u8>)>,
) -> Option<serde_json::Map<String, Value>> {
    let outcome = match layout::batch_files(module, platform, inputs) {
        Some(files) => export(renderer, &files, credentials).await.ok(),
        None => None,
    };
    let split = outcome
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|mut v| v.get_mut("members").map(Value::take));
    match split {
        Some(Value::Object(all)) => Some(all),
        _ => None,
    }
}

/// Hands each member its part of the batch's export `all`, caches the parts of the
/// releases taken ahead that the core accepts, and returns the leader's part (`mine`)
/// with the keys and sizes of those cached.
fn share_out(
    renderer: &Renderer,
    mut all: serde_json::Map<String, Value>,
    mine: (RenderKey, &ReleaseIdentity),
    others: Vec<Member>,
    ahead: Vec<AheadMember>,
) -> (Reply, Vec<(RenderKey, u64)>) {
    renderer.note_batch(others.len() as u64 + 1);
    let mut answer = |i: usize, key: RenderKey, identity: &ReleaseIdentity| match all
        .remove(&layout::batch_field(i))
    {
        Some(v) => match serde_json::to_vec(&v) {
            Ok(bytes) => Reply::Done(read(renderer, key, &bytes, identity)),
            Err(_) => Reply::Alone,
        },
        None => Reply::Alone,
    };
    let mine = answer(0, mine.0, mine.1);
    let n_others = others.len();
    for (i, m) in others.into_iter().enumerate() {
        let reply = answer(i + 1, m.key, &m.identity);
        let _ = m.reply.send(reply);
    }
    let kept = keep_ahead(renderer, &mut all, 1 + n_others, ahead);
    (mine, kept)
}

/// Caches the parts of `all` of the releases taken ahead (the batch's members from
/// `first` on) that the core accepts, each under the release's own key; their keys and
/// sizes.
pub(super) fn keep_ahead(
    renderer: &Renderer,
    all: &mut serde_json::Map<String, Value>,
    first: usize,
    ahead: Vec<AheadMember>,
) -> Vec<(RenderKey, u64)> {
    let mut kept = Vec::new();
    for (i, a) in ahead.into_iter().enumerate() {
        let Some(bytes) = all
            .remove(&layout::batch_field(first + i))
            .and_then(|v| serde_json::to_vec(&v).ok())
        else {
            continue;
        };
        if let Ok(r) = read(renderer, a.key.clone(), &bytes, &a.identity) {
            kept.push((a.key, r.bytes));
        }
    }
    renderer.note_ahead(kept.len() as u64);
    kept
}

impl Opm {
    /// Releases taken ahead into a batch that failed are not taken ahead again.
    pub(super) fn refuse_ahead(&self, ahead: Vec<AheadMember>) {
        let mut no = self
            .batches
            .no_ahead
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if no.len() + ahead.len() > NO_AHEAD_CAPACITY {
            no.clear();
        }
        no.extend(ahead.into_iter().map(|a| a.key));
    }

    /// Up to `room` releases of `module` to render ahead through the Platform of `digest`:
    /// not cached, not in the batch, not known to break one; and whether they filled the
    /// room (more may wait: the prefetch module).
    pub(super) async fn ahead_members(
        &self,
        renderer: &Renderer,
        module: &ModuleRef,
        namespace: &str,
        digest: &str,
        taken: &[&ReleaseIdentity],
        room: usize,
    ) -> (Vec<AheadMember>, bool) {
        let Some(source) = renderer.ahead_source() else {
            return (Vec::new(), false);
        };
        if room == 0 {
            return (Vec::new(), false);
        }
        let mut out = Vec::new();
        let offered = source.candidates(module, namespace, room);
        let more = offered.len() == room;
        for (values, identity) in offered {
            if taken.contains(&&identity) || !matches!(values, Value::Object(_)) {
                continue;
            }
            let Ok(key) = super::opm_key(renderer, module, &values, &identity, digest, None).await
            else {
                continue;
            };
            let refused = self
                .batches
                .no_ahead
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&key);
            if refused || renderer.is_cached(&key) {
                continue;
            }
            out.push(AheadMember {
                values,
                identity,
                key,
            });
        }
        (out, more)
    }
}
