//! The render cache (DESIGN §2): exported JSON by render inputs, least recently used first
//! out, so an unchanged release is answered without a `cue` run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{RenderError, Rendered, Renderer};
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};

/// Bytes of exported JSON the render cache keeps (least recently used first out): a
/// thousand ModuleReleases of a small module take a few MB, so every unchanged release of
/// a large fleet is answered without a `cue` run.
const RENDER_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// Identifies a render by its inputs (DESIGN §2): same inputs, same output, no CUE run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RenderKey {
    /// The artifact's digest, or `module:<path>@<version>` for a ModuleRelease.
    pub source_digest: String,
    /// A ModuleRelease's values and identity, hashed (empty for a Release).
    pub config_digest: String,
    /// `spec.path` inside the artifact.
    pub path: String,
    /// `cue version`: another binary may render differently.
    pub cue_version: String,
}

/// Exported JSON by render inputs, with the tick of its last use.
/// `Arc<Vec<u8>>`, not `Arc<[u8]>`: the output of `cue` is kept without a second copy.
pub(super) type RenderCache = BTreeMap<RenderKey, (Arc<Vec<u8>>, u64)>;

impl Renderer {
    /// The key of a module render. A published module version is immutable, so the module
    /// reference stands for the source digest; the credentials' digest is part of the key,
    /// so a render made with one tenant's credentials never answers another's request.
    pub(super) async fn module_key(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<&str>,
    ) -> Result<RenderKey, RenderError> {
        let mut config = serde_json::json!({
            "values": values,
            "name": identity.name,
            "namespace": identity.namespace,
            "package": module.package,
            "registry": self.config.registry,
        });
        if let Some(digest) = credentials {
            config["credentials"] = Value::String(digest.to_owned());
        }
        Ok(RenderKey {
            source_digest: format!("module:{}@{}", module.path, module.version),
            config_digest: format!("sha256:{}", hex::encode(Sha256::digest(config.to_string()))),
            path: ".".to_owned(),
            cue_version: self.cue_version().await?,
        })
    }

    /// The render of `key` from the cache, or `export`'s, cached when it has the release shape.
    pub(super) async fn cached(
        &self,
        key: RenderKey,
        export: impl Future<Output = Result<Vec<u8>, RenderError>>,
    ) -> Result<Arc<Rendered>, RenderError> {
        if let Some(hit) = self.cache_get(&key) {
            return hit;
        }
        self.cache_put(key, export.await?)
    }

    /// A cached render of `key`, counted as a hit.
    pub(super) fn cache_get(&self, key: &RenderKey) -> Option<Result<Arc<Rendered>, RenderError>> {
        let hit = self.lock_cache().get_mut(key).map(|(bytes, used)| {
            *used = self.tick.fetch_add(1, Relaxed);
            bytes.clone()
        })?;
        self.stats.cache_hits.fetch_add(1, Relaxed);
        Some(Rendered::from_json(&hit).map(Arc::new))
    }

    /// Checks `bytes` and caches them under `key`: only what passes the shape check is
    /// cached; the least recently used renders go when the cache is over its bytes.
    pub(super) fn cache_put(
        &self,
        key: RenderKey,
        bytes: Vec<u8>,
    ) -> Result<Arc<Rendered>, RenderError> {
        let rendered = Arc::new(Rendered::from_json(&bytes)?);
        let mut cache = self.lock_cache();
        cache.insert(key, (Arc::new(bytes), self.tick.fetch_add(1, Relaxed)));
        let mut total: usize = cache.values().map(|(b, _)| b.len()).sum();
        while total > RENDER_CACHE_BYTES && cache.len() > 1 {
            let oldest = cache
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone());
            match oldest.and_then(|k| cache.remove(&k)) {
                Some((b, _)) => total -= b.len(),
                None => break,
            }
        }
        Ok(rendered)
    }

    /// Whether `key` is cached (not counted as a hit).
    pub(super) fn cache_contains(&self, key: &RenderKey) -> bool {
        self.lock_cache().contains_key(key)
    }

    /// Number of cached renders.
    pub fn cached_renders(&self) -> usize {
        self.lock_cache().len()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, RenderCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}
