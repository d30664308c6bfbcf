//! Writes entries under the extraction root: real directories only, files opened with
//! `O_EXCL`, links checked again once everything is on disk, every cap counted as it lands.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::confine::{Resolution, normalise, resolve_confined};
use super::{ExtractError, ExtractLimits, MAX_NAME_BYTES, MAX_PATH_BYTES, local_io};

/// The extraction root plus the running counters.
pub(super) struct Sink<'a> {
    root: PathBuf,
    pub(super) limits: &'a ExtractLimits,
    /// `None` only when the budget does not fit in an `Instant` (no deadline then).
    pub(super) deadline: Option<Instant>,
    pub(super) entries: u64,
    /// Directories created that no entry of their own named: they count against the entry
    /// cap on top of `entries`.
    implied_dirs: u64,
    pub(super) directories: u64,
    pub(super) bytes: u64,
    links: Vec<Link>,
}

/// A symlink written during extraction, checked again once every entry is on disk.
struct Link {
    full: PathBuf,
    rel: PathBuf,
    name: String,
    target: String,
}

impl<'a> Sink<'a> {
    /// An empty sink over `root`, an existing empty directory; the deadline starts now.
    pub(super) fn new(root: PathBuf, limits: &'a ExtractLimits) -> Self {
        Self {
            root,
            limits,
            deadline: Instant::now().checked_add(limits.timeout),
            entries: 0,
            implied_dirs: 0,
            directories: 0,
            bytes: 0,
            links: Vec::new(),
        }
    }

    pub(super) fn count_entry(&mut self) -> Result<(), ExtractError> {
        self.entries += 1;
        self.check_caps()
    }

    /// The entry cap over entries plus implied directories, and the deadline.
    fn check_caps(&self) -> Result<(), ExtractError> {
        if self.entries.saturating_add(self.implied_dirs) > self.limits.max_entries {
            return Err(ExtractError::TooManyEntries {
                limit: self.limits.max_entries,
            });
        }
        self.check_deadline()
    }

