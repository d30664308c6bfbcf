//! The fault schedule: per effect kind, an error (or a delay) injected between `from` and
//! `until`, or for the next `times` matching effects, optionally with a probability drawn
//! from the world's seeded generator, optionally for one release only.
//!
//! Faults sit in the world, never in the core, as in Anvil's shim: the machine only sees
//! the typed error its effect would have produced against a real cluster.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use opm_core::effect::EffectKind;
use opm_core::input::{ApiError, FetchError, RenderError, SourceError};
use opm_core::object::ReleaseKey;

use super::prng::SplitMix64;

/// What a fault does to the effect it hits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FaultError {
    /// A Kubernetes API error (also usable for source reads).
    Api {
        /// The error the hit effect fails with, mapped for fetches and renders.
        error: ApiError,
    },
    /// A Flux source failure, for `ResolveSource`.
    Source {
        /// What the source read reports instead of the artifact.
        error: SourceError,
    },
    /// A download failure, for `FetchArtifact`.
    Fetch {
        /// What the fetch reports instead of the artifact.
        error: FetchError,
    },
    /// A `cue` failure, for `Render`.
    Render {
        /// What the render reports instead of the exported value.
        error: RenderError,
    },
    /// The effect works but takes this long in virtual time (a deadline overrun becomes
    /// that effect's `Timeout` error, as the interpreter reports it).
    Delay {
        /// How much virtual time the effect takes.
        duration: Duration,
    },
}

impl FaultError {
    /// An API-error fault, the kind most effects can take.
    pub fn api(error: ApiError) -> Self {
        FaultError::Api { error }
    }

    /// A 503, the usual transient fault.
    pub fn unavailable() -> Self {
        FaultError::api(ApiError::Unavailable {
            message: "the server is currently unable to handle the request".into(),
        })
    }

    /// The error as an API error, for effects answered with `ApiError`s.
    pub fn as_api(&self) -> Option<ApiError> {
        match self {
            FaultError::Api { error }
            | FaultError::Source {
                error: SourceError::Api { error },
            } => Some(error.clone()),
            _ => None,
        }
    }

    /// The error as a source failure, for `ResolveSource`; an API error is a failed read.
    pub fn as_source(&self) -> Option<SourceError> {
        match self {
            FaultError::Source { error } => Some(error.clone()),
            FaultError::Api { error } => Some(SourceError::Api {
                error: error.clone(),
            }),
            _ => None,
        }
    }

    /// The error as a download failure, for `FetchArtifact`; an API error becomes the nearest
    /// download failure.
    pub fn as_fetch(&self) -> Option<FetchError> {
        match self {
            FaultError::Fetch { error } => Some(error.clone()),
            FaultError::Api { error } => Some(match error {
                ApiError::Timeout { .. } => FetchError::Timeout,
                ApiError::Unavailable { message } => FetchError::Connection {
                    message: message.clone(),
                },
                ApiError::Forbidden { .. } => FetchError::Http { status: 403 },
                ApiError::NotFound { .. } => FetchError::Http { status: 404 },
                ApiError::TooManyRequests { .. } => FetchError::Http { status: 429 },
                _ => FetchError::Http { status: 500 },
            }),
            _ => None,
        }
    }

    /// The error as a render failure, for `Render`; an API error is an unreachable registry.
    pub fn as_render(&self) -> Option<RenderError> {
        match self {
            FaultError::Render { error } => Some(error.clone()),
            FaultError::Api { error } => Some(RenderError::RegistryUnreachable {
                message: format!("cannot do HTTP request: {error}"),
            }),
            _ => None,
        }
    }

    /// Whether an effect of `kind` can be hit by this fault.
    pub fn fits(&self, kind: EffectKind) -> bool {
        use EffectKind::*;
        match kind {
            EmitEvent | RecordMetric | Done => false,
            _ if matches!(self, FaultError::Delay { .. }) => true,
            ResolveSource => self.as_source().is_some(),
            FetchArtifact => self.as_fetch().is_some(),
            Render => self.as_render().is_some(),
            _ => self.as_api().is_some(),
        }
    }
}

