//! Hardened archive extraction (SPEC §17) and `spec.path` navigation.
//!
//! Artifacts come from sources the operator does not control, so extraction assumes the
//! archive is hostile: every name is normalised lexically and must stay under the root, no
//! write ever passes through a symbolic link (each parent is created as a real directory and
//! files are opened with `O_EXCL`), links are checked again physically once everything is on
//! disk, and both the entry count and the bytes actually written are capped so a bomb stops at
//! the cap rather than at a full disk.
//!
//! The entry cap counts what lands on disk, not just what the archive lists: every
//! directory a deep name implies counts like an entry, and names deeper than
//! [`DEFAULT_MAX_DEPTH`] are refused, so 100 entries cannot become 100 000 directories
//! (SPEC §24). Extraction runs against a deadline (`--fetch-timeout`): a slow disk or a
//! costly archive is a transient `FetchFailed`, never a worker held for ever.

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// SPEC §2: extracted-size cap.
pub const DEFAULT_MAX_EXTRACTED_BYTES: u64 = 256 * 1024 * 1024;
/// SPEC §2: entry cap. Files, directories (also those only implied by a deeper name) and
/// links all count.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;
/// SPEC §24: path components an entry's name may have.
pub const DEFAULT_MAX_DEPTH: usize = 64;
/// SPEC §24: extraction runs within `--fetch-timeout` (its default here).
pub const DEFAULT_EXTRACT_TIMEOUT: Duration = crate::artifact::fetch::DEFAULT_FETCH_TIMEOUT;
/// Links followed while resolving one symlink (Linux's own limit, MAXSYMLINKS).
const MAX_LINK_HOPS: u32 = 40;
/// Path components walked while resolving one symlink: a chain of long targets could
/// otherwise cost millions of `lstat`s per link.
const MAX_RESOLVE_STEPS: u32 = 4096;
/// Tar framing (headers, padding, long-name records) allowed on top of the content cap when
/// bounding the decompressed stream; generous for 10 000 entries of normal tar overhead.
const TAR_FRAMING_ALLOWANCE: u64 = 32 * 1024 * 1024;
/// Longest symlink target read from a zip entry.
const MAX_LINK_TARGET: u64 = 4096;
/// Longest file name component Linux file systems take (NAME_MAX).
const MAX_NAME_BYTES: usize = 255;
/// Longest relative path an entry may have; the root's own path must still fit in PATH_MAX.
const MAX_PATH_BYTES: usize = 2048;

/// Caps applied while extracting.
#[derive(Debug, Clone)]
pub struct ExtractLimits {
    /// Archive entries plus the directories their names imply.
    pub max_entries: u64,
    /// Bytes written to disk, counted as they are written (not as the archive claims).
    pub max_bytes: u64,
    /// Path components of an entry's (normalised) name.
    pub max_depth: usize,
    /// Wall-clock budget of one extraction, checked between entries, directories and
    /// 64 KiB writes.
    pub timeout: Duration,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_EXTRACTED_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
            timeout: DEFAULT_EXTRACT_TIMEOUT,
        }
    }
}

/// Archive formats recognised by magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveFormat {
    /// Flux artifacts: a gzip-compressed tarball.
    TarGz,
    /// Native CUE module artifacts.
    Zip,
}

/// What an extraction produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractStats {
    pub format: ArchiveFormat,
    /// Archive entries processed.
    pub entries: u64,
    /// Directories created (named by an entry or implied by a deeper name).
    pub directories: u64,
    pub bytes: u64,
}

/// Why an archive was refused. Everything but [`Self::Io`] is about the archive itself and
/// maps to SPEC §4's `InvalidArtifact` stall.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("artifact is neither a gzip tarball nor a zip archive")]
    UnknownFormat,
    #[error("archive entry {name:?} has an absolute name")]
    AbsoluteName { name: String },
    #[error("archive entry {name:?} escapes the extraction root")]
    EscapingName { name: String },
    #[error("archive entry {name:?} has a name longer than a file system allows")]
    NameTooLong { name: String },
    #[error("archive entry {name:?} would be written through a symbolic link")]
    ThroughLink { name: String },
    #[error("archive symlink {name:?} -> {target:?} points outside the extraction root")]
    EscapingLink { name: String, target: String },
    #[error("archive entry {name:?} is a hard link, which is not allowed")]
    HardLink { name: String },
    #[error("archive entry {name:?} is a {kind}, which is not allowed")]
    SpecialFile { name: String, kind: String },
    #[error(
        "archive has more than {limit} entries (files, directories and links all count, also \
         directories implied by deeper names)"
    )]
    TooManyEntries { limit: u64 },
    #[error("archive entry {name:?} is nested deeper than {limit} directories")]
    TooDeep { name: String, limit: usize },
    #[error("archive symlink {name:?} is part of a loop or of a chain too long to resolve")]
    LinkLoop { name: String },
    /// Extraction took longer than its budget; the archive may be fine, the disk slow.
    #[error(
        "artifact extraction did not finish within {}s (--fetch-timeout) after {entries} entries",
        after.as_secs_f64()
    )]
    Deadline { after: Duration, entries: u64 },
    #[error("archive expands to more than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("archive is corrupt or truncated: {detail}")]
    Corrupt { detail: String },
    /// The local disk failed, not the archive.
    #[error("extraction: local I/O error: {detail}")]
    Io { detail: String },
}

