//! The render cache (DESIGN §2): exported JSON by render inputs, least recently used first
//! out, so an unchanged release is answered without a `cue` run.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{RenderError, Rendered, Renderer};
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};

/// Bytes of exported JSON the render cache keeps (least recently used first out): a
/// thousand ModuleReleases of a small module take a few MB, so every unchanged release of
/// a large fleet is answered without a `cue` run.
pub(crate) const RENDER_CACHE_BYTES: usize = 32 * 1024 * 1024;

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

/// Exported JSON by render inputs, least recently used first out once over its bytes.
///
/// Every operation is O(1) in the number of cached renders: the byte total is kept as a
/// running sum and the LRU order by the `lru` crate, so an attempt costs the same in a
/// fleet of 100 and of 10 000 (a sum and scan per insert did not).
/// `Arc<Vec<u8>>`, not `Arc<[u8]>`: the output of `cue` is kept without a second copy.
pub(super) struct RenderCache {
    entries: lru::LruCache<RenderKey, Arc<Vec<u8>>>,
    bytes: usize,
    max_bytes: usize,
}

impl RenderCache {
    /// An empty cache that keeps at most `max_bytes` of output (and always the newest).
    pub(super) fn new(max_bytes: usize) -> Self {
        Self {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
            max_bytes,
        }
    }

    /// The bytes of `key`, now the most recently used.
    fn get(&mut self, key: &RenderKey) -> Option<Arc<Vec<u8>>> {
        self.entries.get(key).cloned()
    }

    /// Caches `bytes` under `key` and drops the least recently used renders while over the
    /// limit; the render just put is never dropped.
    fn put(&mut self, key: RenderKey, bytes: Arc<Vec<u8>>) {
        self.bytes += bytes.len();
        if let Some(old) = self.entries.put(key, bytes) {
            self.bytes -= old.len();
        }
        while self.bytes > self.max_bytes && self.entries.len() > 1 {
            match self.entries.pop_lru() {
                Some((_, old)) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    fn contains(&self, key: &RenderKey) -> bool {
        self.entries.contains(key)
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of output held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

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
        let hit = self.lock_cache().get(key)?;
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
        self.lock_cache().put(key, Arc::new(bytes));
        Ok(rendered)
    }

    /// Whether `key` is cached (not counted as a hit).
    pub(super) fn cache_contains(&self, key: &RenderKey) -> bool {
        self.lock_cache().contains(key)
    }

    /// Number of cached renders.
    pub fn cached_renders(&self) -> usize {
        self.lock_cache().len()
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, RenderCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> RenderKey {
        RenderKey {
            source_digest: "module:m@v0.1.0".into(),
            config_digest: format!("sha256:{n}"),
            path: ".".into(),
            cue_version: "v0.17.1".into(),
        }
    }

    #[test]
    fn least_recently_used_goes_first_and_bytes_stay_under_the_limit() {
        let mut cache = RenderCache::new(30);
        for n in 0..3 {
            cache.put(key(n), Arc::new(vec![0; 10]));
        }
        assert_eq!(cache.bytes(), 30);
        // Using 0 makes 1 the oldest.
        assert!(cache.get(&key(0)).is_some());
        cache.put(key(3), Arc::new(vec![0; 10]));
        assert!(
            !cache.contains(&key(1)),
            "the least recently used render goes first"
        );
        assert!(cache.contains(&key(0)) && cache.contains(&key(2)) && cache.contains(&key(3)));
        assert_eq!((cache.len(), cache.bytes()), (3, 30));
    }

    #[test]
    fn replacing_a_key_counts_its_bytes_once_and_an_oversized_render_is_kept_alone() {
        let mut cache = RenderCache::new(30);
        cache.put(key(0), Arc::new(vec![0; 10]));
        cache.put(key(0), Arc::new(vec![0; 20]));
        assert_eq!((cache.len(), cache.bytes()), (1, 20));
        cache.put(key(1), Arc::new(vec![0; 100]));
        assert_eq!((cache.len(), cache.bytes()), (1, 100));
        assert!(cache.contains(&key(1)));
    }
}
