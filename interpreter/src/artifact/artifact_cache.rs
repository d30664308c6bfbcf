//! Verified, extracted artifacts kept by digest (SPEC §17, DESIGN §2: caching is the
//! interpreter's business and invisible to the core).
//!
//! An extracted tree is kept by the source's artifact URL *and* its digest, never by the
//! digest alone (issue 31 item 9): a digest names content but says nothing about who may
//! read it, and a source's status is written by whoever can write that object. A tenant
//! whose source status names another tenant's private artifact digest (and its own URL)
//! would otherwise be served that tenant's tree from the cache without any download; now
//! it must download from the URL it gave, which either serves those bytes (so the tenant
//! could read them anyway) or fails the digest check. The artifact URL names the source
//! object (source-controller serves `<kind>/<namespace>/<name>/…`), so this is the
//! source's identity plus the digest; releases of one source still share one tree. The
//! cache is bounded by count and bytes with least-recently-used
//! eviction; an evicted tree stays on disk until the last [`ArtifactHandle`] to it is dropped,
//! so a render in progress never loses its files. Concurrent requests for one digest share a
//! single download.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;
use tokio::sync::OnceCell;

use crate::artifact::extract::{ExtractError, ExtractLimits, extract};
use crate::artifact::fetch::{FetchError, Fetcher, Sha256Digest};
use crate::artifact::release_path::{PathError, resolve_path};

/// Bounds of the cache.
#[derive(Debug, Clone)]
pub struct CacheLimits {
    /// Extracted artifacts kept; the least recently used goes first.
    pub max_entries: usize,
    /// Bytes of extracted artifacts kept.
    pub max_bytes: u64,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            max_entries: 64,
            max_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// Why an artifact could not be made available.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    #[error(transparent)]
    /// The download failed.
    Fetch(#[from] FetchError),
    #[error(transparent)]
    /// The archive was refused or could not be written.
    Extract(#[from] ExtractError),
}

/// One extracted artifact; its directory is removed when the last reference goes.
#[derive(Debug)]
struct Entry {
    digest: Sha256Digest,
    // Held for its Drop: removes the tree.
    _dir: TempDir,
    root: PathBuf,
    bytes: u64,
    /// Size of the downloaded archive.
    archive_bytes: u64,
}

/// A reference to an extracted artifact, valid for as long as it is held.
#[derive(Debug, Clone)]
pub struct ArtifactHandle(Arc<Entry>);

impl ArtifactHandle {
    /// The directory holding the artifact's content.
    pub fn root(&self) -> &Path {
        &self.0.root
    }

    /// The verified digest the artifact is kept under.
    pub fn digest(&self) -> &Sha256Digest {
        &self.0.digest
    }

    /// Bytes the extraction wrote.
    pub fn size(&self) -> u64 {
        self.0.bytes
    }

    /// Bytes of the archive that was downloaded.
    pub fn archive_size(&self) -> u64 {
        self.0.archive_bytes
    }

    /// The release package directory `spec_path` inside this artifact (SPEC §17).
    pub fn resolve(&self, spec_path: &str) -> Result<PathBuf, PathError> {
        resolve_path(&self.0.root, spec_path)
    }
}

/// Whether [`ArtifactCache::lookup`] found the artifact already extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Already extracted: no download.
    Hit,
    /// Downloaded now, or joined a download already in flight.
    Miss,
}

/// Counters for metrics and tests.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: AtomicU64,
    /// Lookups that had to download (or join a download in flight).
    pub misses: AtomicU64,
    /// Downloads started.
    pub downloads: AtomicU64,
    /// Bytes of verified downloads (SPEC §21 fetch bytes).
    pub bytes_downloaded: AtomicU64,
    /// Artifacts removed to stay within the limits.
    pub evictions: AtomicU64,
}

type Load = Arc<OnceCell<Result<ArtifactHandle, ArtifactError>>>;

/// What a tree is kept under: the artifact URL and the verified digest (module docs).
type Key = (String, Sha256Digest);

#[derive(Default)]
struct State {
    entries: HashMap<Key, (ArtifactHandle, u64)>,
    tick: u64,
    bytes: u64,
    inflight: HashMap<Key, Load>,
}

/// The artifact cache.
pub struct ArtifactCache {
    artifacts_dir: PathBuf,
    downloads_dir: PathBuf,
    fetcher: Fetcher,
    extract_limits: ExtractLimits,
    limits: CacheLimits,
    state: Mutex<State>,
    stats: CacheStats,
}

impl std::fmt::Debug for ArtifactCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactCache")
            .field("dir", &self.artifacts_dir)
            .finish_non_exhaustive()
    }
}