fn local_io(e: io::Error) -> ExtractError {
    ExtractError::Io {
        detail: e.to_string(),
    }
}

/// Reads the magic bytes of `archive`.
pub fn detect_format(archive: &Path) -> Result<ArchiveFormat, ExtractError> {
    let mut magic = [0u8; 4];
    let mut f = File::open(archive).map_err(local_io)?;
    let mut n = 0;
    while n < magic.len() {
        match f.read(&mut magic[n..]).map_err(local_io)? {
            0 => break,
            k => n += k,
        }
    }
    match &magic[..n] {
        [0x1f, 0x8b, ..] => Ok(ArchiveFormat::TarGz),
        [b'P', b'K', 3, 4] | [b'P', b'K', 5, 6] => Ok(ArchiveFormat::Zip),
        _ => Err(ExtractError::UnknownFormat),
    }
}

/// Extracts `archive` into `dest`, which must be an existing, empty directory. On error the
/// caller removes `dest` (it is normally a `tempfile::TempDir`); nothing is ever written
/// outside it.
pub fn extract(
    archive: &Path,
    dest: &Path,
    limits: &ExtractLimits,
) -> Result<ExtractStats, ExtractError> {
    let format = detect_format(archive)?;
    if fs::read_dir(dest).map_err(local_io)?.next().is_some() {
        return Err(ExtractError::Io {
            detail: format!("{} is not empty", dest.display()),
        });
    }
    let root = fs::canonicalize(dest).map_err(local_io)?;
    let mut sink = Sink {
        root,
        limits,
        deadline: Instant::now().checked_add(limits.timeout),
        entries: 0,
        implied_dirs: 0,
        directories: 0,
        bytes: 0,
        links: Vec::new(),
    };
    match format {
        ArchiveFormat::TarGz => extract_tar_gz(archive, &mut sink)?,
        ArchiveFormat::Zip => extract_zip(archive, &mut sink)?,
    }
    sink.check_links()?;
    Ok(ExtractStats {
        format,
        entries: sink.entries,
        directories: sink.directories,
        bytes: sink.bytes,
    })
}

/// Which bound a [`CappedReader`] hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hit {
    Size,
    Deadline,
}

