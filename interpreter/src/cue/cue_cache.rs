//! The `cue` module cache on disk (SPEC §24, §27; issue 31 item 7): one copy of each module
//! version, whatever the credentials, bounded by `--max-cue-cache-bytes`, least recently
//! used removed first.
//!
//! Who shares it: every render that pulls **without** credentials (`module.secretRef`
//! unset, and every Release package). What such a render can put here, anyone could pull
//! anonymously, so sharing it between tenants reveals nothing.
//!
//! A render **with** credentials never reads or writes it: its `cue` runs with a module
//! cache inside the private temporary directory of that render (next to its Docker
//! config, SPEC §27), removed when the run ends. A private module pulled with tenant A's
//! credentials is therefore never on disk where tenant B's render (with other credentials
//! or none) could read it without asking the registry, and dummy credentials can no longer
//! each leave a copy of a large module behind (the old cache per credential digest, never
//! cleaned, filled the volume). The price: a release with credentials downloads its modules
//! on every render that misses the render cache (rendered output is still cached in
//! memory by inputs). Checking a second tenant's credentials against the registry before
//! serving a shared private copy would avoid that, at the cost of speaking the registry's
//! auth protocol outside `cue`; it is not done.
//!
//! Bound: after a run, at most every [`CHECK_EVERY`], the cache's module versions are
//! measured (`mod/extract/<path>@<version>/` and `mod/download/<path>/@v/<version>.*`);
//! above the bound the least recently used are removed until it holds. "Used" is when a
//! render of this process last asked for the module version, else its files' age. Removal
//! waits until no `cue` run uses the cache (runs hold it shared, removal exclusively), so
//! a run never loses files under it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{RwLock, RwLockReadGuard};

use crate::cue::module_ref::ModuleRef;

/// `--max-cue-cache-bytes` default: 1 GiB.
pub const DEFAULT_MAX_CUE_CACHE_BYTES: u64 = 1024 * 1024 * 1024;

/// How often, at most, the cache is measured after a run.
pub const CHECK_EVERY: Duration = Duration::from_secs(30);

/// The shared module cache of one operator process.
#[derive(Debug)]
pub struct CueCache {
    dir: PathBuf,
    max_bytes: u64,
    /// Held shared by each `cue` run using the cache, exclusively while removing.
    gate: RwLock<()>,
    state: Mutex<State>,
    evicted: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// Module versions (`example.com/web@v0.2.1`, escaped as on disk) by last use.
    used: HashMap<String, u64>,
    tick: u64,
    last_check: Option<Instant>,
}

/// One module version on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// `<escaped module path>@<version>`.
    pub key: String,
    /// Bytes of its files.
    pub bytes: u64,
    /// Its directory and files.
    paths: Vec<PathBuf>,
    modified: SystemTime,
}

impl CueCache {
    /// The cache in `dir` (`CUE_CACHE_DIR`), bounded by `max_bytes`. The per-credential
    /// caches an earlier version kept under `dir/by-credentials` are removed.
    pub fn new(dir: &Path, max_bytes: u64) -> Self {
        let legacy = dir.join("by-credentials");
        if legacy.exists() {
            make_writable(&legacy);
            if let Err(e) = std::fs::remove_dir_all(&legacy) {
                tracing::warn!(dir = %legacy.display(), error = %e, "removing the old per-credential cue caches failed");
            }
        }
        Self {
            dir: dir.to_path_buf(),
            max_bytes,
            gate: RwLock::new(()),
            state: Mutex::new(State::default()),
            evicted: AtomicU64::new(0),
        }
    }

    /// The directory (`CUE_CACHE_DIR` of runs without credentials).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Module versions removed so far.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Held for the length of a `cue` run that uses the cache.
    pub async fn enter(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().await
    }

    /// Records that a render asked for `module` now (for least-recently-used order).
    pub fn touch(&self, module: &ModuleRef) {
        let key = entry_key(module);
        let mut st = self.lock();
        st.tick += 1;
        let tick = st.tick;
        st.used.insert(key, tick);
    }