    fn check_deadline(&self) -> Result<(), ExtractError> {
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            return Err(ExtractError::Deadline {
                after: self.limits.timeout,
                entries: self.entries,
            });
        }
        Ok(())
    }

    /// The entry's path relative to the root, normalised lexically; `None` for the root.
    pub(super) fn entry_path(&self, name: &OsStr) -> Result<Option<PathBuf>, ExtractError> {
        let shown = || name.to_string_lossy().into_owned();
        if name.as_bytes().contains(&0) {
            return Err(ExtractError::Corrupt {
                detail: format!("entry {:?} has a NUL", shown()),
            });
        }
        let path = Path::new(name);
        if path.is_absolute() {
            return Err(ExtractError::AbsoluteName { name: shown() });
        }
        let rel = normalise(path).ok_or_else(|| ExtractError::EscapingName { name: shown() })?;
        // The file system would refuse these with ENAMETOOLONG, which reads as a local disk
        // failure (and a retry); the archive is what is wrong.
        if rel.as_os_str().len() > MAX_PATH_BYTES
            || rel
                .components()
                .any(|c| c.as_os_str().len() > MAX_NAME_BYTES)
        {
            return Err(ExtractError::NameTooLong { name: shown() });
        }
        if rel.components().count() > self.limits.max_depth {
            // The name is long by construction; its start says which entry it is.
            let full = shown();
            let mut name: String = full.chars().take(96).collect();
            if name.len() < full.len() {
                name.push('…');
            }
            return Err(ExtractError::TooDeep {
                name,
                limit: self.limits.max_depth,
            });
        }
        Ok((!rel.as_os_str().is_empty()).then_some(rel))
    }

    /// Creates every component of `rel` as a real directory, refusing to pass through a link
    /// or a file. Each directory created counts against the entry cap, except the last when
    /// `named` (the entry itself is that directory and was counted already).
    pub(super) fn make_dirs(
        &mut self,
        rel: &Path,
        shown: &str,
        named: bool,
    ) -> Result<(), ExtractError> {
        let mut cur = self.root.clone();
        let last = rel.components().count();
        for (i, comp) in rel.components().enumerate() {
            cur.push(comp);
            match fs::symlink_metadata(&cur) {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(ExtractError::ThroughLink {
                        name: shown.to_owned(),
                    });
                }
                Ok(_) => {
                    return Err(ExtractError::Corrupt {
                        detail: format!("entry {shown:?} needs a directory where a file is"),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if !(named && i + 1 == last) {
                        self.implied_dirs += 1;
                    }
                    // Counted before it is made: the cap bounds what is on disk.
                    self.check_caps()?;
                    fs::create_dir(&cur).map_err(local_io)?;
                    self.directories += 1;
                }
                Err(e) => return Err(local_io(e)),
            }
        }
        Ok(())
    }

    /// Prepares the parent of `rel` and clears a previous regular file of the same name (tar
    /// allows later entries to replace earlier ones); anything else in the way is refused.
    fn prepare_leaf(&mut self, rel: &Path, shown: &str) -> Result<PathBuf, ExtractError> {
        if let Some(parent) = rel.parent() {
            self.make_dirs(parent, shown, false)?;
        }
        let full = self.root.join(rel);
        match fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_file() => fs::remove_file(&full).map_err(local_io)?,
            Ok(_) => {
                return Err(ExtractError::Corrupt {
                    detail: format!("entry {shown:?} replaces a directory or link"),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(local_io(e)),
        }
        Ok(full)
    }

    pub(super) fn write_file(
        &mut self,
        rel: &Path,
        shown: &str,
        reader: &mut dyn Read,
        executable: bool,
        read_err: &dyn Fn(io::Error) -> ExtractError,
    ) -> Result<(), ExtractError> {
        let full = self.prepare_leaf(rel, shown)?;
        // O_EXCL|O_CREAT never follows a link at the final component.
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if executable { 0o755 } else { 0o644 })
            .open(&full)
            .map_err(local_io)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_err(e)),
            };
            self.bytes += n as u64;
            if self.bytes > self.limits.max_bytes {
                return Err(ExtractError::TooLarge {
                    limit: self.limits.max_bytes,
                });
            }
            self.check_deadline()?;
            out.write_all(&buf[..n]).map_err(local_io)?;
        }
        Ok(())
    }

    pub(super) fn make_symlink(
        &mut self,
        rel: &Path,
        shown: &str,
        target: &Path,
    ) -> Result<(), ExtractError> {
        let escaping = || ExtractError::EscapingLink {
            name: shown.to_owned(),
            target: target.to_string_lossy().into_owned(),
        };
        if target.as_os_str().is_empty() || target.is_absolute() {
            return Err(escaping());
        }
        if target.as_os_str().len() > MAX_PATH_BYTES {
            return Err(ExtractError::NameTooLong {
                name: shown.to_owned(),
            });
        }
        let base = rel.parent().unwrap_or(Path::new(""));
        if normalise(&base.join(target)).is_none() {
            return Err(escaping());
        }
        let full = self.prepare_leaf(rel, shown)?;
        std::os::unix::fs::symlink(target, &full).map_err(local_io)?;
        self.links.push(Link {
            full,
            rel: rel.to_path_buf(),
            name: shown.to_owned(),
            target: target.to_string_lossy().into_owned(),
        });
        Ok(())
    }

    /// The lexical check above cannot see a `..` applied after another link (`a -> .`,
    /// `b -> a/..`), and a physical check cannot see through a link that dangles: `s ->
    /// up/../x` with `up -> ..` resolves to the root's parent's `x`, harmless until someone
    /// creates that path. So once everything exists each link is resolved inside the root,
    /// following the links the archive made and treating what is missing lexically; any
    /// step above the root refuses the archive.
    pub(super) fn check_links(&self) -> Result<(), ExtractError> {
        for link in &self.links {
            self.check_deadline()?;
            let escaping = || ExtractError::EscapingLink {
                name: link.name.clone(),
                target: link.target.clone(),
            };
            match resolve_confined(&self.root, &link.rel).map_err(local_io)? {
                Resolution::Inside => {}
                Resolution::Escapes => return Err(escaping()),
                Resolution::TooLong => {
                    return Err(ExtractError::LinkLoop {
                        name: link.name.clone(),
                    });
                }
            }
            // Belt and braces: the kernel's own answer, where there is one.
            if let Ok(resolved) = fs::canonicalize(&link.full)
                && !resolved.starts_with(&self.root)
            {
                return Err(escaping());
            }
        }
        Ok(())
    }
}