/// Bounds a decompressed stream in size and time; `hit` tells a cap error apart from a
/// corrupt stream after the error has passed through the tar reader (which also reads long
/// name and header records the entry loop never sees).
struct CappedReader<R> {
    inner: R,
    remaining: u64,
    deadline: Option<Instant>,
    hit: Rc<Cell<Option<Hit>>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            self.hit.set(Some(Hit::Deadline));
            return Err(io::Error::other("extraction deadline passed"));
        }
        let n = self.inner.read(buf)?;
        if n as u64 > self.remaining {
            self.hit.set(Some(Hit::Size));
            return Err(io::Error::other("decompressed stream exceeds the cap"));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

fn extract_tar_gz(archive: &Path, sink: &mut Sink<'_>) -> Result<(), ExtractError> {
    let hit = Rc::new(Cell::new(None));
    let file = File::open(archive).map_err(local_io)?;
    let reader = CappedReader {
        inner: flate2::read::GzDecoder::new(BufReader::new(file)),
        remaining: sink.limits.max_bytes.saturating_add(TAR_FRAMING_ALLOWANCE),
        deadline: sink.deadline,
        hit: hit.clone(),
    };
    let limit = sink.limits.max_bytes;
    let after = sink.limits.timeout;
    let entries_seen = Rc::new(Cell::new(0u64));
    let seen = entries_seen.clone();
    let read_err = move |e: io::Error| match hit.get() {
        Some(Hit::Size) => ExtractError::TooLarge { limit },
        Some(Hit::Deadline) => ExtractError::Deadline {
            after,
            entries: seen.get(),
        },
        None => ExtractError::Corrupt {
            detail: e.to_string(),
        },
    };
    let mut tar = tar::Archive::new(reader);
    for entry in tar.entries().map_err(&read_err)? {
        let mut entry = entry.map_err(&read_err)?;
        sink.count_entry()?;
        entries_seen.set(sink.entries);
        let name = OsStr::from_bytes(&entry.path_bytes()).to_owned();
        let shown = name.to_string_lossy().into_owned();
        let kind = entry.header().entry_type();
        use tar::EntryType as T;
        match kind {
            T::Regular | T::Continuous if !name.as_bytes().ends_with(b"/") => {
                let exec = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
                let rel = sink.entry_path(&name)?;
                if let Some(rel) = rel {
                    sink.write_file(&rel, &shown, &mut entry, exec, &read_err)?;
                } else {
                    return Err(ExtractError::Corrupt {
                        detail: format!("file entry {shown:?} names the root"),
                    });
                }
            }
            // Old tar writers mark directories only by the trailing slash.
            T::Regular | T::Directory => {
                if let Some(rel) = sink.entry_path(&name)? {
                    sink.make_dirs(&rel, &shown, true)?;
                }
            }
            T::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .map(|t| OsStr::from_bytes(&t).to_owned())
                    .ok_or_else(|| ExtractError::Corrupt {
                        detail: format!("symlink {shown:?} has no target"),
                    })?;
                let rel = sink
                    .entry_path(&name)?
                    .ok_or_else(|| ExtractError::Corrupt {
                        detail: format!("symlink entry {shown:?} names the root"),
                    })?;
                sink.make_symlink(&rel, &shown, Path::new(&target))?;
            }
            T::Link => return Err(ExtractError::HardLink { name: shown }),
            T::Char | T::Block => {
                return Err(ExtractError::SpecialFile {
                    name: shown,
                    kind: "device".into(),
                });
            }
            T::Fifo => {
                return Err(ExtractError::SpecialFile {
                    name: shown,
                    kind: "FIFO".into(),
                });
            }
            T::XGlobalHeader => {}
            other => {
                return Err(ExtractError::SpecialFile {
                    name: shown,
                    kind: format!("tar entry of type {:?}", other.as_byte() as char),
                });
            }
        }
    }
    // The tar reader stops at the end-of-archive marker; reading the rest makes the gzip
    // decoder check its trailer, so a truncated or corrupted stream is refused.
    let mut rest = tar.into_inner();
    io::copy(&mut rest, &mut io::sink()).map_err(&read_err)?;
    Ok(())
}

fn extract_zip(archive: &Path, sink: &mut Sink<'_>) -> Result<(), ExtractError> {
    let corrupt = |e: zip::result::ZipError| ExtractError::Corrupt {
        detail: e.to_string(),
    };
    let file = File::open(archive).map_err(local_io)?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(corrupt)?;
    if zip.len() as u64 > sink.limits.max_entries {
        return Err(ExtractError::TooManyEntries {
            limit: sink.limits.max_entries,
        });
    }
    let read_err = |e: io::Error| ExtractError::Corrupt {
        detail: e.to_string(),
    };
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(corrupt)?;
        sink.count_entry()?;
        let name = OsStr::from_bytes(entry.name_raw()).to_owned();
        let shown = name.to_string_lossy().into_owned();
        let mode = entry.unix_mode().unwrap_or(0);
        let file_type = mode & 0o170_000;
        let rel = sink.entry_path(&name)?;
        if entry.is_symlink() {
            let mut target = Vec::new();
            (&mut entry)
                .take(MAX_LINK_TARGET)
                .read_to_end(&mut target)
                .map_err(read_err)?;
            let rel = rel.ok_or_else(|| ExtractError::Corrupt {
                detail: format!("symlink entry {shown:?} names the root"),
            })?;
            sink.make_symlink(&rel, &shown, Path::new(OsStr::from_bytes(&target)))?;
        } else if entry.is_dir() || file_type == 0o040_000 {
            if let Some(rel) = rel {
                sink.make_dirs(&rel, &shown, true)?;
            }
        } else if file_type == 0o020_000 || file_type == 0o060_000 {
            return Err(ExtractError::SpecialFile {
                name: shown,
                kind: "device".into(),
            });
        } else if file_type == 0o010_000 {
            return Err(ExtractError::SpecialFile {
                name: shown,
                kind: "FIFO".into(),
            });
        } else if file_type == 0o140_000 {
            return Err(ExtractError::SpecialFile {
                name: shown,
                kind: "socket".into(),
            });
        } else {
            let rel = rel.ok_or_else(|| ExtractError::Corrupt {
                detail: format!("file entry {shown:?} names the root"),
            })?;
            sink.write_file(&rel, &shown, &mut entry, mode & 0o111 != 0, &read_err)?;
        }
    }
    Ok(())
}

/// The extraction root plus the running counters.
struct Sink<'a> {
    root: PathBuf,
    limits: &'a ExtractLimits,
    /// `None` only when the budget does not fit in an `Instant` (no deadline then).
    deadline: Option<Instant>,
    entries: u64,
    /// Directories created that no entry of their own named: they count against the entry
    /// cap on top of `entries`.
    implied_dirs: u64,
    directories: u64,
    bytes: u64,
    links: Vec<Link>,
}

