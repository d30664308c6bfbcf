//! Renders the proposed release with the operator's own renderer: a local package
//! (`--path`), or the release's module with the proposed version and values, or the
//! release's current source artifact.

use std::path::PathBuf;

use kube::Client;
use kube::api::{Api, DynamicObject};
use opm_core::input::InputKind;
use opm_core::{ReleaseKey, ReleaseObject};
use opm_operator::cue::module_ref::{ModuleRef, ReleaseIdentity};
use opm_operator::cue::opm::Opm;
use opm_operator::cue::render::{RenderConfig, Renderer};
use opm_operator::cue::rendered::Rendered as CueRendered;
use opm_operator::cue::secrets::SecretTable;
use serde_json::Value;

use super::DiffOpts;
use super::derived::secret_derived;
use crate::connect::Session;
use crate::error::{CliError, Result};

/// A proposed render.
pub(super) struct Rendered {
    /// The exported value, as `cue` gave it.
    pub(super) exported: Value,
    /// Its measured size.
    pub(super) bytes: u64,
    /// Rendered values a `valuesFrom` Secret value reaches ([`secret_derived`]).
    pub(super) derived: Vec<String>,
}

impl Rendered {
    fn plain((exported, bytes): (Value, u64)) -> Self {
        Self {
            exported,
            bytes,
            derived: Vec::new(),
        }
    }
}

fn render_error(e: impl std::fmt::Display, secrets: &SecretTable) -> CliError {
    CliError::Other(format!("render failed: {}", secrets.scrub(&e.to_string())))
}

/// The proposed values of a ModuleRelease, as the operator composes them.
struct Values {
    values: Value,
    /// The module's registry credentials (`module.secretRef`): digest and bytes.
    credentials: Option<(String, Vec<u8>)>,
    /// The values with every Secret value changed, when some were read.
    perturbed: Option<Value>,
}

/// Renders the proposed release: a local package (`--path`), or the release's module with
/// the proposed version and values, or the release's current source artifact.
pub(super) async fn render(
    s: &Session,
    client: &Client,
    obj: &ReleaseObject,
    opts: &DiffOpts,
    secrets: &mut SecretTable,
) -> Result<Rendered> {
    let cache = match &opts.cache_dir {
        Some(d) => Dir::Kept(d.clone()),
        None => Dir::Temp(
            tempfile::tempdir()
                .map_err(|e| CliError::Other(format!("temporary directory: {e}")))?,
        ),
    };
    let mut config = RenderConfig::new(&opts.cue.cue_binary);
    config.registry = opts.cue.cue_registry.clone();
    config.timeout = opts.cue.render_timeout;
    config.cue_cache_dir = Some(cache.path().join("cue"));
    let renderer = Renderer::new(config);
    let opm = platform(s, opts).await?;
    if let Some(dir) = &opts.path {
        if opts.values.is_some() || opts.version.is_some() {
            return Err(CliError::Usage(
                "--path renders a release package: --values and --version do not apply".into(),
            ));
        }
        let r = renderer
            .render_package(dir)
            .await
            .map_err(|e| render_error(e, secrets))?;
        return Ok(Rendered::plain((r.exported, r.bytes)));
    }
    match obj {
        ReleaseObject::ModuleRelease(m) => {
            render_module_release(client, &obj.key(), m, opts, &renderer, &opm, secrets).await
        }
        ReleaseObject::Release(r) => {
            if opts.values.is_some() || opts.version.is_some() {
                return Err(CliError::Usage(
                    "--values and --version apply to a ModuleRelease; for a Release give --path DIR (a release package)".into(),
                ));
            }
            render_release(s, r, &cache, &renderer, &opm, secrets).await
        }
    }
}

/// SPEC §30: OPM modules and instances render through `--platform FILE`, else the
/// cluster's Platform `cluster` (read as the operator reads it: Ready for its spec).
async fn platform(s: &Session, opts: &DiffOpts) -> Result<Opm> {
    let opm = Opm::default();
    match &opts.platform {
        Some(file) => opm.fix_platform(
            opm_operator::commands::render_cmd::read_platform(file)
                .map_err(|e| CliError::Usage(e.to_string()))?,
        ),
        None => {
            let api = kube::Api::<opm_core::api::platform::Platform>::all(s.client.clone());
            let p = api
                .get_opt(opm_core::api::platform::PLATFORM_NAME)
                .await
                .ok()
                .flatten();
            opm.set_platform(p);
        }
    }
    Ok(opm)
}

