//! The Platform's rules (SPEC §30): its normal form and digest, its status after one
//! evaluation, and whether OPM releases may render with it.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::api::platform::{CatalogStatus, PLATFORM_NAME, Platform, PlatformSpec, PlatformStatus};
use crate::conditions::{Conditions, FALSE, TRUE};
use crate::constants::conditions as ct;
use crate::digest;
use crate::reason::Reason;

/// One enabled catalog at its exact version (always with the leading `v`, as `cue` wants it).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Catalog {
    /// Module path with major, e.g. `opmodel.dev/catalogs/opm@v2`.
    pub path: String,
    /// Exact version, e.g. `v2.0.0`.
    pub version: String,
}

/// The spec as the render uses it: disabled catalogs dropped, versions with their `v`,
/// sorted by path. Two specs with the same normal form render the same.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Normalised {
    /// `spec.type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The enabled catalogs, sorted by path.
    pub catalogs: Vec<Catalog>,
}

/// `2.0.0` and `v2.0.0` are one version; `cue` wants the `v`.
pub(crate) fn normalise_version(v: &str) -> String {
    let v = v.trim();
    if v.starts_with('v') {
        v.to_owned()
    } else {
        format!("v{v}")
    }
}

/// The normal form of a spec (SPEC §30: the Platform is the resolution).
pub fn normalise(spec: &PlatformSpec) -> Normalised {
    let catalogs = spec
        .registry
        .iter()
        .filter(|(_, pin)| pin.enabled())
        .map(|(path, pin)| Catalog {
            path: path.clone(),
            version: normalise_version(&pin.version),
        })
        .collect();
    Normalised {
        type_: spec.type_.clone(),
        catalogs,
    }
}

/// `status.digest`: SHA-256 of the canonical JSON of the normal form. A disabled catalog,
/// or a version written without its `v`, changes nothing.
pub fn digest(spec: &PlatformSpec) -> String {
    let value = serde_json::to_value(normalise(spec)).unwrap_or_default();
    digest::sha256(digest::canonical_json(&value).as_bytes())
}

/// What one evaluation of the platform package gave.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(
    tag = "result",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Evaluation {
    /// `cue` resolved every catalog: transformers per catalog path.
    Resolved {
        /// `(catalog path, transformers it provides)` per enabled catalog.
        transformers: Vec<(String, i64)>,
    },
    /// `cue` failed; `transient` when the registry could not be reached or `cue` timed out
    /// (retried with backoff), else stalled until the Platform changes.
    Failed {
        /// `cue`'s message (first lines), shown in the condition.
        message: String,
        /// Whether retrying without a change can help.
        transient: bool,
    },
}

/// The status after an evaluation of `platform` at `now` (SPEC §30): `Ready=True/Succeeded`
/// "N transformers from M catalogs", or `Ready=False/ResolutionFailed` with `cue`'s message
/// (plus `Stalled=True` when it needs a change).
pub fn status(platform: &Platform, evaluation: &Evaluation, now: Timestamp) -> PlatformStatus {
    let persisted = platform
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let generation = platform.metadata.generation.unwrap_or_default();
    let normal = normalise(&platform.spec);
    let mut conds = Conditions::from_persisted(&persisted);
    let mut catalogs = Vec::new();
    match evaluation {
        Evaluation::Resolved { transformers } => {
            let mut total = 0;
            for c in &normal.catalogs {
                let n = transformers
                    .iter()
                    .find(|(p, _)| *p == c.path)
                    .map(|(_, n)| *n)
                    .unwrap_or_default();
                total += n;
                catalogs.push(CatalogStatus {
                    path: c.path.clone(),
                    version: c.version.clone(),
                    transformers: n,
                });
            }
            let msg = format!(
                "{total} transformers from {} catalog{}",
                catalogs.len(),
                if catalogs.len() == 1 { "" } else { "s" }
            );
            conds.set(ct::READY, TRUE, Reason::Succeeded, &msg);
            conds.remove(ct::STALLED);
        }
        Evaluation::Failed { message, transient } => {
            catalogs = normal
                .catalogs
                .iter()
                .map(|c| CatalogStatus {
                    path: c.path.clone(),
                    version: c.version.clone(),
                    transformers: 0,
                })
                .collect();
            let msg = format!("evaluating the Platform failed: {message}");
            conds.set(ct::READY, FALSE, Reason::ResolutionFailed, &msg);
            if *transient {
                conds.remove(ct::STALLED);
            } else {
                conds.set(ct::STALLED, TRUE, Reason::ResolutionFailed, &msg);
            }
        }
    }
    PlatformStatus {
        observed_generation: generation,
        conditions: conds.finalize(&persisted, now, generation),
        catalogs,
        digest: digest(&platform.spec),
    }
}

/// The Platform an OPM render may use, or why it waits (the `PlatformNotReady` message).
/// Ready means: named `cluster`, `Ready=True` for its current generation, and a status digest
/// equal to its spec's (so a spec change is never rendered with the old evaluation).
pub fn ready(platform: Option<&Platform>) -> Result<Normalised, String> {
    let Some(p) = platform else {
        return Err(format!(
            "no Platform {PLATFORM_NAME} exists; create one naming the catalogs (kubectl get plat)"
        ));
    };
    let generation = p.metadata.generation.unwrap_or_default();
    let Some(status) = p.status.as_ref() else {
        return Err("the Platform has not been evaluated yet".into());
    };
    let ready = status.conditions.iter().find(|c| c.type_ == ct::READY);
    match ready {
        Some(c) if c.status == TRUE => {}
        Some(c) => return Err(format!("Ready={} {}: {}", c.status, c.reason, c.message)),
        None => return Err("the Platform has not been evaluated yet".into()),
    }
    if status.observed_generation != generation || status.digest != digest(&p.spec) {
        return Err("the Platform changed and is being evaluated again".into());
    }
    if normalise(&p.spec).catalogs.is_empty() {
        return Err("the Platform enables no catalog".into());
    }
    Ok(normalise(&p.spec))
}