/// A symlink written during extraction, checked again once every entry is on disk.
struct Link {
    full: PathBuf,
    rel: PathBuf,
    name: String,
    target: String,
}

impl Sink<'_> {
    fn count_entry(&mut self) -> Result<(), ExtractError> {
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
    fn entry_path(&self, name: &OsStr) -> Result<Option<PathBuf>, ExtractError> {
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
    fn make_dirs(&mut self, rel: &Path, shown: &str, named: bool) -> Result<(), ExtractError> {
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

    fn write_file(
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

    fn make_symlink(&mut self, rel: &Path, shown: &str, target: &Path) -> Result<(), ExtractError> {
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
    fn check_links(&self) -> Result<(), ExtractError> {
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

/// Where resolving a link inside the root ended.
#[derive(Debug, PartialEq, Eq)]
enum Resolution {
    Inside,
    Escapes,
    /// More than [`MAX_LINK_HOPS`] links or [`MAX_RESOLVE_STEPS`] components, or a path
    /// longer than the file system takes.
    TooLong,
}

/// Resolves the symlink at `rel` (relative to `root`) as the kernel would, but never
/// touching anything outside `root`: a component that is a link is replaced by its target
/// (an absolute target escapes), a `..` at the root escapes, and from the first missing
/// component on the rest is applied lexically (what a later-created path would give).
fn resolve_confined(root: &Path, rel: &Path) -> io::Result<Resolution> {
    let mut pos: Vec<std::ffi::OsString> = rel
        .parent()
        .map(|p| p.components().map(|c| c.as_os_str().to_owned()).collect())
        .unwrap_or_default();
    let mut pending: std::collections::VecDeque<std::ffi::OsString> =
        std::collections::VecDeque::new();
    pending.push_back(rel.file_name().unwrap_or_default().to_owned());
    let (mut hops, mut steps, mut missing) = (0u32, 0u32, false);
    while let Some(comp) = pending.pop_front() {
        steps += 1;
        if steps > MAX_RESOLVE_STEPS {
            return Ok(Resolution::TooLong);
        }
        match comp.as_bytes() {
            b"" | b"." => continue,
            b".." => {
                if pos.pop().is_none() {
                    return Ok(Resolution::Escapes);
                }
                continue;
            }
            _ => {}
        }
        pos.push(comp);
        if missing {
            continue;
        }
        let full: PathBuf = std::iter::once(root.as_os_str())
            .chain(pos.iter().map(|c| c.as_os_str()))
            .collect();
        // Links can expand a short name past what the file system accepts (ENAMETOOLONG
        // would read as a local disk failure and a retry); the archive is what is wrong.
        if full.as_os_str().len() > MAX_PATH_BYTES {
            return Ok(Resolution::TooLong);
        }
        match fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return Ok(Resolution::TooLong);
                }
                let target = fs::read_link(&full)?;
                if target.is_absolute() {
                    return Ok(Resolution::Escapes);
                }
                pos.pop();
                for c in target.components().rev() {
                    pending.push_front(c.as_os_str().to_owned());
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing = true,
            // A file used as a directory: nothing exists below it; go on lexically.
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => missing = true,
            Err(e) if e.kind() == io::ErrorKind::InvalidFilename => {
                return Ok(Resolution::TooLong);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Resolution::Inside)
}

/// Lexically normalises a relative path; `None` if it climbs above its start.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::Normal(c) => out.push(c),
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_keeps_inner_parent_dirs_and_refuses_escapes() {
        assert_eq!(
            normalise(Path::new("a/./b/../c")),
            Some(PathBuf::from("a/c"))
        );
        assert_eq!(normalise(Path::new("./")), Some(PathBuf::new()));
        assert_eq!(normalise(Path::new("a/../..")), None);
        assert_eq!(normalise(Path::new("../x")), None);
    }

    #[test]
    fn magic_bytes_pick_the_format() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&[u8], Option<ArchiveFormat>); 5] = [
            (&[0x1f, 0x8b, 8, 0], Some(ArchiveFormat::TarGz)),
            (b"PK\x03\x04rest", Some(ArchiveFormat::Zip)),
            (b"PK\x05\x06", Some(ArchiveFormat::Zip)),
            (b"ustar", None),
            (b"", None),
        ];
        for (i, (bytes, want)) in cases.iter().enumerate() {
            let p = dir.path().join(i.to_string());
            fs::write(&p, bytes).unwrap();
            match want {
                Some(f) => assert_eq!(detect_format(&p).unwrap(), *f),
                None => assert_eq!(detect_format(&p).unwrap_err(), ExtractError::UnknownFormat),
            }
        }
    }
}
