//! The bridge from the core's `FetchArtifact` / `Render` effects to the local executors
//! (artifact cache, extraction, `cue` renderer), translating their error types into the
//! core's typed errors at this one boundary.

use opm_core::effect::RenderRequest;
use opm_core::exits::{fetch_failure, render_failure};
use opm_core::input::FetchedArtifact;
use opm_core::outcome::{Failure, FailureClass};
use opm_core::{FetchError as CoreFetch, RenderError as CoreRender};
use serde_json::Value;

use crate::artifact::artifact_cache::{ArtifactCache, ArtifactError, Lookup};
use crate::artifact::extract::ExtractError;
use crate::artifact::fetch::FetchError;
use crate::artifact::release_path::{PathError, holds, resolve_path};
use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};
use crate::cue::opm::OpmError;
use crate::cue::render::{RenderError, RenderGate, Rendered, Renderer};
use crate::ops::metrics::FetchObservation;
use opm_core::opm::Flavour;

/// Fetch and render, as the driver needs them.
pub struct Local {
    /// Downloads, verified and extracted, by digest.
    pub cache: ArtifactCache,
    /// The `cue` runs, their cache and batches.
    pub renderer: Renderer,
    /// OPM renders: the Platform, module facts, the releases rendering through it (SPEC §30).
    pub opm: crate::cue::opm::Opm,
}

/// A render's exported value (plain release shape), the size of `cue`'s JSON, and the
/// digest of the Platform an OPM render used (empty for a plain render).
pub type RenderParts = (Value, u64, String);

impl Local {
    /// Downloads (or finds in the cache), verifies and extracts the artifact; also says
    /// whether the cache served it, for the metrics.
    pub async fn fetch(
        &self,
        url: &str,
        digest: &str,
    ) -> Result<(FetchedArtifact, FetchObservation), CoreFetch> {
        let (handle, lookup) = self.cache.lookup(url, digest).await.map_err(fetch_error)?;
        let observed = match lookup {
            Lookup::Hit => FetchObservation::Hit,
            Lookup::Miss => FetchObservation::Miss {
                bytes: handle.archive_size(),
            },
        };
        let fetched = FetchedArtifact {
            digest: digest.to_string(),
            size: handle.size(),
        };
        Ok((fetched, observed))
    }

    /// Renders the request and returns the exported value with the size of its JSON.
    pub async fn render(&self, request: &RenderRequest) -> Result<RenderParts, CoreRender> {
        self.render_with(request, None).await
    }

    /// [`Self::render`] with the `module.secretRef` Docker config (`digest`, bytes) for
    /// the module pull (SPEC §27), alone and without a render turn.
    pub async fn render_with(
        &self,
        request: &RenderRequest,
        credentials: Option<(String, Vec<u8>)>,
    ) -> Result<RenderParts, CoreRender> {
        let rendered = match request {
            RenderRequest::Module { .. } => {
                let (module, values, identity) = module_parts(request, credentials.is_some())?;
                if let Some(opm) = self
                    .opm_module(&module, &values, &identity, credentials.as_ref())
                    .await?
                {
                    return Ok(opm);
                }
                self.renderer
                    .render_module_cached_with(&module, &values, &identity, credentials)
                    .await
            }
            RenderRequest::Artifact { .. } => return self.render_artifact(request).await,
        };
        Ok(plain(rendered.map_err(render_error)?))
    }

