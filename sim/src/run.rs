//! `opm-sim run`: loads a scenario, drives the simulated world to its end and streams the
//! timeline out as attempts finish, so a 10 000-release day runs in constant memory.

use std::io::{BufWriter, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use opm_sim::scenario::{Scenario, ScenarioError, release_count};
use opm_world::{AttemptLog, Retention, World, WorldError};

use crate::report::{Report, offset};
use crate::svg::Picture;

pub struct RunOpts {
    pub scenario: PathBuf,
    pub json: bool,
    pub svg: Option<PathBuf>,
    pub seed: Option<u64>,
    pub quiet: bool,
    pub summary: bool,
    /// Write every attempt's trace here (as the operator's `--trace-dir` would).
    pub trace_dir: Option<PathBuf>,
    /// Run every attempt through the core, even a NoOp the world could answer from the
    /// release's last one (the same output, slower: a check of the memo).
    pub every_attempt: bool,
}

/// Attempts per trace file written by `run --trace-dir`.
const ATTEMPTS_PER_TRACE_FILE: u64 = 10_000;

/// Writes the simulated attempts' traces in the operator's format, in numbered files.
struct TraceWriter {
    dir: PathBuf,
    file: Option<BufWriter<std::fs::File>>,
    written: u64,
}

impl TraceWriter {
    fn new(dir: &std::path::Path) -> Result<Self, RunError> {
        std::fs::create_dir_all(dir).map_err(|source| RunError::Write {
            what: dir.display().to_string(),
            source,
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            file: None,
            written: 0,
        })
    }

    fn write(&mut self, cfg: &opm_core::Config, log: &AttemptLog) -> Result<(), RunError> {
        let path = self.dir.join(format!(
            "trace-{:06}.jsonl",
            self.written / ATTEMPTS_PER_TRACE_FILE
        ));
        let err = |source| RunError::Write {
            what: path.display().to_string(),
            source,
        };
        if self.written.is_multiple_of(ATTEMPTS_PER_TRACE_FILE) {
            if let Some(mut f) = self.file.take() {
                f.flush().map_err(err)?;
            }
            self.file = Some(BufWriter::new(std::fs::File::create(&path).map_err(err)?));
        }
        // Opened just above on the first attempt.
        let f = self.file.as_mut().expect("trace file open");
        for line in log.trace_lines(cfg) {
            f.write_all(line.as_bytes()).map_err(err)?;
            f.write_all(b"\n").map_err(err)?;
        }
        self.written += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<(), RunError> {
        if let Some(mut f) = self.file.take() {
            f.flush().map_err(|source| RunError::Write {
                what: self.dir.display().to_string(),
                source,
            })?;
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid scenario: {why}")]
    Parse { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Scenario {
        path: PathBuf,
        source: ScenarioError,
    },
    #[error("the simulated world stopped at {at}: {source}")]
    World { at: String, source: WorldError },
    #[error("writing {what}: {source}")]
    Write {
        what: String,
        source: std::io::Error,
    },
}

impl RunError {
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::World { .. } => 3,
            _ => 2,
        }
    }
}

/// A scenario from YAML or JSON (JSON when the file says `.json` or starts with `{`).
pub fn load(path: &Path) -> Result<Scenario, RunError> {
    let text = std::fs::read_to_string(path).map_err(|source| RunError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let is_json =
        path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    let parsed = if is_json {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    } else {
        serde_saphyr::from_str(&text).map_err(|e| e.to_string())
    };
    parsed.map_err(|why| RunError::Parse {
        path: path.to_path_buf(),
        why,
    })
}

/// Attempts between flushes of the world's timeline (and progress updates).
const CHUNK: usize = 4096;

pub fn run(opts: &RunOpts) -> Result<(), RunError> {
    let mut scenario = load(&opts.scenario)?;
    if let Some(seed) = opts.seed {
        scenario.seed = seed;
    }
    let scenario_err = |source| RunError::Scenario {
        path: opts.scenario.clone(),
        source,
    };
    let start = scenario.start();
    let end = scenario.end().map_err(scenario_err)?;
    let mut world = scenario
        .build()
        .map_err(scenario_err)?
        .with_retention(if opts.trace_dir.is_some() {
            Retention::Full
        } else {
            Retention::Timeline
        })
        .with_attempt_memo(!opts.every_attempt);
    let mut traces = opts
        .trace_dir
        .as_deref()
        .map(TraceWriter::new)
        .transpose()?;
    let total_ms = u64::try_from(end.duration_since(start).as_millis()).unwrap_or(0);

    let stdout = std::io::stdout();
    let write_err = |what: &str| {
        let what = what.to_string();
        move |source| RunError::Write { what, source }
    };
    let mut report = Report::new(
        BufWriter::with_capacity(1 << 16, stdout.lock()),
        start,
        opts.json,
        opts.summary,
    );
    report
        .begin(release_count(&scenario), end, scenario.seed)
        .map_err(write_err("stdout"))?;
    let mut picture = opts.svg.as_ref().map(|_| Picture::new(total_ms));

    let bar = if opts.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(total_ms / 1000);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} virtual {msg} [{wide_bar}] {percent}% ({elapsed} elapsed, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    };

    let mut flush = |world: &mut World, report: &mut Report<_>| -> Result<(), RunError> {
        for e in world.drain_timeline() {
            report.attempt(&e).map_err(write_err("stdout"))?;
            if let Some(p) = picture.as_mut() {
                let at_ms =
                    u64::try_from(e.started_at.duration_since(start).as_millis()).unwrap_or(0);
                let outcome = e.outcome.map_or("none", |o| o.metric_label());
                let requeue = e
                    .requeue_after
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                let title = format!(
                    "{} {} {} requeue {}",
                    offset(start, e.started_at),
                    outcome,
                    e.reason,
                    e.requeue_after
                        .map_or_else(|| "-".into(), opm_core::duration::format)
                );
                p.add(&e.key, at_ms, requeue, outcome, title);
            }
        }
        Ok(())
    };
    while world.next_wakeup().is_some_and(|t| t <= end) {
        world.step().map_err(|source| RunError::World {
            at: offset(start, world.now()),
            source,
        })?;
        if let Some(t) = traces.as_mut() {
            for log in world.drain_logs() {
                t.write(world.config(), &log)?;
            }
        }
        if world.timeline().len() >= CHUNK {
            flush(&mut world, &mut report)?;
            bar.set_position(world.now().duration_since(start).as_secs().max(0) as u64);
            bar.set_message(offset(start, world.now()));
        }
    }
    flush(&mut world, &mut report)?;
    // Nothing is due before the end any more: this only moves the clock there.
    world.drive_until(end).map_err(|source| RunError::World {
        at: offset(start, world.now()),
        source,
    })?;
    bar.finish_and_clear();
    if let Some(t) = traces {
        t.finish()?;
    }
    let attempts = world.attempts_run();
    let mut out = report
        .finish(&world, attempts)
        .map_err(write_err("stdout"))?;
    out.flush().map_err(write_err("stdout"))?;
    if let (Some(path), Some(p)) = (&opts.svg, picture) {
        std::fs::write(path, p.render()).map_err(|source| RunError::Write {
            what: path.display().to_string(),
            source,
        })?;
    }
    Ok(())
}