/// A ModuleRelease's module at the proposed version with the proposed values.
async fn render_module_release(
    client: &Client,
    key: &ReleaseKey,
    m: &opm_core::api::ModuleRelease,
    opts: &DiffOpts,
    renderer: &Renderer,
    opm: &Opm,
    secrets: &mut SecretTable,
) -> Result<Rendered> {
    let version = opts
        .version
        .clone()
        .unwrap_or_else(|| m.spec.module.version.clone());
    let module = ModuleRef::new(&m.spec.module.path, &version, None)
        .map_err(|e| render_error(e, secrets))?;
    let Values {
        values,
        credentials,
        perturbed,
    } = proposed_values(client, key, m, opts, secrets).await?;
    let identity = ReleaseIdentity {
        name: key.name.clone(),
        namespace: key.namespace.clone(),
    };
    let facts = opm
        .facts(renderer, &module, credentials.as_ref())
        .await
        .map_err(|e| render_error(e, secrets))?;
    let render = async |values: &Value| match facts.flavour {
        opm_core::opm::Flavour::Opm => opm
            .render_module(
                renderer,
                &module,
                &facts,
                values,
                &identity,
                credentials.as_ref(),
            )
            .await
            .map(|(r, _)| CueRendered::into_parts(r))
            .map_err(|e| e.to_string()),
        _ => renderer
            .render_module_cached_with(&module, values, &identity, credentials.clone())
            .await
            .map(CueRendered::into_parts)
            .map_err(|e| e.to_string()),
    };
    if facts.flavour == opm_core::opm::Flavour::CoreV0 {
        return Err(CliError::Other(opm_core::opm::core_v0_message(&format!(
            "module {}@{}",
            module.path, module.version
        ))));
    }
    let (exported, bytes) = render(&values)
        .await
        .map_err(|e| render_error(e, secrets))?;
    let derived = match perturbed {
        None => Vec::new(),
        Some(p) => {
            let other = render(&p).await.ok();
            secret_derived(&exported, other.as_ref().map(|(v, _)| v))
        }
    };
    Ok(Rendered {
        exported,
        bytes,
        derived,
    })
}

/// The proposed values (`--values`, else `spec.values`) composed with `valuesFrom` and the
/// module's credentials read, as the operator reads them.
async fn proposed_values(
    client: &Client,
    key: &ReleaseKey,
    m: &opm_core::api::ModuleRelease,
    opts: &DiffOpts,
    secrets: &mut SecretTable,
) -> Result<Values> {
    let values = match &opts.values {
        Some(f) => {
            Some(opm_operator::cue::local_values::merged(&[], Some(f)).map_err(CliError::Usage)?)
        }
        None => m.spec.values.clone(),
    };
    let secret_ref = m.spec.module.secret_ref.as_ref().map(|r| r.name.clone());
    let empty = || Value::Object(Default::default());
    if m.spec.values_from.is_empty() && secret_ref.is_none() {
        return Ok(Values {
            values: values.unwrap_or_else(empty),
            credentials: None,
            perturbed: None,
        });
    }
    let read = opm_operator::steps::values_from::read(
        Ok(client.clone()),
        &key.namespace,
        &m.spec.values_from,
        secret_ref.as_deref(),
        secrets,
        opm_core::config::DEFAULT_MAX_VALUES_BYTES,
        &mut Vec::new(),
    )
    .await;
    let InputKind::ValuesRead {
        values: got,
        credentials,
    } = read
    else {
        return Err(CliError::Other("reading valuesFrom gave no answer".into()));
    };
    opm_core::values_from::check_size(
        &m.spec.values_from,
        &got,
        opm_core::config::DEFAULT_MAX_VALUES_BYTES,
    )
    .map_err(|f| CliError::Other(format!("valuesFrom ({}): {}", f.reason, f.message)))?;
    let merged = opm_core::values_from::compose(
        &key.namespace,
        &m.spec.values_from,
        &got,
        values.as_ref(),
        None,
    )
    .map_err(|f| {
        CliError::Other(format!(
            "valuesFrom ({}): {}",
            f.reason,
            secrets.scrub(&f.message)
        ))
    })?;
    let credentials = match (&secret_ref, credentials) {
        (Some(name), Some(c)) => module_credentials(&key.namespace, name, &c, secrets)?,
        _ => None,
    };
    let perturbed = merged
        .as_ref()
        .filter(|_| secrets.reads_secret_values())
        .map(|v| secrets.restore_strings_perturbed(v));
    Ok(Values {
        values: merged
            .map(|v| secrets.restore_strings(&v))
            .unwrap_or_else(empty),
        credentials,
        perturbed,
    })
}

