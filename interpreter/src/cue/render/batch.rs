//! Batched module renders (issue 18): concurrent renders of one module version share one
//! `cue export` of one synthesised package holding each release as its own field
//! ([`crate::cue::module_ref::synthesise_batch`]), and the output is split back per
//! release ([`super::split`]). Most of a ModuleRelease's `cue` run is process start and
//! module loading (bench/README.md, `bench/cue-timing`: 10 ms alone, 1.5 ms a release in a
//! batch of ten); batching is an execution detail: each release gets exactly the bytes its
//! own run gives.
//!
//! A bad release never blocks another's render: a batch that fails in any way (a `cue`
//! error, its deadline, the output cap, the memory limit, an output that does not split)
//! answers every member "render alone", and each then renders alone in a turn of its own,
//! getting its own error. A release that fails alone after its batch failed renders alone
//! for [`SOLO_FOR`] (or until its inputs change: another render key), so its retries do
//! not break the batches of others; then it gets one more chance in a batch.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::RenderGate;
use super::split::split_batch;
use super::{RenderError, RenderKey, Rendered};
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity, synthesise_batch, synthesise_release};

/// How long a release that failed alone after its batch failed renders alone.
pub const SOLO_FOR: Duration = Duration::from_secs(10 * 60);
/// Releases remembered as rendering alone; past it the soonest to expire go first.
const SOLO_CAPACITY: usize = 1024;

/// What must be equal for releases to share a `cue` run (the registry and the `cue`
/// binary are the renderer's own).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct BatchKey {
    pub path: String,
    pub version: String,
    pub package: String,
    /// Digest of the `module.secretRef` Docker config: one batch pulls with one.
    pub credentials: Option<String>,
    /// The releases' namespace (issue 31 item 9): a batch runs in one namespace's render
    /// turn, so it holds only that namespace's releases; and a release whose values break
    /// the run costs a failed batch only to releases of its own namespace, never another
    /// tenant's.
    pub namespace: String,
}

impl BatchKey {
    pub(super) fn new(module: &ModuleRef, credentials: Option<&str>, namespace: &str) -> Self {
        Self {
            path: module.path.clone(),
            version: module.version.clone(),
            package: module.package.clone(),
            credentials: credentials.map(str::to_owned),
            namespace: namespace.to_owned(),
        }
    }
}

/// One release waiting in a batch.
pub(super) struct Member {
    pub values: Value,
    pub identity: ReleaseIdentity,
    /// Its attempt's deadline: the batch ends before the earliest of them.
    pub deadline: Instant,
    pub reply: oneshot::Sender<Reply>,
    /// Told when another member seals the batch: it then withdraws its wait for a turn.
    pub sealed: Option<oneshot::Sender<()>>,
}

/// A member's answer from its batch.
pub(super) enum Reply {
    /// Its own export (or the error of a run that was its alone).
    Done(Result<Vec<u8>, RenderError>),
    /// The batch failed: render alone.
    Alone,
}

/// Open batches, and the releases that render alone.
#[derive(Default)]
pub(super) struct Batches {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Batches not yet run, by id.
    open: HashMap<u64, Vec<Member>>,
    /// The open batch of each key that still takes members.
    joinable: HashMap<BatchKey, u64>,
    next_id: u64,
    /// Render keys that render alone, until when.
    solo: HashMap<RenderKey, Instant>,
}

