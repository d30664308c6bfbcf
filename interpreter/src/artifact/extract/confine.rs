//! Lexical normalisation and confined link resolution: neither ever touches a path outside
//! the extraction root.

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::{MAX_LINK_HOPS, MAX_PATH_BYTES, MAX_RESOLVE_STEPS};

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Resolution {
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
pub(super) fn resolve_confined(root: &Path, rel: &Path) -> io::Result<Resolution> {
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
pub(super) fn normalise(path: &Path) -> Option<PathBuf> {
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