    /// The OPM render of `module` when its version is an OPM module (`None`: plain), or the
    /// core v0 refusal (SPEC §30). The decision is remembered per module version.
    async fn opm_module(
        &self,
        module: &ModuleRef,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<Option<RenderParts>, CoreRender> {
        let facts = self
            .opm
            .facts(&self.renderer, module, credentials)
            .await
            .map_err(render_error)?;
        match facts.flavour {
            Flavour::Plain => Ok(None),
            Flavour::CoreV0 => Err(CoreRender::CoreV0 {
                what: format!("module {}@{}", module.path, module.version),
            }),
            Flavour::Opm => {
                let (rendered, digest) = self
                    .opm
                    .render_module(
                        &self.renderer,
                        module,
                        &facts,
                        values,
                        identity,
                        credentials,
                    )
                    .await
                    .map_err(opm_error)?;
                let (value, bytes) = Rendered::into_parts(rendered);
                Ok(Some((value, bytes, digest)))
            }
        }
    }

    /// [`Self::render_with`] in fair turns of `gate` (SPEC §24): an artifact's render
    /// takes a turn of `namespace`; a module's is batched with concurrent renders of the
    /// same module version ([`Renderer::render_module_fair`]). `deadline` ends the attempt.
    pub async fn render_fair<G: RenderGate>(
        &self,
        request: &RenderRequest,
        credentials: Option<(String, Vec<u8>)>,
        gate: &G,
        namespace: &str,
        deadline: std::time::Instant,
    ) -> Result<RenderParts, CoreRender> {
        let rendered = match request {
            RenderRequest::Module { .. } => {
                let (module, values, identity) = module_parts(request, credentials.is_some())?;
                let facts = self
                    .opm
                    .facts(&self.renderer, &module, credentials.as_ref())
                    .await
                    .map_err(render_error)?;
                match facts.flavour {
                    Flavour::Plain => {}
                    Flavour::CoreV0 => {
                        return Err(CoreRender::CoreV0 {
                            what: format!("module {}@{}", module.path, module.version),
                        });
                    }
                    // Batched with concurrent renders of this module version through this
                    // Platform, in fair turns of the gate.
                    Flavour::Opm => {
                        let (rendered, digest) = self
                            .opm
                            .render_module_fair(
                                &self.renderer,
                                &module,
                                &facts,
                                &values,
                                &identity,
                                credentials.as_ref(),
                                gate,
                                namespace,
                            )
                            .await
                            .map_err(opm_error)?;
                        let (value, bytes) = Rendered::into_parts(rendered);
                        return Ok((value, bytes, digest));
                    }
                }
                self.renderer
                    .render_module_fair(&module, &values, &identity, credentials, gate, deadline)
                    .await
            }
            RenderRequest::Artifact { .. } => {
                let _turn = gate.turn(namespace).await;
                return self.render_artifact(request).await;
            }
        };
        Ok(plain(rendered.map_err(render_error)?))
    }

    async fn render_artifact(&self, request: &RenderRequest) -> Result<RenderParts, CoreRender> {
        let RenderRequest::Artifact {
            artifact_digest,
            artifact_url,
            path,
        } = request
        else {
            unreachable!("render_artifact is called with artifact requests only")
        };
        let handle = self
            .cache
            .get(artifact_url, artifact_digest)
            .await
            .map_err(|e| CoreRender::Refetch {
                error: fetch_error(e),
            })?;
        let dir = resolve_path(handle.root(), path).map_err(path_error)?;
        // SPEC §30: `instance.cue` is an OPM instance, rendered through the Platform;
        // `release.cue` keeps the plain contract.
        if holds(handle.root(), &dir, opm_core::opm::INSTANCE_FILE) {
            let (rendered, digest) = self
                .opm
                .render_instance(&self.renderer, artifact_digest, path, handle.root(), &dir)
                .await
                .map_err(opm_error)?;
            let (value, bytes) = Rendered::into_parts(rendered);
            return Ok((value, bytes, digest));
        }
        // SPEC §30: a release package of the retired core v0 (the seed's kernel era) is
        // refused with the move-to-v2 stall, read from its module file before `cue` runs.
        if let Some(module_root) = crate::cue::opm::module_root(handle.root(), &dir) {
            let text =
                std::fs::read_to_string(module_root.join("cue.mod/module.cue")).unwrap_or_default();
            let deps = crate::cue::opm::module_deps(&text);
            if opm_core::opm::flavour(deps.keys().map(String::as_str)) == Flavour::CoreV0 {
                return Err(CoreRender::CoreV0 {
                    what: format!("the release package at {path}"),
                });
            }
        }
        let rendered = self
            .renderer
            .render_package_cached(artifact_digest, path, &dir)
            .await
            .map_err(render_error)?;
        Ok(plain(rendered))
    }
}

fn plain(rendered: std::sync::Arc<Rendered>) -> RenderParts {
    let (value, bytes) = Rendered::into_parts(rendered);
    (value, bytes, String::new())
}

/// OPM render errors → the core's render error classes (the core decides each exit).
pub fn opm_error(e: OpmError) -> CoreRender {
    match e {
        OpmError::PlatformNotReady(message) => CoreRender::PlatformNotReady { message },
        OpmError::Verdicts(verdicts) => CoreRender::Verdicts { verdicts },
        OpmError::CoreV0(what) => CoreRender::CoreV0 { what },
        OpmError::Render(e) => render_error(e),
    }
}

/// A module request's reference, values and release identity; refused when it wants
/// registry credentials the attempt does not hold.
pub(crate) fn module_parts(
    request: &RenderRequest,
    has_credentials: bool,
) -> Result<(ModuleRef, Value, ReleaseIdentity), CoreRender> {
    let RenderRequest::Module {
        path,
        version,
        values,
        release_name,
        release_namespace,
        credentials: wanted,
    } = request
    else {
        unreachable!("module_parts is called with module requests only")
    };
    if wanted.is_some() && !has_credentials {
        return Err(CoreRender::Io {
            message: "registry credentials of this attempt are not at hand".into(),
        });
    }
    let module = ModuleRef::new(path, version, None).map_err(render_error)?;
    let identity = ReleaseIdentity {
        name: release_name.clone(),
        namespace: release_namespace.clone(),
    };
    let values = values
        .clone()
        .unwrap_or_else(|| Value::Object(Default::default()));
    Ok((module, values, identity))
}

/// Cache/fetch/extract errors → the core's fetch error classes.
pub fn fetch_error(e: ArtifactError) -> CoreFetch {
    let message = e.to_string();
    match e {
        ArtifactError::Fetch(f) => match f {
            FetchError::Connect { .. } => CoreFetch::Connection { message },
            FetchError::Truncated { .. } | FetchError::Io { .. } | FetchError::Redirect { .. } => {
                CoreFetch::Io { message }
            }
            FetchError::HttpStatus { status, .. } => CoreFetch::Http { status },
            FetchError::Timeout { .. } => CoreFetch::Timeout,
            FetchError::DigestMismatch { expected, actual } => {
                CoreFetch::DigestMismatch { expected, actual }
            }
            FetchError::TooLarge { .. } => CoreFetch::TooLarge { message },
            FetchError::UnsupportedDigest { .. }
            | FetchError::MalformedDigest { .. }
            | FetchError::UnsupportedUrl { .. } => CoreFetch::InvalidArtifact { message },
        },
        ArtifactError::Extract(x) => match x {
            // The local disk failed, not the archive: retried.
            ExtractError::Io { .. } => CoreFetch::Io { message },
            // Over the extraction budget: the disk may be slow, the archive fine.
            ExtractError::Deadline { .. } => CoreFetch::Io { message },
            ExtractError::TooLarge { .. } | ExtractError::TooManyEntries { .. } => {
                CoreFetch::TooLarge { message }
            }
            _ => CoreFetch::InvalidArtifact { message },
        },
    }
}

/// `spec.path` errors → the core's render error classes.
pub fn path_error(e: PathError) -> CoreRender {
    let message = e.to_string();
    match e {
        PathError::PathNotFound { .. } => CoreRender::PathNotFound { message },
        PathError::ReleaseFileNotFound { .. } => CoreRender::ReleaseFileNotFound { message },
    }
}

/// What the core makes of an executor's error: the SPEC §4 exit (reason, transient or
/// stalled, message) production reaches through this module's translation and the core's
/// classification. Executors decide nothing themselves; their tests assert this, so a
/// wrong mapping at the boundary fails them.
pub trait Verdict {
    /// The core's classified failure for this error.
    fn failure(&self) -> Failure;