impl Batches {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `member` to the open batch of `key` (a new one when there is none or it has
    /// `max` members) and says which.
    pub(super) fn join(&self, key: BatchKey, member: Member, max: usize) -> u64 {
        let mut s = self.lock();
        let current = s.joinable.get(&key).copied();
        let id = match current {
            Some(id) if s.open.get(&id).is_some_and(|m| m.len() < max) => id,
            _ => {
                let id = s.next_id;
                s.next_id += 1;
                s.open.insert(id, Vec::new());
                s.joinable.insert(key, id);
                id
            }
        };
        let members = s.open.entry(id).or_default();
        // Members whose attempts ended while waiting need no render.
        members.retain(|m| !m.reply.is_closed());
        members.push(member);
        id
    }

    /// Closes batch `id` and hands its members to the caller, who runs it; `None` when
    /// another member already did.
    pub(super) fn seal(&self, id: u64) -> Option<Vec<Member>> {
        let mut s = self.lock();
        let mut members = s.open.remove(&id)?;
        s.joinable.retain(|_, open| *open != id);
        drop(s);
        for m in &mut members {
            if let Some(sealed) = m.sealed.take() {
                let _ = sealed.send(());
            }
        }
        Some(members)
    }

    /// Whether `key` renders alone now.
    pub(super) fn is_solo(&self, key: &RenderKey, now: Instant) -> bool {
        let mut s = self.lock();
        match s.solo.get(key) {
            Some(until) if *until > now => true,
            Some(_) => {
                s.solo.remove(key);
                false
            }
            None => false,
        }
    }

    /// `key` renders alone for [`SOLO_FOR`] from `now`.
    pub(super) fn set_solo(&self, key: RenderKey, now: Instant) {
        let mut s = self.lock();
        if s.solo.len() >= SOLO_CAPACITY {
            s.solo.retain(|_, until| *until > now);
        }
        if s.solo.len() >= SOLO_CAPACITY
            && let Some(soonest) = s
                .solo
                .iter()
                .min_by_key(|(_, u)| **u)
                .map(|(k, _)| k.clone())
        {
            s.solo.remove(&soonest);
        }
        s.solo.insert(key, now + SOLO_FOR);
    }
}

/// Whether a release that failed alone with `e` keeps out of batches: its own inputs
/// failed; an unreachable registry or a local fault are nobody's release's doing.
pub(super) fn keeps_out(e: &RenderError) -> bool {
    !matches!(
        e,
        RenderError::RegistryUnreachable { .. } | RenderError::Io { .. }
    )
}

/// The `cue` deadline of a batch: a quarter of the render timeout (`--render-timeout`,
/// 15 s by default), cut to half the shortest time any member's attempt has left. So a
/// batch ends before every member's own deadline and, should it fail, leaves each at least
/// half its remaining time to render alone; and a release that makes its batch slow (a
/// CPU-heavy package) delays the others at most that long, once: then it fails alone and
/// renders alone. A batch of small releases takes milliseconds; one that needs a quarter
/// of a single run's deadline is cheaper as single runs.
pub(super) fn batch_timeout(timeout: Duration, members: &[Member], now: Instant) -> Duration {
    let cap = timeout / 4;
    members
        .iter()
        .map(|m| m.deadline.saturating_duration_since(now) / 2)
        .min()
        .map_or(cap, |left| left.min(cap))
}

impl super::Renderer {
    /// [`Self::render_module_cached_with`] in turns of `gate`, batched: on a cache miss the
    /// release joins the open batch of its module version, registry and credentials (at
    /// most [`super::RenderConfig::max_batch`] members) and waits for a turn of its own
    /// namespace; the first member granted a turn runs the whole batch in it, and the
    /// others withdraw their waits when their answer arrives. `deadline` is the end of the
    /// release's attempt ([`opm_core::Attempt::bound`]), see [`batch_timeout`].
    ///
    /// Fairness (SPEC §24): a batch holds one render turn of its namespace: every member
    /// and every release rendered ahead is of that namespace (issue 31 item 9: another
    /// namespace's releases never run in this one's turn, and a release that breaks the
    /// run costs a failed batch only to its own namespace). It is one `cue` run under one
    /// run's deadline, output cap and memory limit, so it costs the shared turns what one
    /// render costs; no member waits longer than for its own turn, and a namespace gets no
    /// more `cue` runs than without batching.
    pub async fn render_module_fair<G: RenderGate>(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<(String, Vec<u8>)>,
        gate: &G,
        deadline: Instant,
    ) -> Result<Arc<Rendered>, RenderError> {
        let credentials = credentials.as_ref();
        let digest = credentials.map(|(d, _)| d.as_str());
        self.touch_cache(module, digest);
        let key = self.module_key(module, values, identity, digest).await?;
        if let Some(hit) = self.cache_get(&key) {
            return hit;
        }
        let batchable = self.config.max_batch > 1
            && matches!(values, Value::Null | Value::Object(_))
            && !self.batches.is_solo(&key, Instant::now());
        if !batchable {
            let bytes = self.render_alone(module, values, identity, credentials, gate);
            return self.cache_put(key, bytes.await?);
        }
        let (reply, rx) = oneshot::channel();
        let (sealed, sealed_rx) = oneshot::channel();
        let member = Member {
            values: values.clone(),
            identity: identity.clone(),
            deadline,
            reply,
            sealed: Some(sealed),
        };
        let waits = (rx, sealed_rx);
        let bytes = match self
            .in_batch(module, member, waits, credentials, gate)
            .await
        {
            Reply::Done(r) => r?,
            Reply::Alone => {
                let r = self.render_alone(module, values, identity, credentials, gate);
                let r = r.await;
                if let Err(e) = &r
                    && keeps_out(e)
                {
                    tracing::debug!(release = %identity.name, namespace = %identity.namespace, error = %e, "failed alone after its batch failed: renders alone for a while");
                    self.batches.set_solo(key.clone(), Instant::now());
                }
                r?
            }
        };
        self.cache_put(key, bytes)
    }

