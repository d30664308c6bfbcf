//! A whole simulation as data: what `opm-sim run SCENARIO` reads (YAML or JSON through
//! serde), builds into a [`World`], runs and prints. The world itself knows nothing of
//! this format: it is `opm-sim`'s, built from the world's setup commands and events.
//!
//! Releases are written as the Kubernetes manifests users already have (`kind:
//! ModuleRelease` / `Release`); times are Go durations from the scenario's start (`90s`,
//! `20m`, `1h30m`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use jiff::Timestamp;
use opm_core::Config;
use opm_core::duration;
use opm_core::object::ReleaseObject;
use opm_world::{
    ArtifactDef, Fault, FaultError, Grant, ModuleDef, PlatformDef, SimRollout, SourceId,
    TimelineEntry, World, WorldError, WorldEvent,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a scenario could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScenarioError {
    #[error("{what}: {why}")]
    Invalid { what: String, why: String },
    #[error(transparent)]
    World(#[from] WorldError),
}

fn invalid(what: impl Into<String>, why: impl ToString) -> ScenarioError {
    ScenarioError::Invalid {
        what: what.into(),
        why: why.to_string(),
    }
}

/// A module version in the registry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioModule {
    pub path: String,
    pub version: String,
    /// The web example module when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub def: Option<ModuleDef>,
    /// An OPM module of core v2 (SPEC §30): its releases render through the Platform (the
    /// same as `opm: true` in `def`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub opm: bool,
}

/// A Flux source and the artifact it starts with (none: not ready).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioSource {
    #[serde(flatten)]
    pub id: SourceId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactDef>,
}

/// A ServiceAccount and its bindings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioAccount {
    pub namespace: String,
    pub name: String,
    #[serde(default)]
    pub grants: Vec<Grant>,
}

/// A fault with Go-duration offsets instead of timestamps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioFault {
    pub kind: opm_core::effect::EffectKind,
    pub error: FaultError,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<opm_core::ReleaseKey>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_mille: Option<u16>,
}

/// One scheduled change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioEvent {
    /// Offset from the start, as a Go duration.
    pub at: String,
    #[serde(flatten)]
    pub event: WorldEvent,
}

/// Everything a simulation needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    /// Virtual start time (default 2026-01-01T00:00:00Z).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Timestamp>,
    /// How long to run, as a Go duration.
    pub duration: String,
    #[serde(default)]
    pub seed: u64,
    /// ±5 % jitter on success requeues (from the seed).
    #[serde(default)]
    pub jitter: bool,
    #[serde(default)]
    pub config: Option<Config>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub modules: Vec<ScenarioModule>,
    #[serde(default)]
    pub sources: Vec<ScenarioSource>,
    #[serde(default)]
    pub service_accounts: Vec<ScenarioAccount>,
    /// `ModuleRelease`/`Release` manifests reconciled by the simulated operator. A
    /// top-level `copies: N` (not part of the manifest) stands for N releases named
    /// `<name>-<i>` (i from 1, zero-padded), so large fleets stay small files.
    #[serde(default)]
    pub releases: Vec<Value>,
    /// Releases someone else reconciles (dependencies); made Ready with a
    /// `dependencyReady` event.
    #[serde(default)]
    pub external_releases: Vec<Value>,
    #[serde(default)]
    pub faults: Vec<ScenarioFault>,
    #[serde(default)]
    pub events: Vec<ScenarioEvent>,
    /// Simulated rollouts by object name (SPEC §26): healthy `afterSecs` after each apply,
    /// or failed then with `fails: true`. Absent objects are healthy once applied.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub rollouts: BTreeMap<String, SimRollout>,
    /// The Platform `cluster` at the start (SPEC §30), evaluated at once; absent: none, so
    /// releases of OPM modules (`opm: true`) wait with `PlatformNotReady` until a
    /// `createPlatform` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<PlatformDef>,
}

/// A release manifest (`kind: ModuleRelease` or `Release`) as a [`ReleaseObject`].
pub fn release_from_manifest(v: &Value) -> Result<ReleaseObject, String> {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let r = match kind {
        "ModuleRelease" => serde_json::from_value(v.clone()).map(ReleaseObject::ModuleRelease),
        "Release" => serde_json::from_value(v.clone()).map(ReleaseObject::Release),
        other => return Err(format!("kind {other:?} is not ModuleRelease or Release")),
    };
    r.map_err(|e| e.to_string())
}

/// A release entry with `copies: N` as N manifests (`<name>-<i>`); without it, itself.
pub fn expand_copies(v: &Value) -> Result<Vec<Value>, String> {
    let Some(n) = v.get("copies") else {
        return Ok(vec![v.clone()]);
    };
    let n = n
        .as_u64()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("copies must be a positive integer, not {n}"))?;
    let mut base = v.clone();
    if let Some(o) = base.as_object_mut() {
        o.remove("copies");
    }
    let name = base
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or("a release with copies needs metadata.name")?
        .to_string();
    let width = n.to_string().len();
    Ok((1..=n)
        .map(|i| {
            let mut m = base.clone();
            m["metadata"]["name"] = Value::String(format!("{name}-{i:0width$}"));
            m
        })
        .collect())
}

