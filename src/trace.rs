//! Attempt traces (SPEC §23): JSON lines, a header then `{"seq":n,"in":…}` and
//! `{"seq":n,"out":…}` records in order, and a pure replay that names the first divergence.

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
    pub core_version: String,
    pub config: Config,
    #[serde(flatten)]
    pub release: ReleaseKey,
}

impl TraceHeader {
    pub fn new(config: &Config, release: ReleaseKey) -> Self {
        Self {
            core_version: env!("CARGO_PKG_VERSION").to_string(),
            config: config.clone(),
            release,
        }
    }
}

/// One record after the header.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum TraceRecord {
    In {
        seq: u64,
        #[serde(rename = "in")]
        input: Input,
    },
    Out {
        seq: u64,
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
    pub fn new(header: &TraceHeader) -> Self {
        Self {
            lines: vec![serde_json::to_string(header).unwrap_or_default()],
            seq: 0,
        }
    }

    pub fn input(&mut self, input: &Input) {
        let r = TraceRecord::In {
            seq: self.seq,
            input: input.clone(),
        };
        self.push(&r);
    }

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
#[error("trace diverges at seq {seq}: expected {expected}, got {got}")]
pub struct Divergence {
    pub seq: u64,
    pub expected: String,
    pub got: String,
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Feeds the recorded inputs to a fresh machine and checks every effect matches, in order.
/// Blank lines are ignored. A new attempt starts at each `observed` input.
pub fn replay<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<(), Divergence> {
    let mut lines = lines.into_iter().filter(|l| !l.trim().is_empty());
    let header_line = lines.next().ok_or_else(|| Divergence {
        seq: 0,
        expected: "a trace header".into(),
        got: "an empty trace".into(),
    })?;
    let header: TraceHeader = serde_json::from_str(header_line).map_err(|e| Divergence {
        seq: 0,
        expected: "a trace header".into(),
        got: format!("{header_line} ({e})"),
    })?;
    let mut attempt: Option<Attempt> = None;
    let mut pending: std::collections::VecDeque<Effect> = Default::default();
    let mut last_seq = 0;
    for line in lines {
        let record: TraceRecord = serde_json::from_str(line).map_err(|e| Divergence {
            seq: last_seq,
            expected: "a trace record".into(),
            got: format!("{line} ({e})"),
        })?;
        match record {
            TraceRecord::In { seq, input } => {
                last_seq = seq;
                if let Some(extra) = pending.pop_front() {
                    return Err(Divergence {
                        seq,
                        expected: format!("input {}", json(&input)),
                        got: json(&extra),
                    });
                }
                let batch = match (&mut attempt, &input.kind) {
                    (_, InputKind::Observed { .. }) => {
                        let (a, b) = Attempt::start(&header.config, input);
                        attempt = Some(a);
                        b
                    }
                    (Some(a), _) => a.step(input).map_err(|e| Divergence {
                        seq,
                        expected: "the input to be accepted".into(),
                        got: e.to_string(),
                    })?,
                    (None, _) => {
                        return Err(Divergence {
                            seq,
                            expected: "an observed input first".into(),
                            got: json(&input),
                        });
                    }
                };
                pending.extend(batch);
            }
            TraceRecord::Out { seq, out } => {
                last_seq = seq;
                match pending.pop_front() {
                    Some(got) if got == out => {}
                    Some(got) => {
                        return Err(Divergence {
                            seq,
                            expected: json(&out),
                            got: json(&got),
                        });
                    }
                    None => {
                        return Err(Divergence {
                            seq,
                            expected: json(&out),
                            got: "no effect".into(),
                        });
                    }
                }
            }
        }
    }
    match pending.pop_front() {
        Some(extra) => Err(Divergence {
            seq: last_seq + 1,
            expected: "end of trace".into(),
            got: json(&extra),
        }),
        None => Ok(()),
    }
}