    /// Transient (backoff) or stalled (needs a change).
    fn class(&self) -> FailureClass {
        self.failure().class
    }

    /// The condition reason.
    fn reason(&self) -> opm_core::Reason {
        self.failure().reason
    }
}

impl Verdict for ArtifactError {
    fn failure(&self) -> Failure {
        fetch_failure(&fetch_error(self.clone()))
    }
}

impl Verdict for FetchError {
    fn failure(&self) -> Failure {
        ArtifactError::Fetch(self.clone()).failure()
    }
}

impl Verdict for ExtractError {
    fn failure(&self) -> Failure {
        ArtifactError::Extract(self.clone()).failure()
    }
}

impl Verdict for RenderError {
    fn failure(&self) -> Failure {
        render_failure(&render_error(self.clone()))
    }
}

impl Verdict for PathError {
    fn failure(&self) -> Failure {
        render_failure(&path_error(self.clone()))
    }
}

/// Renderer errors → the core's render error classes.
pub fn render_error(e: RenderError) -> CoreRender {
    let message = e.to_string();
    match e {
        RenderError::Resolution { .. } => CoreRender::Resolution { message },
        RenderError::RegistryUnreachable { .. } => CoreRender::RegistryUnreachable { message },
        RenderError::Timeout { .. } => CoreRender::Timeout { message },
        RenderError::UnsupportedKind { kind } => CoreRender::UnsupportedKind { kind },
        RenderError::Evaluation { .. } | RenderError::InvalidOutput { .. } => {
            CoreRender::Evaluation { message }
        }
        // The core decides these (SPEC §24) from the typed figures.
        RenderError::OutputTooLarge {
            bytes_at_least,
            limit,
        } => CoreRender::TooLarge {
            bytes_at_least,
            cap: limit as u64,
        },
        RenderError::OutOfMemory { limit } => CoreRender::OutOfMemory { limit_bytes: limit },
        RenderError::Io { .. } => CoreRender::Io { message },
    }
}

#[cfg(test)]
mod tests;