    /// One release's own `cue` run, in a turn of its namespace.
    async fn render_alone<G: RenderGate>(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<&(String, Vec<u8>)>,
        gate: &G,
    ) -> Result<Vec<u8>, RenderError> {
        let files = synthesise_release(module, values, identity)?;
        let _turn = gate.turn(&identity.namespace).await;
        self.export_files(&files, credentials, self.config.timeout)
            .await
    }

    /// Waits in a batch for a turn in which to run it, until another member seals it
    /// (then only for the answer).
    async fn in_batch<G: RenderGate>(
        &self,
        module: &ModuleRef,
        member: Member,
        (rx, sealed): (oneshot::Receiver<Reply>, oneshot::Receiver<()>),
        credentials: Option<&(String, Vec<u8>)>,
        gate: &G,
    ) -> Reply {
        let namespace = member.identity.namespace.clone();
        let key = BatchKey::new(module, credentials.map(|(d, _)| d.as_str()), &namespace);
        let id = self.batches.join(key, member, self.config.max_batch);
        tokio::select! {
            biased;
            // Sealed by another member (or dropped with the batch): withdraw the wait.
            _ = sealed => {}
            turn = gate.turn(&namespace) => {
                if let Some(members) = self.batches.seal(id) {
                    self.run_batch(module, members, credentials).await;
                }
                drop(turn);
            }
        }
        // A dropped sender (a runner cancelled mid-run) means: render alone.
        rx.await.unwrap_or(Reply::Alone)
    }

    /// Runs a sealed batch (in the caller's turn), with releases rendered ahead where it
    /// has room ([`super::ahead`]), and answers every member still waiting.
    async fn run_batch(
        &self,
        module: &ModuleRef,
        members: Vec<Member>,
        credentials: Option<&(String, Vec<u8>)>,
    ) {
        let mut members: Vec<Member> = members
            .into_iter()
            .filter(|m| !m.reply.is_closed())
            .collect();
        if members.is_empty() {
            return;
        }
        // Credentials belong to the attempts that hold them: nothing rides along. Every
        // member is of the turn's namespace (the batch key holds it), and so is every
        // release taken ahead.
        let ahead = match credentials {
            None => {
                let namespace = members[0].identity.namespace.clone();
                let taken: Vec<_> = members.iter().map(|m| &m.identity).collect();
                let room = self.config.max_batch.saturating_sub(members.len());
                self.ahead_members(module, &namespace, &taken, room).await
            }
            Some(_) => Vec::new(),
        };
        if members.len() == 1 && ahead.is_empty() {
            // A batch of one is that release's own run: its answer, error or not.
            let m = members.remove(0);
            let files = synthesise_release(module, &m.values, &m.identity);
            let out = match files {
                Ok(files) => {
                    let timeout = self.config.timeout;
                    self.export_files(&files, credentials, timeout).await
                }
                Err(e) => Err(e),
            };
            let _ = m.reply.send(Reply::Done(out));
            return;
        }
        let timeout = batch_timeout(self.config.timeout, &members, Instant::now());
        let pairs: Vec<_> = members
            .iter()
            .map(|m| (&m.values, &m.identity))
            .chain(ahead.iter().map(|a| (&a.values, &a.identity)))
            .collect();
        let out = match synthesise_batch(module, &pairs) {
            Ok(files) => self.export_files(&files, credentials, timeout).await,
            Err(e) => Err(e),
        };
        self.stats.batch_runs.fetch_add(1, Relaxed);
        let parts = match out {
            Ok(out) => split_batch(&out, pairs.len()).ok_or(RenderError::InvalidOutput {
                message: "batch output does not split into its members".into(),
            }),
            Err(e) => Err(e),
        };
        match parts {
            Ok(mut parts) => {
                let ahead_parts = parts.split_off(members.len());
                self.keep_ahead(ahead, ahead_parts);
                self.stats.batched.fetch_add(parts.len() as u64, Relaxed);
                for (m, part) in members.into_iter().zip(parts) {
                    let _ = m.reply.send(Reply::Done(Ok(part)));
                }
            }
            Err(e) => {
                self.stats.batch_fallbacks.fetch_add(1, Relaxed);
                tracing::debug!(module = %module.path, version = %module.version, members = members.len(), ahead = ahead.len(), error = %e, "batch render failed: each member renders alone");
                self.drop_ahead(ahead);
                for m in members {
                    let _ = m.reply.send(Reply::Alone);
                }
            }
        }
    }
}
