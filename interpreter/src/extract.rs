//! Hardened archive extraction (SPEC §17) and `spec.path` navigation.
//!
//! Artifacts come from sources the operator does not control, so extraction assumes the
//! archive is hostile: every name is normalised lexically and must stay under the root, no
//! write ever passes through a symbolic link (each parent is created as a real directory and
//! files are opened with `O_EXCL`), links are checked again physically once everything is on
//! disk, and both the entry count and the bytes actually written are capped so a bomb stops at
//! the cap rather than at a full disk.

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use crate::fetch::FailureClass;

/// SPEC §2: extracted-size cap.
pub const DEFAULT_MAX_EXTRACTED_BYTES: u64 = 256 * 1024 * 1024;
/// SPEC §2: entry cap.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;
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
    pub max_entries: u64,
    /// Bytes written to disk, counted as they are written (not as the archive claims).
    pub max_bytes: u64,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_EXTRACTED_BYTES,
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
    pub entries: u64,
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
    #[error("archive has more than {limit} entries")]
    TooManyEntries { limit: u64 },
    #[error("archive expands to more than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("archive is corrupt or truncated: {detail}")]
    Corrupt { detail: String },
    /// The local disk failed, not the archive.
    #[error("extraction: local I/O error: {detail}")]
    Io { detail: String },
}

impl ExtractError {
    pub fn class(&self) -> FailureClass {
        match self {
            Self::Io { .. } => FailureClass::Transient,
            Self::UnknownFormat
            | Self::AbsoluteName { .. }
            | Self::EscapingName { .. }
            | Self::NameTooLong { .. }
            | Self::ThroughLink { .. }
            | Self::EscapingLink { .. }
            | Self::HardLink { .. }
            | Self::SpecialFile { .. }
            | Self::TooManyEntries { .. }
            | Self::TooLarge { .. }
            | Self::Corrupt { .. } => FailureClass::Stalled,
        }
    }

    /// The SPEC §4 condition reason this failure leads to.
    pub fn reason(&self) -> &'static str {
        match self.class() {
            FailureClass::Transient => "FetchFailed",
            FailureClass::Stalled => "InvalidArtifact",
        }
    }
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
        entries: 0,
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
        bytes: sink.bytes,
    })
}

/// Bounds a decompressed stream; `hit` tells a cap error apart from a corrupt stream after
/// the error has passed through the tar reader.
struct CappedReader<R> {
    inner: R,
    remaining: u64,
    hit: Rc<Cell<bool>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.remaining {
            self.hit.set(true);
            return Err(io::Error::other("decompressed stream exceeds the cap"));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

fn extract_tar_gz(archive: &Path, sink: &mut Sink<'_>) -> Result<(), ExtractError> {
    let hit = Rc::new(Cell::new(false));
    let file = File::open(archive).map_err(local_io)?;
    let reader = CappedReader {
        inner: flate2::read::GzDecoder::new(BufReader::new(file)),
        remaining: sink.limits.max_bytes.saturating_add(TAR_FRAMING_ALLOWANCE),
        hit: hit.clone(),
    };
    let limit = sink.limits.max_bytes;
    let read_err = |e: io::Error| {
        if hit.get() {
            ExtractError::TooLarge { limit }
        } else {
            ExtractError::Corrupt {
                detail: e.to_string(),
            }
        }
    };
    let mut tar = tar::Archive::new(reader);
    for entry in tar.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        sink.count_entry()?;
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
                    sink.make_dirs(&rel, &shown)?;
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
    io::copy(&mut rest, &mut io::sink()).map_err(read_err)?;
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
                sink.make_dirs(&rel, &shown)?;
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
    entries: u64,
    bytes: u64,
    links: Vec<(PathBuf, String, String)>,
}

impl Sink<'_> {
    fn count_entry(&mut self) -> Result<(), ExtractError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ExtractError::TooManyEntries {
                limit: self.limits.max_entries,
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
        Ok((!rel.as_os_str().is_empty()).then_some(rel))
    }

    /// Creates every component of `rel` as a real directory, refusing to pass through a link
    /// or a file.
    fn make_dirs(&self, rel: &Path, shown: &str) -> Result<(), ExtractError> {
        let mut cur = self.root.clone();
        for comp in rel.components() {
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
                    fs::create_dir(&cur).map_err(local_io)?;
                }
                Err(e) => return Err(local_io(e)),
            }
        }
        Ok(())
    }

    /// Prepares the parent of `rel` and clears a previous regular file of the same name (tar
    /// allows later entries to replace earlier ones); anything else in the way is refused.
    fn prepare_leaf(&self, rel: &Path, shown: &str) -> Result<PathBuf, ExtractError> {
        if let Some(parent) = rel.parent() {
            self.make_dirs(parent, shown)?;
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
        self.links.push((
            full,
            shown.to_owned(),
            target.to_string_lossy().into_owned(),
        ));
        Ok(())
    }

    /// The lexical check above cannot see a `..` applied after another link (`a -> .`,
    /// `b -> a/..`), so once everything exists each link is resolved for real.
    fn check_links(&self) -> Result<(), ExtractError> {
        for (full, name, target) in &self.links {
            match fs::canonicalize(full) {
                Ok(resolved) if !resolved.starts_with(&self.root) => {
                    return Err(ExtractError::EscapingLink {
                        name: name.clone(),
                        target: target.clone(),
                    });
                }
                // Dangling or looping links cannot reach anything; path navigation refuses
                // them later if they are used.
                _ => {}
            }
        }
        Ok(())
    }
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
