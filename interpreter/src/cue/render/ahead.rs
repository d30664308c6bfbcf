//! Renders ahead of their attempts (issue 18): a batch that has room takes other releases
//! of its module version that will need a render soon ([`opm_core::render_ahead`] says
//! which), so one `cue` run serves up to [`super::RenderConfig::max_batch`] releases even
//! when only one attempt is rendering, and their attempts later find the result in the
//! render cache. With `--concurrency 4` at most two or three attempts render at once, so
//! batches of attempts alone stay small; rendering ahead is what fills them.
//!
//! What may go wrong is kept to the releases rendered ahead: their output only goes to
//! the cache under their own inputs' key (never to another release), and a batch that
//! fails with any of them in it marks every one of them to render alone
//! ([`super::batch::SOLO_FOR`]), so a release whose values break the module is never taken
//! ahead again and breaks no further batch; the attempts in the batch render alone, as
//! after any failed batch.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use serde_json::Value;

use super::{RenderKey, Renderer};
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};

/// Times a batch asks for more candidates when those offered were cached or alone.
const ROUNDS: usize = 4;

/// Releases that may be rendered ahead, from the operator's view of the fleet.
pub trait Ahead: Send + Sync {
    /// Up to `n` releases of `namespace` of `module`'s path and version whose next render
    /// needs only their spec, each offered once per generation. Only `namespace`'s: the
    /// batch runs in that namespace's render turn.
    fn candidates(
        &self,
        module: &ModuleRef,
        namespace: &str,
        n: usize,
    ) -> Vec<(Value, ReleaseIdentity)>;
}

/// A release taken into a batch ahead of its attempt.
pub(super) struct AheadMember {
    pub values: Value,
    pub identity: ReleaseIdentity,
    pub key: RenderKey,
}

impl Renderer {
    /// Renders releases of `ahead` along with batches that have room (see the module docs).
    pub fn render_ahead_from(&self, ahead: Arc<dyn Ahead>) {
        let _ = self.ahead.set(ahead);
    }

    /// Up to `room` releases of `namespace` to render ahead with a batch of `module` whose
    /// members are `taken`: not cached, not rendering alone, not already in the batch.
    pub(super) async fn ahead_members(
        &self,
        module: &ModuleRef,
        namespace: &str,
        taken: &[&ReleaseIdentity],
        room: usize,
    ) -> Vec<AheadMember> {
        let Some(ahead) = self.ahead.get() else {
            return Vec::new();
        };
        if room == 0 {
            return Vec::new();
        }
        let now = Instant::now();
        let mut out: Vec<AheadMember> = Vec::new();
        // A few rounds: candidates already cached or rendering alone leave room.
        for _ in 0..ROUNDS {
            let wanted = room - out.len();
            let offered = ahead.candidates(module, namespace, wanted);
            let exhausted = offered.len() < wanted;
            for (values, identity) in offered {
                // The source is trusted to filter, and checked: another namespace's
                // release never runs in this one's turn.
                if identity.namespace != namespace
                    || taken.contains(&&identity)
                    || !matches!(values, Value::Object(_))
                {
                    continue;
                }
                let Ok(key) = self.module_key(module, &values, &identity, None).await else {
                    continue;
                };
                if self.batches.is_solo(&key, now) || self.cache_contains(&key) {
                    continue;
                }
                out.push(AheadMember {
                    values,
                    identity,
                    key,
                });
            }
            if exhausted || out.len() == room {
                break;
            }
        }
        out
    }

    /// Caches the outputs of the releases rendered ahead.
    pub(super) fn keep_ahead(&self, members: Vec<AheadMember>, parts: Vec<Vec<u8>>) {
        for (m, part) in members.into_iter().zip(parts) {
            match self.cache_put(m.key, part) {
                Ok(_) => {
                    self.stats.ahead.fetch_add(1, Relaxed);
                }
                Err(e) => {
                    tracing::debug!(release = %m.identity.name, namespace = %m.identity.namespace, error = %e, "render ahead not kept");
                }
            }
        }
    }

    /// A batch with releases rendered ahead failed: none of them is taken ahead again, nor
    /// batched, for a while.
    pub(super) fn drop_ahead(&self, members: Vec<AheadMember>) {
        let now = Instant::now();
        for m in members {
            self.batches.set_solo(m.key, now);
        }
    }
}
