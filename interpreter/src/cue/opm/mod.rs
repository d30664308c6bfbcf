//! OPM renders (SPEC §30): which render a module version gets, the synthesised render
//! package (`LAYOUT.md` beside this file, verified against the real `cue` by the fixtures'
//! tests) and the operator's glue (`glue.cue`, embedded as is), the Platform the operator
//! watched last, and the evaluation of the platform package behind the Platform's status.
//! Every judgement of what `cue` returned is the core's ([`opm_core::opm`]): this module
//! only writes files, runs `cue` and hands the core the exported JSON.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use opm_core::api::platform::Platform;
use opm_core::opm::platform::Normalised;
use opm_core::opm::{self as rules, Flavour};
use opm_core::{Kind, ReleaseKey};
use serde_json::Value;

use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};
use crate::cue::render::{RenderError, RenderKey, Rendered, Renderer};

mod batch;
pub mod layout;
mod module_file;
pub use module_file::module_deps;
mod prefetch;
pub use prefetch::{Prefetch, PrefetchJob};
#[cfg(test)]
mod tests;

/// The operator's glue: matching, transforms and verdicts as data (owned by the CUE side).
pub const GLUE: &str = include_str!("glue.cue");

/// What a module version depends on, learned once per version (versions are immutable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleFacts {
    /// How it renders.
    pub flavour: Flavour,
    /// Every module `cue` resolved for it, path with major → version (core's included).
    pub deps: BTreeMap<String, String>,
}

/// The facts of one module version, learned once.
type FactsCell = Arc<tokio::sync::OnceCell<ModuleFacts>>;

/// The OPM state of one operator process: the last Platform seen, the module facts, and
/// which releases render through the Platform (re-triggered when it changes).
#[derive(Default)]
pub struct Opm {
    platform: RwLock<Option<Arc<Platform>>>,
    /// `false` until the Platform watch delivered its first list: before that, an OPM
    /// render waits rather than report a Platform missing that merely was not read yet.
    synced: std::sync::atomic::AtomicBool,
    /// One cell per module version: concurrent first renders of a version share one probe.
    facts: Mutex<HashMap<(String, String), FactsCell>>,
    releases: Mutex<HashSet<ReleaseKey>>,
    /// A Platform given on the command line (`--platform FILE`): used instead of the watch,
    /// and ready without an evaluation of its own (the render itself resolves its catalogs).
    fixed: RwLock<Option<Arc<Platform>>>,
    /// Open batches of OPM renders ([`batch`]).
    batches: batch::Batches,
    /// The read-ahead ([`prefetch`]): what was rendered ahead, who starts the runs.
    leads: prefetch::Leads,
    spawner: std::sync::OnceLock<Arc<dyn prefetch::Prefetch>>,
}

impl std::fmt::Debug for Opm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opm").finish_non_exhaustive()
    }
}

impl Opm {
    /// Records the Platform the watch delivered (`None`: there is none).
    pub fn set_platform(&self, platform: Option<Platform>) {
        *self.platform.write().unwrap_or_else(|p| p.into_inner()) = platform.map(Arc::new);
        self.synced.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Uses `platform` for every render, whatever the cluster holds (`--platform FILE`).
    pub fn fix_platform(&self, platform: Platform) {
        *self.fixed.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(platform));
    }

    /// The Platform last seen.
    pub fn platform(&self) -> Option<Arc<Platform>> {
        self.platform
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The Platform an OPM render uses now, with its digest, or why it waits (the core's
    /// rule, [`opm_core::opm::platform::ready`]).
    pub fn ready(&self) -> Result<(Normalised, String), String> {
        if let Some(p) = self.fixed.read().unwrap_or_else(|p| p.into_inner()).clone() {
            let digest = rules::platform::digest(&p.spec);
            let normal = rules::platform::normalise(&p.spec);
            if normal.catalogs.is_empty() {
                return Err("the Platform enables no catalog".into());
            }
            return Ok((normal, digest));
        }
        if !self.synced.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("the Platform has not been read yet".into());
        }
        let p = self.platform();
        let normal = rules::platform::ready(p.as_deref())?;
        let digest = p
            .as_ref()
            .map(|p| rules::platform::digest(&p.spec))
            .unwrap_or_default();
        Ok((normal, digest))
    }

    /// Remembers that `key` renders through the Platform.
    pub fn note_release(&self, key: &ReleaseKey) {
        self.releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone());
    }

