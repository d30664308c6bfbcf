//! The simulated Platform `cluster` (SPEC §30) and what its changes trigger.
//!
//! The world plays the operator's Platform controller: it holds the one Platform (or none),
//! evaluates it at once (no `cue`: a scenario says what the evaluation gives) with the
//! core's rules ([`rules::status`]), and OPM renders use it only when the core's
//! [`rules::ready`] says so, else they fail with `PlatformNotReady`. Like the controller, it
//! re-triggers at once, whenever the Ready Platform's digest changes to a new one (it turned
//! Ready, or a Ready Platform changed), every release that rendered through the Platform or
//! waits for it ([`triggers::waits_for_platform`]); a Platform deleted or turned not Ready
//! re-triggers nothing: OPM releases find out at their next attempt and keep their objects.
//!
//! Every Platform change bumps the world's epoch, so no attempt memo ([`super::memo`]) made
//! with the old Platform answers for a release after it.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

use opm_core::api::platform::{PLATFORM_NAME, Platform, PlatformSpec};
use opm_core::object::ReleaseKey;
use opm_core::opm::platform::{self as rules, Evaluation};
use opm_core::triggers;

use super::World;

/// Transformers each enabled catalog provides when a scenario does not say.
pub const DEFAULT_TRANSFORMERS: i64 = 3;

/// A Platform as a scenario writes it: its spec, and what evaluating its catalogs gives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlatformDef {
    /// `spec` of the Platform `cluster`: its type and pinned catalogs.
    pub spec: PlatformSpec,
    /// What the platform package's evaluation gives; absent: every enabled catalog resolves
    /// with [`DEFAULT_TRANSFORMERS`] transformers (Ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation: Option<Evaluation>,
}

impl PlatformDef {
    /// A `kubernetes` Platform enabling one catalog at `version`, resolving.
    pub fn catalog(path: &str, version: &str) -> Self {
        let pin = opm_core::api::platform::CatalogPin {
            version: version.into(),
            ..Default::default()
        };
        Self {
            spec: PlatformSpec {
                type_: "kubernetes".into(),
                registry: [(path.to_owned(), pin)].into(),
            },
            evaluation: None,
        }
    }

    fn evaluation(&self) -> Evaluation {
        self.evaluation
            .clone()
            .unwrap_or_else(|| Evaluation::Resolved {
                transformers: rules::normalise(&self.spec)
                    .catalogs
                    .into_iter()
                    .map(|c| (c.path, DEFAULT_TRANSFORMERS))
                    .collect(),
            })
    }
}

/// The Platform object after `def` is applied over `previous` at `now`, with the status the
/// operator's controller writes after evaluating it: a new spec is a new generation.
fn applied(previous: Option<&Platform>, def: &PlatformDef, now: Timestamp) -> Platform {
    let (generation, created) = match previous {
        Some(p) if p.spec == def.spec => (
            p.metadata.generation.unwrap_or(1),
            p.metadata.creation_timestamp.clone(),
        ),
        Some(p) => (
            p.metadata.generation.unwrap_or(1) + 1,
            p.metadata.creation_timestamp.clone(),
        ),
        None => (1, Some(Time(now))),
    };
    let mut p = Platform {
        metadata: ObjectMeta {
            name: Some(PLATFORM_NAME.into()),
            generation: Some(generation),
            creation_timestamp: created,
            ..Default::default()
        },
        spec: def.spec.clone(),
        status: previous.and_then(|p| p.status.clone()),
    };
    p.status = Some(rules::status(&p, &def.evaluation(), now));
    p
}

impl World {
    /// The Platform `cluster`, with the status the operator's controller wrote, if any.
    pub fn platform(&self) -> Option<&Platform> {
        self.cluster.platform.as_ref()
    }

    /// The digest OPM renders use now, or why they wait (the `PlatformNotReady` message).
    pub fn platform_ready(&self) -> Result<String, String> {
        self.cluster.platform_ready()
    }

    /// Creates the Platform, or replaces the existing one's spec (`kubectl apply`), and
    /// evaluates it; when that makes a Ready Platform with a new digest, every OPM release
    /// re-triggers at once.
    pub fn apply_platform(&mut self, def: &PlatformDef) -> &mut Self {
        self.epoch += 1;
        self.cluster.platform = Some(applied(self.cluster.platform.as_ref(), def, self.now));
        self.platform_settled();
        self
    }

    /// Replaces the spec of the existing Platform; without one, changes nothing (as
    /// `kubectl edit` of a missing object would).
    pub fn change_platform(&mut self, def: &PlatformDef) -> &mut Self {
        if self.cluster.platform.is_some() {
            self.apply_platform(def);
        }
        self
    }

    /// Deletes the Platform: OPM releases wait with `PlatformNotReady` from their next
    /// attempt on (nothing is re-triggered; their objects stay).
    pub fn delete_platform(&mut self) -> &mut Self {
        self.epoch += 1;
        self.cluster.platform = None;
        self.platform_settled();
        self
    }

    /// Notes the release as one that renders through the Platform (the operator's
    /// `note_release`), so a later Platform change re-triggers it.
    pub(crate) fn note_opm_release(&mut self, key: &ReleaseKey) {
        if !self.opm_releases.contains(key) {
            self.opm_releases.insert(key.clone());
        }
    }

    /// An operator restart: the controller's record of OPM releases and of the last Ready
    /// digest were in memory and are gone; its first readiness check after the initial list
    /// starts from nothing (every release is re-triggered by the restart anyway).
    pub(super) fn platform_controller_restarted(&mut self) {
        self.opm_releases.clear();
        self.platform_ready_digest = None;
        self.platform_settled();
    }

    /// The controller's readiness check after a Platform change: a Ready digest other than
    /// the last one re-triggers every release that rendered through the Platform or waits
    /// for it.
    fn platform_settled(&mut self) {
        let now_ready = self.platform_ready().ok();
        if now_ready == self.platform_ready_digest {
            return;
        }
        let retrigger = now_ready.is_some();
        self.platform_ready_digest = now_ready;
        if !retrigger {
            return;
        }
        let keys: Vec<ReleaseKey> = self
            .cluster
            .releases
            .iter()
            .filter(|(k, r)| {
                self.opm_releases.contains(*k) || triggers::waits_for_platform(r.object.status())
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.trigger(&k, "platformReady");
        }
    }
}

impl crate::cluster::Cluster {
    /// The digest of the Platform when it is Ready (SPEC §30), else why it is not.
    pub(crate) fn platform_ready(&self) -> Result<String, String> {
        rules::ready(self.platform.as_ref())?;
        Ok(self
            .platform
            .as_ref()
            .map(|p| rules::digest(&p.spec))
            .unwrap_or_default())
    }
}
