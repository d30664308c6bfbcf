//! Attempt traces (SPEC §23): JSON lines, a header then `{"seq":n,"in":…}` and
//! `{"seq":n,"out":…}` records in order, and a pure replay that names the first divergence.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::effect::Effect;
use crate::input::{Input, InputKind};
use crate::machine::Attempt;
use crate::object::ReleaseKey;

/// The first line of a trace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TraceHeader {
    /// The opm-core version that recorded it: a replay on another version may differ.
    pub core_version: String,
    #[serde(deserialize_with = "recorded_config")]
    /// The operator policy the attempt ran under; a replay uses the same.
    pub config: Config,
    #[serde(flatten)]
    /// The release the attempt was for.
    pub release: ReleaseKey,
    /// The operator's monotonic attempt number (absent in older traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u64>,
    /// Where `--health-eval-timeout` stopped the attempt's health expressions, as the
    /// total of their steps by then (`health::EvalDeadline::stopped_at`): a replay stops
    /// them at the same count, so the wall clock's cut replays exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_deadline_at_steps: Option<u64>,
}

/// A header's config. Traces from before `--allow-operator-identity` existed ran every
/// release without a ServiceAccount as the operator, unconfined: they replay as `cluster`.
fn recorded_config<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Config, D::Error> {
    let mut v = serde_json::Value::deserialize(d)?;
    if let Some(m) = v.as_object_mut() {
        m.entry("allowOperatorIdentity")
            .or_insert_with(|| serde_json::Value::from("cluster"));
    }
    serde_json::from_value(v).map_err(serde::de::Error::custom)
}

impl TraceHeader {
    /// A header for an attempt of `release` under `config`, stamped with this core's version.
    pub fn new(config: &Config, release: ReleaseKey) -> Self {
        Self {
            core_version: env!("CARGO_PKG_VERSION").to_string(),
            config: config.clone(),
            release,
            attempt: None,
            health_deadline_at_steps: None,
        }
    }

    /// The header of attempt number `id`.
    pub fn with_attempt(mut self, id: u64) -> Self {
        self.attempt = Some(id);
        self
    }
}

/// One record after the header.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum TraceRecord {
    /// An input fed to the attempt.
    In {
        /// Position in the trace.
        seq: u64,
        /// The input.
        #[serde(rename = "in")]
        input: Input,
    },
    /// An effect the attempt returned.
    Out {
        /// Position in the trace.
        seq: u64,
        /// The effect.
        out: Effect,
    },
}

/// Builds a trace as the machine runs: call [`Recorder::input`] before feeding an input and
/// [`Recorder::effects`] with the batch it returned.
#[derive(Clone, Debug)]
pub struct Recorder {
    lines: Vec<String>,
    seq: u64,
}

impl Recorder {
    /// A trace that starts with `header`.
    pub fn new(header: &TraceHeader) -> Self {
        Self {
            lines: vec![serde_json::to_string(header).unwrap_or_default()],
            seq: 0,
        }
    }

    /// Records `input`, before it is fed to the attempt.
    pub fn input(&mut self, input: &Input) {
        let r = TraceRecord::In {
            seq: self.seq,
            input: input.clone(),
        };
        self.push(&r);
    }

    /// Records where `--health-eval-timeout` stopped the attempt's health expressions
    /// (in the header, which a replay reads before the first input).
    pub fn health_deadline_at(&mut self, steps: u64) {
        if let Some(first) = self.lines.first_mut()
            && let Ok(mut h) = serde_json::from_str::<TraceHeader>(first)
            && h.health_deadline_at_steps.is_none()
        {
            h.health_deadline_at_steps = Some(steps);
            *first = serde_json::to_string(&h).unwrap_or_default();
        }
    }

    /// Records the batch the attempt returned, one line per effect.
    pub fn effects(&mut self, batch: &[Effect]) {
        for e in batch {
            let r = TraceRecord::Out {
                seq: self.seq,
                out: e.clone(),
            };
            self.push(&r);
        }
    }

    fn push(&mut self, r: &TraceRecord) {
        self.lines
            .push(serde_json::to_string(r).unwrap_or_default());
        self.seq += 1;
    }

    /// The recorded lines, header first.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The trace as JSON lines, newline-terminated.
    pub fn to_jsonl(&self) -> String {
        let mut s = self.lines.join("\n");
        s.push('\n');
        s
    }
}