    /// After a run: when [`CHECK_EVERY`] has passed since the last check, measures the
    /// cache and removes the least recently used module versions above the bound.
    pub async fn after_run(&self) {
        {
            let mut st = self.lock();
            if st.last_check.is_some_and(|t| t.elapsed() < CHECK_EVERY) {
                return;
            }
            st.last_check = Some(Instant::now());
        }
        self.trim().await;
    }

    /// Measures the cache and removes least recently used module versions until it is
    /// within the bound, once no run uses it.
    pub async fn trim(&self) {
        let _exclusive = self.gate.write().await;
        let dir = self.dir.clone();
        let Ok(mut entries) = tokio::task::spawn_blocking(move || entries(&dir)).await else {
            return;
        };
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        if total <= self.max_bytes {
            return;
        }
        let used = self.lock().used.clone();
        // Oldest first: never used by this process before those it used, then by time.
        entries.sort_by(|a, b| {
            let ua = used.get(&a.key).copied().unwrap_or(0);
            let ub = used.get(&b.key).copied().unwrap_or(0);
            ua.cmp(&ub).then(a.modified.cmp(&b.modified))
        });
        let mut removed = Vec::new();
        for e in entries {
            if total <= self.max_bytes {
                break;
            }
            total = total.saturating_sub(e.bytes);
            removed.push(e);
        }
        let count = removed.len() as u64;
        let bytes: u64 = removed.iter().map(|e| e.bytes).sum();
        {
            let mut st = self.lock();
            for e in &removed {
                st.used.remove(&e.key);
            }
        }
        let _ = tokio::task::spawn_blocking(move || {
            for e in &removed {
                remove_entry(e);
            }
        })
        .await;
        self.evicted.fetch_add(count, Ordering::Relaxed);
        tracing::info!(
            dir = %self.dir.display(),
            removed = count,
            bytes,
            bound = self.max_bytes,
            "cue module cache over --max-cue-cache-bytes: least recently used module versions removed"
        );
    }
}

/// `example.com/web@v0` at `v0.2.1` → `example.com/web@v0.2.1`, escaped as the module
/// cache spells it (an upper-case letter is `!` and the letter in lower case).
fn entry_key(module: &ModuleRef) -> String {
    let base = match module.path.rsplit_once('@') {
        Some((p, major)) if major.starts_with('v') => p,
        _ => module.path.as_str(),
    };
    format!("{}@{}", escape(base), escape(&module.version))
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The module versions in the cache at `dir`, with their sizes.
pub fn entries(dir: &Path) -> Vec<CacheEntry> {
    let mut by_key: HashMap<String, CacheEntry> = HashMap::new();
    let extract = dir.join("mod").join("extract");
    let mut found = Vec::new();
    find_versions(&extract, &extract, &mut found);
    let download = dir.join("mod").join("download");
    find_downloads(&download, &download, &mut found);
    // A module version's extracted tree and its downloaded files count as one entry.
    for (key, path) in found {
        let (bytes, modified) = measure(&path);
        let e = by_key.entry(key.clone()).or_insert_with(|| CacheEntry {
            key,
            bytes: 0,
            paths: Vec::new(),
            modified,
        });
        e.bytes += bytes;
        e.modified = e.modified.max(modified);
        e.paths.push(path);
    }
    by_key.into_values().collect()
}

/// Directories `<path>@<version>` under `root` (not descending into them).
fn find_versions(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        let p = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name().to_string_lossy().contains('@') {
            if let Ok(rel) = p.strip_prefix(root) {
                out.push((rel.to_string_lossy().into_owned(), p.clone()));
            }
        } else {
            find_versions(root, &p, out);
        }
    }
}