    /// The releases that rendered (or waited) through the Platform, by kind.
    pub fn releases(&self, kind: Kind) -> Vec<ReleaseKey> {
        self.releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|k| k.kind == kind)
            .cloned()
            .collect()
    }

    /// The facts of `module`, from memory or from one `cue mod get` (first render of that
    /// version only: a NoOp never runs `cue` for them).
    pub async fn facts(
        &self,
        renderer: &Renderer,
        module: &ModuleRef,
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<ModuleFacts, RenderError> {
        let key = (module.path.clone(), module.version.clone());
        let cell = self
            .facts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default()
            .clone();
        cell.get_or_try_init(|| async {
            let text = renderer.module_deps_probe(module, credentials).await?;
            let deps = module_deps(&text);
            Ok(ModuleFacts {
                flavour: rules::flavour(deps.keys().map(String::as_str)),
                deps,
            })
        })
        .await
        .cloned()
    }

    /// Renders an OPM module for a release through the Platform: the exported glue read by
    /// the core into the plain release shape, cached by module version, values, identity
    /// and Platform digest. `Err(Ok(verdicts))` is the core's refusal.
    pub async fn render_module(
        &self,
        renderer: &Renderer,
        module: &ModuleRef,
        facts: &ModuleFacts,
        values: &Value,
        identity: &ReleaseIdentity,
        credentials: Option<&(String, Vec<u8>)>,
    ) -> Result<(Arc<Rendered>, String), OpmError> {
        let (platform, digest) = self.ready().map_err(OpmError::PlatformNotReady)?;
        let key = opm_key(renderer, module, values, identity, &digest, credentials).await?;
        if let Some(hit) = renderer.cached_render(&key) {
            return Ok((hit?, digest));
        }
        let files = layout::module_files(module, facts, &platform, values, identity)?;
        let bytes = export(renderer, &files, credentials).await?;
        let rendered = read(renderer, key, &bytes, identity)?;
        Ok((rendered, digest))
    }

    /// Renders the authored instance package in `dir` (a `Release` artifact holding
    /// `instance.cue`, extracted at `root`) through the Platform, cached by the artifact's
    /// digest, its path and the Platform digest.
    pub async fn render_instance(
        &self,
        renderer: &Renderer,
        artifact_digest: &str,
        spec_path: &str,
        root: &std::path::Path,
        dir: &std::path::Path,
    ) -> Result<(Arc<Rendered>, String), OpmError> {
        let (platform, digest) = self.ready().map_err(OpmError::PlatformNotReady)?;
        let key = RenderKey {
            source_digest: artifact_digest.to_owned(),
            config_digest: format!("opm-instance:{digest}"),
            path: spec_path.to_owned(),
            cue_version: renderer.cue_version().await?,
        };
        if let Some(hit) = renderer.cached_render(&key) {
            return Ok((hit?, digest));
        }
        let module_root = module_root(root, dir).ok_or_else(|| {
            OpmError::Render(RenderError::Evaluation {
                message: format!(
                    "no cue.mod/module.cue above {spec_path} in the artifact: an instance package needs its module file"
                ),
            })
        })?;
        let module_json = renderer
            .run_cue(
                &module_root,
                &["export", "--out", "json", "cue.mod/module.cue"],
                &[],
                renderer.config().timeout,
            )
            .await
            .map_err(|f| f.error)?;
        let module = layout::artifact_module(&module_json)
            .map_err(|message| RenderError::Evaluation { message })?;
        if rules::flavour(module.1.keys().map(String::as_str)) == Flavour::CoreV0 {
            return Err(OpmError::CoreV0(format!(
                "the instance package at {spec_path}"
            )));
        }
        let files = layout::instance_files(dir, &module, &platform)?;
        let bytes = export(renderer, &files, None).await?;
        let identity = ReleaseIdentity {
            name: String::new(),
            namespace: String::new(),
        };
        let rendered = read(renderer, key, &bytes, &identity)?;
        Ok((rendered, digest))
    }

    /// Evaluates the platform package of `platform` once (SPEC §30): transformers per
    /// enabled catalog, or `cue`'s error.
    pub async fn evaluate_platform(
        &self,
        renderer: &Renderer,
        platform: &Platform,
    ) -> rules::platform::Evaluation {
        use rules::platform::Evaluation;
        let normal = rules::platform::normalise(&platform.spec);
        let files = match layout::platform_files(&normal) {
            Ok(f) => f,
            Err(e) => {
                return Evaluation::Failed {
                    message: e.to_string(),
                    transient: false,
                };
            }
        };
        match export(renderer, &files, None).await {
            Ok(bytes) => match layout::transformer_counts(&bytes) {
                Ok(transformers) => Evaluation::Resolved { transformers },
                Err(message) => Evaluation::Failed {
                    message,
                    transient: false,
                },
            },
            Err(OpmError::Render(e)) => Evaluation::Failed {
                transient: matches!(
                    e,
                    RenderError::Timeout { .. }
                        | RenderError::RegistryUnreachable { .. }
                        | RenderError::Io { .. }
                ),
                message: e.to_string(),
            },
            Err(other) => Evaluation::Failed {
                message: other.to_string(),
                transient: false,
            },
        }
    }
}