impl ArtifactCache {
    /// Uses `cache_dir/artifacts` and `cache_dir/downloads`. Both are emptied first: the index
    /// lives in memory only, so anything left by an earlier process is unknown and unverified.
    pub fn new(
        cache_dir: &Path,
        fetcher: Fetcher,
        extract_limits: ExtractLimits,
        limits: CacheLimits,
    ) -> std::io::Result<Self> {
        let artifacts_dir = cache_dir.join("artifacts");
        let downloads_dir = cache_dir.join("downloads");
        for d in [&artifacts_dir, &downloads_dir] {
            match std::fs::remove_dir_all(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            std::fs::create_dir_all(d)?;
        }
        Ok(Self {
            artifacts_dir,
            downloads_dir,
            fetcher,
            extract_limits,
            limits,
            state: Mutex::new(State::default()),
            stats: CacheStats::default(),
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// Number of cached artifacts and their total extracted size.
    pub fn usage(&self) -> (usize, u64) {
        let st = self.lock();
        (st.entries.len(), st.bytes)
    }

    /// Returns the extracted artifact with `digest` from `url`, downloading it if this URL's
    /// artifact with this digest is not kept yet (a tree another URL gave is never served).
    pub async fn get(&self, url: &str, digest: &str) -> Result<ArtifactHandle, ArtifactError> {
        self.lookup(url, digest).await.map(|(handle, _)| handle)
    }

    /// Like [`Self::get`], and says whether the cache already held the artifact.
    pub async fn lookup(
        &self,
        url: &str,
        digest: &str,
    ) -> Result<(ArtifactHandle, Lookup), ArtifactError> {
        let digest_key = Sha256Digest::parse(digest)?;
        let key: Key = (url.to_owned(), digest_key.clone());
        let load = {
            let mut st = self.lock();
            st.tick += 1;
            let tick = st.tick;
            if let Some((handle, used)) = st.entries.get_mut(&key) {
                *used = tick;
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                return Ok((handle.clone(), Lookup::Hit));
            }
            self.stats.misses.fetch_add(1, Ordering::Relaxed);
            st.inflight.entry(key.clone()).or_default().clone()
        };
        let result = load
            .get_or_init(|| self.load(url, digest, &digest_key))
            .await
            .clone();
        let mut st = self.lock();
        if st.inflight.get(&key).is_some_and(|l| Arc::ptr_eq(l, &load)) {
            st.inflight.remove(&key);
            if let Ok(handle) = &result {
                st.tick += 1;
                let tick = st.tick;
                st.bytes += handle.size();
                st.entries.insert(key, (handle.clone(), tick));
                self.evict(&mut st);
            }
        }
        result.map(|handle| (handle, Lookup::Miss))
    }

    async fn load(
        &self,
        url: &str,
        digest: &str,
        key: &Sha256Digest,
    ) -> Result<ArtifactHandle, ArtifactError> {
        self.stats.downloads.fetch_add(1, Ordering::Relaxed);
        let fetched = self.fetcher.fetch(url, digest, &self.downloads_dir).await?;
        self.stats
            .bytes_downloaded
            .fetch_add(fetched.size, Ordering::Relaxed);
        let io = |e: std::io::Error| ExtractError::Io {
            detail: e.to_string(),
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("{}-", key.hex()))
            .tempdir_in(&self.artifacts_dir)
            .map_err(io)?;
        let root = dir.path().join("root");
        std::fs::create_dir(&root).map_err(io)?;
        let limits = self.extract_limits.clone();
        let digest = key.clone();
        let archive_bytes = fetched.size;
        // Extraction is blocking file IO; `fetched` (the download) is dropped, and so deleted,
        // when the closure ends, `dir` on any error.
        let handle = tokio::task::spawn_blocking(move || {
            let stats = extract(fetched.file.path(), &root, &limits)?;
            Ok::<_, ExtractError>(ArtifactHandle(Arc::new(Entry {
                digest,
                _dir: dir,
                root,
                bytes: stats.bytes,
                archive_bytes,
            })))
        })
        .await
        .map_err(|e| ExtractError::Io {
            detail: format!("extraction task failed: {e}"),
        })??;
        tracing::debug!(digest = %key, bytes = handle.size(), "artifact extracted");
        Ok(handle)
    }

    fn evict(&self, st: &mut State) {
        while st.entries.len() > self.limits.max_entries
            || (st.bytes > self.limits.max_bytes && st.entries.len() > 1)
        {
            let Some(oldest) = st
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((handle, _)) = st.entries.remove(&oldest) {
                st.bytes -= handle.size();
                self.stats.evictions.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(url = %oldest.0, digest = %oldest.1, "artifact evicted from cache");
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another task panicked mid-update of plain counters and
        // maps; the data is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