/// Files `<path>/@v/<version>.<ext>` under `root`, keyed `<path>@<version>`.
fn find_downloads(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        let p = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if entry.file_name() == "@v" {
            let Ok(module) = dir.strip_prefix(root) else {
                continue;
            };
            let Ok(files) = std::fs::read_dir(&p) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                // `v0.2.1.zip`, `v0.2.1.mod`, `v0.2.1.info`, `v0.2.1.lock`, `v0.2.1.ziphash`
                let Some((version, _ext)) = name.rsplit_once('.') else {
                    continue;
                };
                if version.starts_with('v') && f.file_type().is_ok_and(|t| t.is_file()) {
                    out.push((format!("{}@{version}", module.to_string_lossy()), f.path()));
                }
            }
        } else {
            find_downloads(root, &p, out);
        }
    }
}

/// Bytes under `path` (a file or a tree) and its newest modification time.
fn measure(path: &Path) -> (u64, SystemTime) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return (0, SystemTime::UNIX_EPOCH);
    };
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    if !meta.is_dir() {
        return (meta.len(), modified);
    }
    let (mut bytes, mut newest) = (0, modified);
    if let Ok(rd) = std::fs::read_dir(path) {
        for e in rd.flatten() {
            let (b, m) = measure(&e.path());
            bytes += b;
            newest = newest.max(m);
        }
    }
    (bytes, newest)
}

/// `cue` (like Go) makes extracted module trees read-only; a directory must be writable
/// for its entries to be removed.
fn make_writable(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        if meta.is_dir() {
            let mode = meta.permissions().mode() | 0o700;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
            if let Ok(rd) = std::fs::read_dir(path) {
                for e in rd.flatten() {
                    make_writable(&e.path());
                }
            }
        }
    }
}

fn remove_entry(e: &CacheEntry) {
    for p in &e.paths {
        let result = if p.is_dir() {
            make_writable(p);
            std::fs::remove_dir_all(p)
        } else {
            std::fs::remove_file(p)
        };
        if let Err(err) = result {
            tracing::warn!(path = %p.display(), error = %err, "removing a cue module cache entry failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_spelled_as_the_cache_spells_them() {
        let m = ModuleRef::new("example.com/Modules/web@v0", "v0.2.1", None).unwrap();
        assert_eq!(entry_key(&m), "example.com/!modules/web@v0.2.1");
    }

    #[tokio::test]
    async fn least_recently_used_versions_go_first_until_the_bound_holds() {
        let d = tempfile::tempdir().unwrap();
        let put = |module: &str, version: &str, bytes: usize| {
            let x = d
                .path()
                .join("mod/extract")
                .join(format!("{module}@{version}"));
            std::fs::create_dir_all(&x).unwrap();
            std::fs::write(x.join("a.cue"), vec![b'a'; bytes]).unwrap();
            let v = d.path().join("mod/download").join(module).join("@v");
            std::fs::create_dir_all(&v).unwrap();
            std::fs::write(v.join(format!("{version}.zip")), vec![b'z'; bytes]).unwrap();
            std::fs::write(v.join(format!("{version}.mod")), b"module").unwrap();
        };
        put("example.com/a", "v0.1.0", 1000);
        put("example.com/b", "v0.1.0", 1000);
        put("example.com/c", "v0.1.0", 1000);
        let mut found = entries(d.path());
        found.sort_by(|a, b| a.key.cmp(&b.key));
        let keys: Vec<&str> = found.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "example.com/a@v0.1.0",
                "example.com/b@v0.1.0",
                "example.com/c@v0.1.0"
            ]
        );
        assert!(found.iter().all(|e| e.bytes == 2006), "{found:?}");
        let cache = CueCache::new(d.path(), 4100);
        // Used in the order c, a, b: c is the least recently used.
        for m in ["example.com/c@v0", "example.com/a@v0", "example.com/b@v0"] {
            cache.touch(&ModuleRef::new(m, "v0.1.0", None).unwrap());
        }
        cache.trim().await;
        let mut left: Vec<String> = entries(d.path()).into_iter().map(|e| e.key).collect();
        left.sort();
        assert_eq!(left, ["example.com/a@v0.1.0", "example.com/b@v0.1.0"]);
        assert_eq!(cache.evicted(), 1);
    }
}
