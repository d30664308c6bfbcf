//! The run's output, streamed as attempts happen: a text timeline or one JSON document,
//! then every release's final status. Nothing here reads a clock, so the same scenario and
//! seed give the same bytes.

use std::collections::BTreeMap;
use std::io::{self, Write};

use jiff::Timestamp;
use opm_core::duration;
use opm_core::object::ReleaseKey;
use opm_world::{TimelineEntry, World};
use serde::Serialize;

/// `+HH:MM:SS` from the start (hours grow past 99 if they must).
pub fn offset(start: Timestamp, t: Timestamp) -> String {
    let secs = t.duration_since(start).as_secs().max(0);
    format!(
        "+{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

fn ms_since(start: Timestamp, t: Timestamp) -> u64 {
    u64::try_from(t.duration_since(start).as_millis()).unwrap_or(0)
}

/// Per-release counts for the final section.
#[derive(Default)]
pub struct Tally {
    pub attempts: u64,
    pub outcomes: BTreeMap<&'static str, u64>,
    pub last_at: Option<Timestamp>,
}

/// One attempt in `--json` output.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonAttempt<'a> {
    id: u64,
    at_ms: u64,
    at: String,
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
    outcome: &'static str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    requeue_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requeue_after: Option<String>,
    ready: &'a str,
    /// Ready's message, for failed attempts only (successes repeat one sentence).
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    steps: u32,
}

/// One release's final state in `--json` output.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonRelease<'a> {
    kind: &'static str,
    namespace: &'a str,
    name: &'a str,
    deleted: bool,
    ready: String,
    ready_reason: String,
    ready_message: String,
    observed_generation: i64,
    attempts: u64,
    outcomes: &'a BTreeMap<&'static str, u64>,
}

/// Where the run's lines go, and how.
pub struct Report<W: Write> {
    out: W,
    start: Timestamp,
    json: bool,
    summary: bool,
    first: bool,
    pub tallies: BTreeMap<ReleaseKey, Tally>,
}

impl<W: Write> Report<W> {
    pub fn new(out: W, start: Timestamp, json: bool, summary: bool) -> Self {
        Self {
            out,
            start,
            json,
            summary,
            first: true,
            tallies: BTreeMap::new(),
        }
    }

    /// The document's opening: scenario facts (never wall-clock time).
    pub fn begin(&mut self, releases: u64, end: Timestamp, seed: u64) -> io::Result<()> {
        if self.json {
            write!(
                self.out,
                "{{\"start\":\"{}\",\"end\":\"{}\",\"seed\":{seed},\"releases\":{releases},\"attempts\":[",
                self.start, end
            )
        } else {
            writeln!(
                self.out,
                "# opm-sim: {releases} releases from {} to {} ({}), seed {seed}",
                self.start,
                end,
                offset(self.start, end)
            )
        }
    }

    pub fn attempt(&mut self, e: &TimelineEntry) -> io::Result<()> {
        let outcome = e.outcome.map_or("none", |o| o.metric_label());
        let t = self.tallies.entry(e.key.clone()).or_default();
        t.attempts += 1;
        *t.outcomes.entry(outcome).or_default() += 1;
        t.last_at = Some(e.started_at);
        if self.summary {
            return Ok(());
        }
        let failed = e.outcome.is_some_and(|o| o.is_failure());
        if self.json {
            let a = JsonAttempt {
                id: e.id,
                at_ms: ms_since(self.start, e.started_at),
                at: offset(self.start, e.started_at),
                kind: e.key.kind.as_str(),
                namespace: &e.key.namespace,
                name: &e.key.name,
                outcome,
                reason: &e.reason,
                requeue_after_ms: e
                    .requeue_after
                    .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                requeue_after: e.requeue_after.map(duration::format),
                ready: &e.ready,
                message: if failed { &e.message } else { "" },
                steps: e.steps,
            };
            if !self.first {
                self.out.write_all(b",")?;
            }
            self.out.write_all(b"\n")?;
            serde_json::to_writer(&mut self.out, &a)?;
        } else {
            let requeue = e
                .requeue_after
                .map_or_else(|| "-".to_string(), duration::format);
            write!(
                self.out,
                "{} {:<13} {:<40} {:<18} {:<26} requeue {:<8} ready {}",
                offset(self.start, e.started_at),
                e.key.kind.as_str(),
                e.key.display(),
                outcome,
                e.reason,
                requeue,
                if e.ready.is_empty() { "-" } else { &e.ready }
            )?;
            if failed && !e.message.is_empty() {
                write!(self.out, " {:?}", e.message)?;
            }
            writeln!(self.out)?;
        }
        self.first = false;
        Ok(())
    }

    /// Every release's final status (those attempted and those never attempted), then the
    /// document's end.
    pub fn finish(mut self, world: &World, attempts: u64) -> io::Result<W> {
        let mut keys: Vec<ReleaseKey> = self.tallies.keys().cloned().collect();
        keys.extend(
            world
                .releases()
                .iter()
                .filter(|(_, r)| !r.external)
                .map(|(k, _)| k.clone()),
        );
        keys.sort();
        keys.dedup();
        let empty = Tally::default();
        if self.json {
            write!(self.out, "\n],\"totalAttempts\":{attempts},\"final\":[")?;
        } else {
            writeln!(
                self.out,
                "# final status at {} after {attempts} attempts",
                offset(self.start, world.now())
            )?;
        }
        for (i, k) in keys.iter().enumerate() {
            let t = self.tallies.get(k).unwrap_or(&empty);
            let obj = world.release(k);
            let ready = obj
                .and_then(|o| o.status())
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
            let generation = obj
                .and_then(|o| o.status())
                .map_or(0, |s| s.observed_generation);
            if self.json {
                let r = JsonRelease {
                    kind: k.kind.as_str(),
                    namespace: &k.namespace,
                    name: &k.name,
                    deleted: obj.is_none(),
                    ready: ready.map(|c| c.status.clone()).unwrap_or_default(),
                    ready_reason: ready.map(|c| c.reason.clone()).unwrap_or_default(),
                    ready_message: ready.map(|c| c.message.clone()).unwrap_or_default(),
                    observed_generation: generation,
                    attempts: t.attempts,
                    outcomes: &t.outcomes,
                };
                self.out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
                serde_json::to_writer(&mut self.out, &r)?;
            } else {
                let state = match (obj, ready) {
                    (None, _) => "deleted".to_string(),
                    (Some(_), None) => "Ready=- (no status)".to_string(),
                    (Some(_), Some(c)) => format!(
                        "Ready={} reason={} generation={generation} message={:?}",
                        c.status, c.reason, c.message
                    ),
                };
                let counts: Vec<String> =
                    t.outcomes.iter().map(|(o, n)| format!("{o}={n}")).collect();
                writeln!(
                    self.out,
                    "{:<13} {:<40} {state} attempts={} {}",
                    k.kind.as_str(),
                    k.display(),
                    t.attempts,
                    counts.join(" ")
                )?;
            }
        }
        if self.json {
            self.out.write_all(b"\n]}\n")?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}
