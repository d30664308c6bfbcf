//! The two archive formats, read entry by entry into a [`Sink`].

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use super::sink::Sink;
use super::{ExtractError, local_io};

/// Tar framing (headers, padding, long-name records) allowed on top of the content cap when
/// bounding the decompressed stream; generous for 10 000 entries of normal tar overhead.
const TAR_FRAMING_ALLOWANCE: u64 = 32 * 1024 * 1024;
/// Longest symlink target read from a zip entry.
const MAX_LINK_TARGET: u64 = 4096;
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

pub(super) fn extract_tar_gz(archive: &Path, sink: &mut Sink<'_>) -> Result<(), ExtractError> {
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
        tar_entry(sink, &mut entry, &read_err)?;
    }
    // The tar reader stops at the end-of-archive marker; reading the rest makes the gzip
    // decoder check its trailer, so a truncated or corrupted stream is refused.
    let mut rest = tar.into_inner();
    io::copy(&mut rest, &mut io::sink()).map_err(&read_err)?;
    Ok(())
}

/// Writes one tar entry: files, directories (also those marked only by a trailing slash)
/// and symlinks; anything else refuses the archive.
fn tar_entry<R: Read>(
    sink: &mut Sink<'_>,
    entry: &mut tar::Entry<'_, R>,
    read_err: &dyn Fn(io::Error) -> ExtractError,
) -> Result<(), ExtractError> {
    let name = OsStr::from_bytes(&entry.path_bytes()).to_owned();
    let shown = name.to_string_lossy().into_owned();
    let kind = entry.header().entry_type();
    use tar::EntryType as T;
    match kind {
        T::Regular | T::Continuous if !name.as_bytes().ends_with(b"/") => {
            let exec = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
            let rel = sink.entry_path(&name)?;
            if let Some(rel) = rel {
                sink.write_file(&rel, &shown, entry, exec, read_err)?;
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
    Ok(())
}

pub(super) fn extract_zip(archive: &Path, sink: &mut Sink<'_>) -> Result<(), ExtractError> {
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