/// One scheduled fault.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    /// The effect kind it hits.
    pub kind: EffectKind,
    /// What the hit effect answers, or how long it is delayed.
    pub error: FaultError,
    /// Only this release's effects; all releases when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseKey>,
    /// Active from this virtual time (inclusive); from the start when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Timestamp>,
    /// Active until this virtual time (exclusive); forever when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    /// Hits at most this many effects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// Chance per matching effect, in per-mille (1000 = always, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_mille: Option<u16>,
}

impl Fault {
    /// Hits every `kind` effect from now on.
    pub fn always(kind: EffectKind, error: FaultError) -> Self {
        Self {
            kind,
            error,
            release: None,
            from: None,
            until: None,
            times: None,
            per_mille: None,
        }
    }

    /// Limits the fault to `from..until` in virtual time.
    pub fn between(mut self, from: Timestamp, until: Timestamp) -> Self {
        self.from = Some(from);
        self.until = Some(until);
        self
    }

    /// Limits the fault to its first `n` hits.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Limits the fault to one release's effects.
    pub fn for_release(mut self, key: ReleaseKey) -> Self {
        self.release = Some(key);
        self
    }

    fn in_window(&self, now: Timestamp) -> bool {
        self.from.is_none_or(|f| now >= f) && self.until.is_none_or(|u| now < u)
    }
}

/// Rejected when a fault is scheduled.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("a {error:?} fault cannot hit {kind:?} effects")]
pub struct FaultMismatch {
    /// The effect kind the fault named.
    pub kind: EffectKind,
    /// The error that cannot answer an effect of that kind.
    pub error: FaultError,
}

/// Faults in the order they were scheduled; the first that matches wins.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultSchedule {
    faults: Vec<(Fault, u32)>,
}

impl FaultSchedule {
    /// Schedules a fault after the ones already there; refused when its error cannot answer its
    /// kind.
    pub fn add(&mut self, fault: Fault) -> Result<(), FaultMismatch> {
        if !fault.error.fits(fault.kind) {
            return Err(FaultMismatch {
                kind: fault.kind,
                error: fault.error,
            });
        }
        self.faults.push((fault, 0));
        Ok(())
    }

    /// Removes every fault (the "faults stop" point of a history).
    pub fn clear(&mut self) {
        self.faults.clear();
    }

    /// The scheduled faults, in the order they are matched.
    pub fn faults(&self) -> impl Iterator<Item = &Fault> {
        self.faults.iter().map(|(f, _)| f)
    }

    /// The fault hitting this effect, if any, counting the hit.
    pub fn take(
        &mut self,
        kind: EffectKind,
        key: &ReleaseKey,
        now: Timestamp,
        rng: &mut SplitMix64,
    ) -> Option<FaultError> {
        for (f, hits) in &mut self.faults {
            if f.kind != kind
                || f.release.as_ref().is_some_and(|r| r != key)
                || !f.in_window(now)
                || f.times.is_some_and(|n| *hits >= n)
            {
                continue;
            }
            if let Some(p) = f.per_mille
                && rng.below(1000) >= u64::from(p)
            {
                continue;
            }
            *hits += 1;
            return Some(f.error.clone());
        }
        None
    }

    /// Whether [`FaultSchedule::take`] would consider a fault for this effect now (before
    /// any chance is drawn): when it is false, `take` returns `None` without drawing from
    /// the generator or counting a hit.
    pub fn could_hit(&self, kind: EffectKind, key: &ReleaseKey, now: Timestamp) -> bool {
        self.faults.iter().any(|(f, hits)| {
            f.kind == kind
                && f.release.as_ref().is_none_or(|r| r == key)
                && f.in_window(now)
                && f.times.is_none_or(|n| *hits < n)
        })
    }

    /// True when no fault can hit an effect at or after `t`.
    pub fn quiet_from(&self, t: Timestamp) -> bool {
        self.faults
            .iter()
            .all(|(f, hits)| f.until.is_some_and(|u| u <= t) || f.times.is_some_and(|n| *hits >= n))
    }
}

#[cfg(test)]
mod tests;
