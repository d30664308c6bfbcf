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
//!
//! The parts: `archive` reads the two formats entry by entry, `sink` writes each entry
//! under the root and keeps the counters, `confine` resolves names and links without
//! leaving the root.

mod archive;
mod confine;
mod sink;

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::Path;
use std::time::Duration;

use sink::Sink;

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
    /// The format its magic bytes named.
    pub format: ArchiveFormat,
    /// Archive entries processed.
    pub entries: u64,
    /// Directories created (named by an entry or implied by a deeper name).
    pub directories: u64,
    /// Bytes written to disk.
    pub bytes: u64,
}

/// Why an archive was refused. Everything but [`Self::Io`] is about the archive itself and
/// maps to SPEC §4's `InvalidArtifact` stall.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("artifact is neither a gzip tarball nor a zip archive")]
    /// Neither gzip nor zip magic bytes.
    UnknownFormat,
    #[error("archive entry {name:?} has an absolute name")]
    /// A name starting at `/`.
    AbsoluteName {
        /// The entry's name as the archive gives it.
        name: String,
    },
    #[error("archive entry {name:?} escapes the extraction root")]
    /// A name whose `..` climbs above the root.
    EscapingName {
        /// The entry's name as the archive gives it.
        name: String,
    },
    #[error("archive entry {name:?} has a name longer than a file system allows")]
    /// A name component or path longer than a file system takes.
    NameTooLong {
        /// The entry's name as the archive gives it.
        name: String,
    },
    #[error("archive entry {name:?} would be written through a symbolic link")]
    /// A name that passes through a symlink an earlier entry made.
    ThroughLink {
        /// The entry's name as the archive gives it.
        name: String,
    },
    #[error("archive symlink {name:?} -> {target:?} points outside the extraction root")]
    /// A symlink whose target is outside the root.
    EscapingLink {
        /// The entry's name as the archive gives it.
        name: String,
        /// The link's target as archived.
        target: String,
    },
    #[error("archive entry {name:?} is a hard link, which is not allowed")]
    /// Hard links are refused: their target is not checked by name.
    HardLink {
        /// The entry's name as the archive gives it.
        name: String,
    },
    #[error("archive entry {name:?} is a {kind}, which is not allowed")]
    /// A device, FIFO, socket or other non-file entry.
    SpecialFile {
        /// The entry's name as the archive gives it.
        name: String,
        /// What the entry is.
        kind: String,
    },
    #[error(
        "archive has more than {limit} entries (files, directories and links all count, also \
         directories implied by deeper names)"
    )]
    /// More entries (with the directories they imply) than the cap.
    TooManyEntries {
        /// The cap.
        limit: u64,
    },
    #[error("archive entry {name:?} is nested deeper than {limit} directories")]
    /// A name nested deeper than the cap.
    TooDeep {
        /// The entry's name as the archive gives it.
        name: String,
        /// The cap.
        limit: usize,
    },
    #[error("archive symlink {name:?} is part of a loop or of a chain too long to resolve")]
    /// A symlink that loops, or resolves through too long a chain.
    LinkLoop {
        /// The entry's name as the archive gives it.
        name: String,
    },
    /// Extraction took longer than its budget; the archive may be fine, the disk slow.
    #[error(
        "artifact extraction did not finish within {}s (--fetch-timeout) after {entries} entries",
        after.as_secs_f64()
    )]
    Deadline {
        /// The budget that ran out.
        after: Duration,
        /// Entries processed by then.
        entries: u64,
    },
    #[error("archive expands to more than {limit} bytes")]
    /// More bytes written than the cap.
    TooLarge {
        /// The cap.
        limit: u64,
    },
    #[error("archive is corrupt or truncated: {detail}")]
    /// The archive could not be read.
    Corrupt {
        /// What the reader or the file system said.
        detail: String,
    },
    /// The local disk failed, not the archive.
    #[error("extraction: local I/O error: {detail}")]
    Io {
        /// What the reader or the file system said.
        detail: String,
    },
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
    let mut sink = Sink::new(root, limits);
    match format {
        ArchiveFormat::TarGz => archive::extract_tar_gz(archive, &mut sink)?,
        ArchiveFormat::Zip => archive::extract_zip(archive, &mut sink)?,
    }
    sink.check_links()?;
    Ok(ExtractStats {
        format,
        entries: sink.entries,
        directories: sink.directories,
        bytes: sink.bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::confine::normalise;
    use super::*;
    use std::path::PathBuf;

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