/// The number of releases the scenario reconciles, with copies expanded.
pub fn release_count(s: &Scenario) -> u64 {
    s.releases
        .iter()
        .map(|r| r.get("copies").and_then(Value::as_u64).unwrap_or(1))
        .sum()
}

/// `t + d`, saturating at the end of jiff's range (as the world's clock does).
fn add(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|sd| t.checked_add(sd).ok())
        .unwrap_or(Timestamp::MAX)
}

fn offset(start: Timestamp, what: &str, d: &str) -> Result<Timestamp, ScenarioError> {
    duration::parse(d)
        .map(|d| add(start, d))
        .map_err(|e| invalid(what, e))
}

impl Scenario {
    pub fn start(&self) -> Timestamp {
        self.start.unwrap_or_else(|| {
            // A fixed, valid RFC 3339 literal.
            "2026-01-01T00:00:00Z".parse().expect("valid timestamp")
        })
    }

    pub fn end(&self) -> Result<Timestamp, ScenarioError> {
        offset(self.start(), "duration", &self.duration)
    }

    /// The world at the scenario's start, with everything scheduled.
    pub fn build(&self) -> Result<World, ScenarioError> {
        let start = self.start();
        let mut w = World::new(self.config.clone().unwrap_or_default(), start, self.seed)
            .with_jitter(self.jitter);
        for ns in &self.namespaces {
            w.namespace(ns);
        }
        for (name, r) in &self.rollouts {
            w.simulate_rollout(name, r.clone());
        }
        if let Some(p) = &self.platform {
            w.apply_platform(p);
        }
        for m in &self.modules {
            let mut def = m.def.clone().unwrap_or_else(ModuleDef::web);
            def.opm |= m.opm;
            w.add_module(&m.path, &m.version, def);
        }
        for s in &self.sources {
            w.namespace(&s.id.namespace);
            match &s.artifact {
                Some(a) => {
                    w.publish(&s.id, a.clone());
                }
                None => w.apply_event(WorldEvent::SourceNotReady {
                    source: s.id.clone(),
                    message: "no artifact yet".into(),
                })?,
            }
        }
        for a in &self.service_accounts {
            w.namespace(&a.namespace);
            w.add_service_account(&a.namespace, &a.name, a.grants.clone());
        }
        for (i, m) in self.external_releases.iter().enumerate() {
            let o = release_from_manifest(m)
                .map_err(|e| invalid(format!("externalReleases[{i}]"), e))?;
            w.add_external_release(o)?;
        }
        for (i, m) in self.releases.iter().enumerate() {
            for m in expand_copies(m).map_err(|e| invalid(format!("releases[{i}]"), e))? {
                let o =
                    release_from_manifest(&m).map_err(|e| invalid(format!("releases[{i}]"), e))?;
                w.create_release(o)?;
            }
        }
        for (i, f) in self.faults.iter().enumerate() {
            let what = format!("faults[{i}]");
            let fault = Fault {
                kind: f.kind,
                error: f.error.clone(),
                release: f.release.clone(),
                from: f
                    .from
                    .as_deref()
                    .map(|d| offset(start, &what, d))
                    .transpose()?,
                until: f
                    .until
                    .as_deref()
                    .map(|d| offset(start, &what, d))
                    .transpose()?,
                times: f.times,
                per_mille: f.per_mille,
            };
            w.add_fault(fault)?;
        }
        for (i, e) in self.events.iter().enumerate() {
            let when = offset(start, &format!("events[{i}].at"), &e.at)?;
            w.schedule(when, e.event.clone());
        }
        Ok(w)
    }

    /// Builds and runs the scenario to its end.
    pub fn run(&self) -> Result<World, ScenarioError> {
        let mut w = self.build()?;
        let end = self.end()?;
        w.drive_until(end)?;
        Ok(w)
    }
}

/// `+1h02m05s` style offset of `t` from `start`.
fn since(start: Timestamp, t: Timestamp) -> String {
    let secs = t.duration_since(start).as_secs().max(0);
    format!(
        "+{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// The timeline as text: one line per attempt (time, release, outcome, reason, requeue,
/// Ready), then a per-release summary.
pub fn timeline_text(start: Timestamp, timeline: &[TimelineEntry]) -> String {
    let mut out = String::new();
    let mut summary: BTreeMap<String, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for e in timeline {
        let outcome = e.outcome.map_or("none", |o| o.metric_label());
        let requeue = e
            .requeue_after
            .map_or_else(|| "-".to_string(), duration::format);
        let _ = writeln!(
            out,
            "{} {:<14} {:<40} {:<18} {:<26} requeue {:<8} ready {}",
            since(start, e.started_at),
            e.key.kind.as_str(),
            e.key.display(),
            outcome,
            e.reason,
            requeue,
            if e.ready.is_empty() { "-" } else { &e.ready }
        );
        *summary
            .entry(format!("{} {}", e.key.kind.as_str(), e.key.display()))
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }
    for (k, counts) in summary {
        let parts: Vec<String> = counts.iter().map(|(o, n)| format!("{o}={n}")).collect();
        let _ = writeln!(out, "# {k}: {}", parts.join(" "));
    }
    out
}

#[cfg(test)]
mod tests;
