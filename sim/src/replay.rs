//! `opm-sim replay`: feeds recorded inputs back to the core and compares every effect.
//!
//! A trace file holds one or more attempts, each a header line then its records (the
//! operator's rotating sink appends attempts; older traces hold one). Errors name the file
//! and line, so a corrupted trace is found without reading JSON by eye.

use std::io::Write;
use std::path::{Path, PathBuf};

use opm_core::trace::{Divergence, Replayer, TraceHeader, TraceLine, TraceRecord, parse_line};

/// Why a replay failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a trace line: {why}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        why: String,
    },
    #[error("{path}: no trace files found")]
    Empty { path: PathBuf },
    #[error("{0}")]
    Differs(Box<Difference>),
    #[error("writing the explanation: {0}")]
    Write(#[from] std::io::Error),
}

/// The first effect the core produced differently from the recording.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}:{line}: attempt {attempt} of {release} differs at step {step} (seq {seq}):\n  expected: {expected}\n  got:      {got}"
)]
pub struct Difference {
    pub path: PathBuf,
    pub line: usize,
    pub attempt: String,
    pub release: String,
    pub step: u32,
    pub seq: u64,
    pub expected: String,
    pub got: String,
}

impl ReplayError {
    pub fn exit_code(&self) -> u8 {
        match self {
            ReplayError::Differs(_) => 1,
            _ => 2,
        }
    }
}

/// What a successful replay covered.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub files: usize,
    pub attempts: usize,
}

/// Regular files under `dir`, depth first (the e2e harness gives each operator its own
/// subdirectory).
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), ReplayError> {
    let rd = std::fs::read_dir(dir).map_err(|source| ReplayError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, files)?;
        } else if p.is_file() {
            files.push(p);
        }
    }
    Ok(())
}

/// Trace files: each path itself, or every file under a directory in path order. A
/// directory without any is an error: a replay step that checks nothing must not pass.
fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ReplayError> {
    let mut files = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| ReplayError::Read {
            path: p.clone(),
            source,
        })?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found)?;
            if found.is_empty() {
                return Err(ReplayError::Empty { path: p.clone() });
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

pub fn replay_paths(
    paths: &[PathBuf],
    explain: bool,
    out: &mut impl Write,
) -> Result<Stats, ReplayError> {
    let mut stats = Stats::default();
    for f in collect(paths)? {
        let text = std::fs::read_to_string(&f).map_err(|source| ReplayError::Read {
            path: f.clone(),
            source,
        })?;
        stats.attempts += replay_text(&f, &text, explain, out)?;
        stats.files += 1;
    }
    Ok(stats)
}

/// The attempt being replayed and where it started.
struct Current {
    header: TraceHeader,
    replayer: Replayer,
}

impl Current {
    fn name(&self) -> String {
        self.header
            .attempt
            .map_or_else(|| "(unnumbered)".to_string(), |id| format!("#{id}"))
    }

    fn release(&self) -> String {
        let k = &self.header.release;
        format!("{} {}", k.kind.as_str(), k.display())
    }

    fn differs(&self, path: &Path, line: usize, d: Divergence) -> ReplayError {
        ReplayError::Differs(Box::new(Difference {
            path: path.to_path_buf(),
            line,
            attempt: self.name(),
            release: self.release(),
            step: d.step,
            seq: d.seq,
            expected: d.expected,
            got: d.got,
        }))
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Replays one file's text; returns the attempts it held.
pub fn replay_text(
    path: &Path,
    text: &str,
    explain: bool,
    out: &mut impl Write,
) -> Result<usize, ReplayError> {
    let corrupt = |line: usize, why: String| ReplayError::Corrupt {
        path: path.to_path_buf(),
        line,
        why,
    };
    if !text.is_empty() && !text.ends_with('\n') {
        let line = text.lines().count();
        return Err(corrupt(
            line,
            "truncated: the last line is not terminated".into(),
        ));
    }
    let mut current: Option<Current> = None;
    let mut attempts = 0;
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        last_line = line;
        let parsed = parse_line(raw).map_err(|e| corrupt(line, e.to_string()))?;
        match parsed {
            TraceLine::Header(h) => {
                if let Some(mut c) = current.take() {
                    c.replayer.finish().map_err(|d| c.differs(path, line, d))?;
                    if explain {
                        writeln!(out, "   identical ({} steps)", c.replayer.steps())?;
                    }
                }
                let c = Current {
                    replayer: Replayer::new(&h),
                    header: *h,
                };
                if explain {
                    writeln!(
                        out,
                        "== {}:{line} attempt {} {} (core {})",
                        path.display(),
                        c.name(),
                        c.release(),
                        c.header.core_version
                    )?;
                }
                attempts += 1;
                current = Some(c);
            }
            TraceLine::Record(r) => {
                let c = current
                    .as_mut()
                    .ok_or_else(|| corrupt(line, "a record before any trace header".into()))?;
                let shown = explain.then(|| match r.as_ref() {
                    TraceRecord::In { input, .. } => Some(to_json(input)),
                    TraceRecord::Out { .. } => None,
                });
                let fed = c.replayer.feed(*r);
                let fed = match fed {
                    Ok(f) => f,
                    Err(d) => return Err(c.differs(path, line, d)),
                };
                if let (Some(Some(input)), Some(batch)) = (shown, fed) {
                    writeln!(out, "step {}: in  {input}", c.replayer.steps() - 1)?;
                    for e in &batch {
                        writeln!(out, "        out {}", to_json(e))?;
                    }
                }
            }
        }
    }
    match current {
        Some(mut c) => {
            c.replayer
                .finish()
                .map_err(|d| c.differs(path, last_line, d))?;
            if explain {
                writeln!(out, "   identical ({} steps)", c.replayer.steps())?;
            }
        }
        None => return Err(corrupt(last_line.max(1), "no trace header".into())),
    }
    Ok(attempts)
}