/// Why an OPM render did not produce objects.
#[derive(Debug, thiserror::Error)]
pub enum OpmError {
    /// No Ready Platform: soft-blocked (SPEC §4).
    #[error("waiting for Platform cluster: {0}")]
    PlatformNotReady(String),
    /// The core refused the export (SPEC §30 verdicts).
    #[error("{}", rules::verdict_message(.0))]
    Verdicts(Vec<rules::Verdict>),
    /// A package of the retired core v0 (SPEC §30).
    #[error("{0} is a core v0 package")]
    CoreV0(String),
    /// `cue` or the operator's side failed.
    #[error(transparent)]
    Render(#[from] RenderError),
}

/// The render cache key of an OPM module render.
async fn opm_key(
    renderer: &Renderer,
    module: &ModuleRef,
    values: &Value,
    identity: &ReleaseIdentity,
    platform_digest: &str,
    credentials: Option<&(String, Vec<u8>)>,
) -> Result<RenderKey, RenderError> {
    let config = serde_json::json!({
        "opm": true,
        "values": values,
        "name": identity.name,
        "namespace": identity.namespace,
        "platform": platform_digest,
        "registry": renderer.config().registry,
        "credentials": credentials.map(|(d, _)| d),
    });
    Ok(RenderKey {
        source_digest: format!("module:{}@{}", module.path, module.version),
        config_digest: opm_core::digest::sha256(
            opm_core::digest::canonical_json(&config).as_bytes(),
        ),
        path: ".".to_owned(),
        cue_version: renderer.cue_version().await?,
    })
}

/// Exports the synthesised files with `cue`; an incomplete output is named from `cue`'s
/// error path by the core before the message is redacted.
async fn export(
    renderer: &Renderer,
    files: &layout::Files,
    credentials: Option<&(String, Vec<u8>)>,
) -> Result<Vec<u8>, OpmError> {
    match renderer
        .export_tree(&files.files, &files.args, credentials)
        .await
    {
        Ok(bytes) => Ok(bytes),
        Err(f) => match rules::incomplete_output(&f.stderr) {
            Some(v) if matches!(f.error, RenderError::Evaluation { .. }) => {
                Err(OpmError::Verdicts(vec![v]))
            }
            _ => Err(OpmError::Render(f.error)),
        },
    }
}

/// The core reads the glue's export; what it accepts is cached in the plain shape.
fn read(
    renderer: &Renderer,
    key: RenderKey,
    bytes: &[u8],
    identity: &ReleaseIdentity,
) -> Result<Arc<Rendered>, OpmError> {
    let export: Value = serde_json::from_slice(bytes).map_err(|e| {
        OpmError::Render(RenderError::InvalidOutput {
            message: format!("cue output is not JSON: {e}"),
        })
    })?;
    // The instance's own identity wins (a Release's package names it); the release's
    // otherwise.
    let inst = export.get("instance");
    let name = inst
        .and_then(|i| i.get("name"))
        .and_then(Value::as_str)
        .unwrap_or(&identity.name)
        .to_owned();
    let namespace = inst
        .and_then(|i| i.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or(&identity.namespace)
        .to_owned();
    let plain = rules::read_export(export, &name, &namespace).map_err(OpmError::Verdicts)?;
    let plain_bytes = serde_json::to_vec(&plain).map_err(|e| {
        OpmError::Render(RenderError::Io {
            message: format!("serialising the render: {e}"),
        })
    })?;
    Ok(renderer.put_render(key, plain_bytes)?)
}

/// The nearest directory from `dir` up to `root` holding `cue.mod/module.cue`, as CUE finds
/// a package's module root.
pub(crate) fn module_root(
    root: &std::path::Path,
    dir: &std::path::Path,
) -> Option<std::path::PathBuf> {
    let mut d = dir.to_path_buf();
    loop {
        if d.join("cue.mod/module.cue").is_file() {
            return Some(d);
        }
        if d == root || !d.pop() || !d.starts_with(root) {
            return None;
        }
    }
}

/// How long a Platform evaluation may take at most (it resolves every catalog).
pub const PLATFORM_EVAL_TIMEOUT: Duration = Duration::from_secs(120);
