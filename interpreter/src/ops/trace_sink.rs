//! `--trace-dir`: every attempt appended as JSON lines (its header names the release and
//! the attempt id) to `trace-<start ms>-<n>.jsonl`, rotated at `--trace-max-bytes` with
//! at most `--trace-max-files` files kept, so a long-running operator's traces stay bounded.
//!
//! An attempt is written whole under one lock: files never interleave attempts, and a
//! rotation never splits one (an attempt larger than the limit gets a file of its own).
//! `opm-sim replay DIR` reads the directory as it is.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Default `--trace-max-bytes`: 16 MiB per file.
pub const DEFAULT_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Default `--trace-max-files`: with the size limit, at most 160 MiB of traces.
pub const DEFAULT_MAX_FILES: usize = 10;

/// Why a trace could not be written. Tracing is best effort: the driver logs these.
#[derive(Debug, thiserror::Error)]
pub enum TraceSinkError {
    #[error("{path}: {source}")]
    /// Writing or rotating a trace file failed.
    Io {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

struct Open {
    file: File,
    path: PathBuf,
    written: u64,
}

struct State {
    next_index: u64,
    open: Option<Open>,
}

/// The rotating writer shared by all attempts.
pub struct TraceSink {
    dir: PathBuf,
    prefix: String,
    max_bytes: u64,
    max_files: usize,
    state: Mutex<State>,
}

impl TraceSink {
    /// Writes into `dir` (created if missing); `prefix` keeps restarts from reusing names.
    pub fn new(
        dir: &Path,
        prefix: &str,
        max_bytes: u64,
        max_files: usize,
    ) -> Result<Self, TraceSinkError> {
        std::fs::create_dir_all(dir).map_err(|source| TraceSinkError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            max_bytes: max_bytes.max(1),
            max_files: max_files.max(1),
            state: Mutex::new(State {
                next_index: 0,
                open: None,
            }),
        })
    }

    /// The directory traces are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one attempt's JSON lines (newline-terminated).
    pub fn write_attempt(&self, jsonl: &str) -> Result<(), TraceSinkError> {
        // A poisoned lock only means another attempt panicked mid-write; keep going.
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let len = jsonl.len() as u64;
        let full = st
            .open
            .as_ref()
            .is_some_and(|o| o.written > 0 && o.written + len > self.max_bytes);
        if full || st.open.is_none() {
            st.open = None;
            let path = self
                .dir
                .join(format!("trace-{}-{:06}.jsonl", self.prefix, st.next_index));
            st.next_index += 1;
            // Owner-only (SPEC §23): traces hold release specs and render inputs.
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
                .map_err(|source| TraceSinkError::Io {
                    path: path.clone(),
                    source,
                })?;
            st.open = Some(Open {
                file,
                path,
                written: 0,
            });
            self.prune()?;
        }
        // Set just above.
        let open = st.open.as_mut().expect("trace file open");
        open.file
            .write_all(jsonl.as_bytes())
            .map_err(|source| TraceSinkError::Io {
                path: open.path.clone(),
                source,
            })?;
        open.written += len;
        Ok(())
    }

    /// Deletes the oldest trace files beyond `max_files` (names sort by age).
    fn prune(&self) -> Result<(), TraceSinkError> {
        let io = |source| TraceSinkError::Io {
            path: self.dir.clone(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map_err(io)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("trace-") && n.ends_with(".jsonl"))
            })
            .collect();
        files.sort();
        let excess = files.len().saturating_sub(self.max_files);
        for old in &files[..excess] {
            std::fs::remove_file(old).map_err(|source| TraceSinkError::Io {
                path: old.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn rotates_at_the_size_limit_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let sink = TraceSink::new(dir.path(), "100", 25, 3).unwrap();
        for i in 0..10 {
            // 10 bytes each: two attempts per file.
            sink.write_attempt(&format!("attempt-{i}\n")).unwrap();
        }
        assert_eq!(
            names(dir.path()),
            [
                "trace-100-000002.jsonl",
                "trace-100-000003.jsonl",
                "trace-100-000004.jsonl"
            ]
        );
        let last = std::fs::read_to_string(dir.path().join("trace-100-000004.jsonl")).unwrap();
        assert_eq!(last, "attempt-8\nattempt-9\n");
    }

    #[test]
    fn trace_files_are_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let sink = TraceSink::new(dir.path(), "5", 1 << 20, 3).unwrap();
        sink.write_attempt("a\n").unwrap();
        let f = dir.path().join("trace-5-000000.jsonl");
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }

    #[test]
    fn an_attempt_larger_than_the_limit_gets_its_own_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let sink = TraceSink::new(dir.path(), "7", 8, 10).unwrap();
        sink.write_attempt("small\n").unwrap();
        sink.write_attempt("a much longer attempt\n").unwrap();
        sink.write_attempt("x\n").unwrap();
        assert_eq!(names(dir.path()).len(), 3);
        let mid = std::fs::read_to_string(dir.path().join("trace-7-000001.jsonl")).unwrap();
        assert_eq!(mid, "a much longer attempt\n");
    }

    #[test]
    fn other_files_in_the_directory_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "keep").unwrap();
        let sink = TraceSink::new(dir.path(), "1", 1, 1).unwrap();
        sink.write_attempt("a\n").unwrap();
        sink.write_attempt("b\n").unwrap();
        assert_eq!(names(dir.path()), ["notes.txt", "trace-1-000001.jsonl"]);
    }
}