/// Where a replay first differed from the recording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace diverges at seq {seq} (step {step}): expected {expected}, got {got}")]
pub struct Divergence {
    /// The record number where it differed.
    pub seq: u64,
    /// The attempt's input index (0 is `observed`) whose batch differed.
    pub step: u32,
    /// What the recording holds there (JSON).
    pub expected: String,
    /// What the core returned instead (JSON), or "no effect".
    pub got: String,
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One parsed line of a trace.
#[derive(Clone, Debug, PartialEq)]
pub enum TraceLine {
    /// Starts an attempt (several attempts may share one file).
    Header(Box<TraceHeader>),
    /// An input or an effect.
    Record(Box<TraceRecord>),
}

/// Parses one non-blank trace line: a header (it has `coreVersion`) or a record.
pub fn parse_line(line: &str) -> Result<TraceLine, serde_json::Error> {
    let v: serde_json::Value = serde_json::from_str(line)?;
    if v.get("coreVersion").is_some() {
        serde_json::from_value(v).map(|h| TraceLine::Header(Box::new(h)))
    } else {
        serde_json::from_value(v).map(|r| TraceLine::Record(Box::new(r)))
    }
}

/// Replays one recorded attempt record by record, so callers can report each step (and
/// where the recording ends) themselves.
pub struct Replayer {
    config: Config,
    health_deadline_at_steps: Option<u64>,
    attempt: Option<Attempt>,
    pending: VecDeque<Effect>,
    last_seq: u64,
    step: u32,
}

impl Replayer {
    /// A replay of the attempt `header` starts, under its recorded config.
    pub fn new(header: &TraceHeader) -> Self {
        Self {
            config: header.config.clone(),
            health_deadline_at_steps: header.health_deadline_at_steps,
            attempt: None,
            pending: VecDeque::new(),
            last_seq: 0,
            step: 0,
        }
    }

    /// Inputs fed so far (the current step is this minus one).
    pub fn steps(&self) -> u32 {
        self.step
    }

    /// Feeds one record. For an input, returns the batch the core produced for it; for an
    /// effect, checks it against the next one the core produced.
    pub fn feed(&mut self, record: TraceRecord) -> Result<Option<Vec<Effect>>, Divergence> {
        let step = self.step.saturating_sub(1);
        match record {
            TraceRecord::In { seq, input } => {
                self.last_seq = seq;
                if let Some(extra) = self.pending.pop_front() {
                    return Err(Divergence {
                        seq,
                        step,
                        expected: format!("input {}", json(&input)),
                        got: json(&extra),
                    });
                }
                let batch = match (&mut self.attempt, &input.kind) {
                    (_, InputKind::Observed { .. }) => {
                        let (a, b) = Attempt::start(&self.config, input);
                        if let Some(steps) = self.health_deadline_at_steps {
                            a.eval_deadline().replay_stop_at(steps);
                        }
                        self.attempt = Some(a);
                        self.step = 0;
                        b
                    }
                    (Some(a), _) => a.step(input).map_err(|e| Divergence {
                        seq,
                        step: self.step,
                        expected: "the input to be accepted".into(),
                        got: e.to_string(),
                    })?,
                    (None, _) => {
                        return Err(Divergence {
                            seq,
                            step: 0,
                            expected: "an observed input first".into(),
                            got: json(&input),
                        });
                    }
                };
                self.step += 1;
                self.pending.extend(batch.iter().cloned());
                Ok(Some(batch))
            }
            TraceRecord::Out { seq, out } => {
                self.last_seq = seq;
                match self.pending.pop_front() {
                    Some(got) if got == out => Ok(None),
                    Some(got) => Err(Divergence {
                        seq,
                        step,
                        expected: json(&out),
                        got: json(&got),
                    }),
                    None => Err(Divergence {
                        seq,
                        step,
                        expected: json(&out),
                        got: "no effect".into(),
                    }),
                }
            }
        }
    }

    /// The recording ended: the core must not have produced more.
    pub fn finish(&mut self) -> Result<(), Divergence> {
        match self.pending.pop_front() {
            Some(extra) => Err(Divergence {
                seq: self.last_seq + 1,
                step: self.step.saturating_sub(1),
                expected: "end of trace".into(),
                got: json(&extra),
            }),
            None => Ok(()),
        }
    }
}

/// Feeds the recorded inputs to a fresh machine and checks every effect matches, in order.
/// Blank lines are ignored. A new attempt starts at each `observed` input; a further header
/// line starts a new recording (files with several attempts, as the operator's rotating
/// trace sink writes them).
pub fn replay<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<(), Divergence> {
    let mut lines = lines.into_iter().filter(|l| !l.trim().is_empty());
    let bad = |seq, expected: &str, got: String| Divergence {
        seq,
        step: 0,
        expected: expected.into(),
        got,
    };
    let header_line = lines
        .next()
        .ok_or_else(|| bad(0, "a trace header", "an empty trace".into()))?;
    let header: TraceHeader = serde_json::from_str(header_line)
        .map_err(|e| bad(0, "a trace header", format!("{header_line} ({e})")))?;
    let mut replayer = Replayer::new(&header);
    for line in lines {
        match parse_line(line) {
            Ok(TraceLine::Header(h)) => {
                replayer.finish()?;
                replayer = Replayer::new(&h);
            }
            Ok(TraceLine::Record(r)) => {
                replayer.feed(*r)?;
            }
            Err(e) => {
                return Err(bad(
                    replayer.last_seq,
                    "a trace record",
                    format!("{line} ({e})"),
                ));
            }
        }
    }
    replayer.finish()
}