/// The module's registry credentials from its `secretRef` Secret, as digest and bytes.
fn module_credentials(
    namespace: &str,
    name: &str,
    read: &std::result::Result<opm_core::input::CredentialsContent, opm_core::input::ApiError>,
    secrets: &SecretTable,
) -> Result<Option<(String, Vec<u8>)>> {
    let digest = opm_core::values_from::credentials(namespace, name, read, None)
        .map_err(|f| CliError::Other(format!("module.secretRef ({}): {}", f.reason, f.message)))?;
    Ok(secrets
        .credentials(&digest)
        .map(|b| (digest.clone(), b.to_vec())))
}

/// A Release: its Flux source's current artifact, rendered as an OPM instance or a
/// release package.
async fn render_release(
    s: &Session,
    r: &opm_core::api::Release,
    cache: &Dir,
    renderer: &Renderer,
    opm: &Opm,
    secrets: &SecretTable,
) -> Result<Rendered> {
    let (url, digest) = source_artifact(s, r).await?;
    let fetcher =
        opm_operator::artifact::fetch::Fetcher::new(opm_operator::artifact::fetch::FetchConfig {
            timeout: std::time::Duration::from_secs(60),
            max_bytes: 64 * 1024 * 1024,
        })
        .map_err(|e| CliError::Other(format!("HTTP client: {e}")))?;
    let artifacts = opm_operator::artifact::artifact_cache::ArtifactCache::new(
        cache.path(),
        fetcher,
        Default::default(),
        Default::default(),
    )
    .map_err(|e| CliError::Other(format!("artifact cache: {e}")))?;
    let handle = artifacts
        .get(&url, &digest)
        .await
        .map_err(|e| CliError::Other(format!("fetching the source artifact {url}: {e}")))?;
    let dir = opm_operator::artifact::release_path::resolve_path(handle.root(), &r.spec.path)
        .map_err(|e| CliError::Other(e.to_string()))?;
    if opm_operator::artifact::release_path::holds(
        handle.root(),
        &dir,
        opm_core::opm::INSTANCE_FILE,
    ) {
        let (r, _) = opm
            .render_instance(renderer, &digest, &r.spec.path, handle.root(), &dir)
            .await
            .map_err(|e| render_error(e, secrets))?;
        return Ok(Rendered::plain(CueRendered::into_parts(r)));
    }
    let rendered = renderer
        .render_package(&dir)
        .await
        .map_err(|e| render_error(e, secrets))?;
    Ok(Rendered::plain((rendered.exported, rendered.bytes)))
}

enum Dir {
    Kept(PathBuf),
    Temp(tempfile::TempDir),
}

impl Dir {
    fn path(&self) -> &std::path::Path {
        match self {
            Dir::Kept(p) => p,
            Dir::Temp(t) => t.path(),
        }
    }
}

/// The artifact the Release's Flux source advertises (read as the user).
async fn source_artifact(s: &Session, r: &opm_core::api::Release) -> Result<(String, String)> {
    let sr = &r.spec.source_ref;
    let namespace = if sr.namespace.is_empty() {
        r.metadata.namespace.clone().unwrap_or_default()
    } else {
        sr.namespace.clone()
    };
    let api_version = if sr.api_version.is_empty() {
        opm_core::constants::FLUX_SOURCE_API_VERSION.to_string()
    } else {
        sr.api_version.clone()
    };
    let resource = opm_operator::steps::source::api_resource(&api_version, &sr.kind);
    let what = format!("{} {namespace}/{}", sr.kind, sr.name);
    let src = Api::<DynamicObject>::namespaced_with(s.client.clone(), &namespace, &resource)
        .get(&sr.name)
        .await
        .map_err(|e| CliError::api(format!("reading the source {what}"), &e))?;
    match opm_operator::steps::source::artifact_of(&src.data) {
        Ok(a) => Ok((a.url, a.digest)),
        Err(e) => Err(CliError::Other(format!(
            "the source {what} has no usable artifact ({e}); give --path DIR to diff a local release package"
        ))),
    }
}
