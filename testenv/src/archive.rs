//! Building artifacts in the test: tar.gz (what Flux serves) and zip, from a directory
//! or from in-memory entries, plus their `sha256:<hex>` digests.
//!
//! Archives are deterministic (sorted entries, zero mtimes, fixed modes), so the same
//! input always has the same digest.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// One file in an archive: a `/`-separated relative path and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub contents: Vec<u8>,
}

impl Entry {
    pub fn new(path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Self {
        Entry {
            path: path.into(),
            contents: contents.into(),
        }
    }
}

/// `sha256:<lowercase hex>` of `bytes`, the digest format Flux artifacts use.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// All regular files under `dir`, as entries relative to it, sorted by path.
pub fn entries_from_dir(dir: &Path) -> Result<Vec<Entry>> {
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let rel = file
                .strip_prefix(dir)
                .map_err(|e| Error::Archive(e.to_string()))?;
            let path = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let contents = std::fs::read(&file)
                .map_err(|e| Error::io(format!("read {}", file.display()), e))?;
            Ok(Entry { path, contents })
        })
        .collect()
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let read =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("read {}", dir.display()), e))?;
    for entry in read {
        let entry = entry.map_err(|e| Error::io(format!("read {}", dir.display()), e))?;
        let ty = entry
            .file_type()
            .map_err(|e| Error::io(format!("stat {}", entry.path().display()), e))?;
        if ty.is_dir() {
            collect_files(&entry.path(), out)?;
        } else if ty.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

/// A gzip-compressed tar of `entries` (no directory entries, like Flux's artifacts).
pub fn tar_gz(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(entry.contents.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, &entry.path, entry.contents.as_slice())
            .map_err(|e| Error::Archive(format!("tar {}: {e}", entry.path)))?;
    }
    let gz = builder
        .into_inner()
        .map_err(|e| Error::Archive(format!("tar: {e}")))?;
    gz.finish()
        .map_err(|e| Error::Archive(format!("gzip: {e}")))
}

/// A tar.gz of everything under `dir`.
pub fn tar_gz_dir(dir: &Path) -> Result<Vec<u8>> {
    tar_gz(&entries_from_dir(dir)?)
}

/// A deflate-compressed zip of `entries`.
pub fn zip(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    for entry in entries {
        writer
            .start_file(entry.path.as_str(), options)
            .map_err(|e| Error::Archive(format!("zip {}: {e}", entry.path)))?;
        writer
            .write_all(&entry.contents)
            .map_err(|e| Error::Archive(format!("zip {}: {e}", entry.path)))?;
    }
    let cursor = writer
        .finish()
        .map_err(|e| Error::Archive(format!("zip: {e}")))?;
    Ok(cursor.into_inner())
}

/// A zip of everything under `dir`.
pub fn zip_dir(dir: &Path) -> Result<Vec<u8>> {
    zip(&entries_from_dir(dir)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn digest_has_flux_format() {
        // sha256 of the empty string
        assert_eq!(
            sha256_digest(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn tar_gz_round_trips_and_is_deterministic() {
        let entries = vec![
            Entry::new("cue.mod/module.cue", "module: \"a.b/c@v0\"\n"),
            Entry::new("release.cue", "package release\n"),
        ];
        let a = tar_gz(&entries).unwrap();
        let b = tar_gz(&entries).unwrap();
        assert_eq!(sha256_digest(&a), sha256_digest(&b));
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(a.as_slice()));
        let mut seen = Vec::new();
        for file in archive.entries().unwrap() {
            let mut file = file.unwrap();
            let mut contents = Vec::new();
            file.read_to_end(&mut contents).unwrap();
            seen.push(Entry::new(
                file.path().unwrap().to_string_lossy().into_owned(),
                contents,
            ));
        }
        assert_eq!(seen, entries);
    }

    #[test]
    fn zip_round_trips() {
        let entries = vec![Entry::new("a/b.txt", "hello")];
        let bytes = zip(&entries).unwrap();
        let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
        let mut file = archive.by_name("a/b.txt").unwrap();
        let mut s = String::new();
        file.read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");
    }

    #[test]
    fn dir_entries_are_relative_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("z/y")).unwrap();
        std::fs::write(dir.path().join("z/y/f.cue"), "x").unwrap();
        std::fs::write(dir.path().join("a.cue"), "y").unwrap();
        let paths: Vec<_> = entries_from_dir(dir.path())
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, vec!["a.cue", "z/y/f.cue"]);
    }
}
