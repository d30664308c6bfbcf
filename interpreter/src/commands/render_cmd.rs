//! `opm-operator render` (DESIGN.md §3): print what a release would apply, without a
//! cluster. Public so `kubectl opm render` (the `cli/` crate, SPEC §29) offers the very same
//! subcommand, flags and output instead of a copy.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;

use crate::cue::module_ref::{ModuleRef, ReleaseIdentity};
use crate::cue::opm::Opm;
use crate::cue::render::{DEFAULT_RENDER_TIMEOUT, RenderConfig, Renderer};
use opm_core::api::platform::Platform;
use opm_core::opm::Flavour;

/// How `cue` is run (shared by `run` and `render`).
#[derive(Debug, Args)]
pub struct CueArgs {
    /// The `cue` binary (pinned version).
    #[arg(long, env = "OPM_CUE_BIN", default_value_os_t = default_cue_binary())]
    pub cue_binary: PathBuf,
    /// Registry for CUE modules, as `CUE_REGISTRY` (e.g. `127.0.0.1:5000+insecure`).
    #[arg(long, env = "CUE_REGISTRY")]
    pub cue_registry: Option<String>,
    /// Deadline of one `cue` run.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub render_timeout: Duration,
}

#[derive(Debug, Args)]
/// Flags of `opm-operator render`.
pub struct RenderArgs {
    /// A release package directory (holding `release.cue`).
    #[arg(required_unless_present = "module", conflicts_with = "module")]
    pub dir: Option<PathBuf>,
    /// A module to render as a ModuleRelease: `path@version`
    /// (e.g. `example.com/modules/web@v0.2.1`).
    #[arg(long)]
    pub module: Option<String>,
    /// Values for the module (YAML or JSON), unified with its `#config`.
    #[arg(long, requires = "module", conflicts_with = "dir")]
    pub values: Option<PathBuf>,
    /// Values files merged in order before `--values`, as `valuesFrom` is:
    /// `FILE` (a YAML/JSON mapping, merged at the root) or `TARGET.PATH=FILE` (the file's
    /// text as one string at that dot path). Repeatable.
    #[arg(
        long = "values-from-file",
        value_name = "[PATH=]FILE",
        requires = "module",
        conflicts_with = "dir"
    )]
    pub values_from_file: Vec<crate::cue::local_values::FileRef>,
    /// Release name handed to the module.
    #[arg(long, default_value = "release", conflicts_with = "dir")]
    pub name: String,
    /// Release namespace handed to the module.
    #[arg(long, default_value = "default", conflicts_with = "dir")]
    pub namespace: String,
    /// A Platform manifest (YAML or JSON, kind Platform): the catalogs an OPM module or
    /// instance is rendered with. Needed for OPM modules and `instance.cue`
    /// packages; plain modules and packages ignore it.
    #[arg(long, value_name = "FILE")]
    pub platform: Option<PathBuf>,
    /// Directory for caches (`cue`'s module cache goes to `<dir>/cue`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    /// The `cue` binary and its limits, as `run` takes them.
    pub cue: CueArgs,
}

/// Reads a Platform manifest (YAML or JSON).
pub fn read_platform(file: &std::path::Path) -> anyhow::Result<Platform> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?;
    let p: Platform = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a Platform manifest: {e}", file.display()))?;
    if p.spec
        .registry
        .values()
        .any(|c| c.filter.is_some() || c.version.is_empty())
    {
        bail!(
            "{}: every catalog needs an exact version (filter is no longer supported)",
            file.display()
        );
    }
    Ok(p)
}

/// The agreed tool location (`tools/install`), else `cue` on `PATH`.
pub fn default_cue_binary() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    cache
        .map(|c| c.join("opm-operator/tools/cue-v0.17.1/bin/cue"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("cue"))
}

/// `90s`, `5m`, `1h30m`, `250ms` or plain seconds; more than zero, at most 24h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::commands::flags::positive_duration(s)
}

/// Renders as the arguments say and returns the multi-document YAML `render` prints:
/// each object preceded by a `# component: C, key: K` comment.
pub async fn render(args: &RenderArgs) -> anyhow::Result<String> {
    let mut config = RenderConfig::new(&args.cue.cue_binary);
    config.registry = args.cue.cue_registry.clone();
    config.timeout = if args.cue.render_timeout.is_zero() {
        DEFAULT_RENDER_TIMEOUT
    } else {
        args.cue.render_timeout
    };
    config.cue_cache_dir = args.cache_dir.as_ref().map(|d| d.join("cue"));
    let renderer = Renderer::new(config);
    let opm = Opm::default();
    let has_platform = match &args.platform {
        Some(file) => {
            opm.fix_platform(read_platform(file)?);
            true
        }
        None => false,
    };
    let need_platform = || {
        anyhow::anyhow!(
            "an OPM module or instance renders through a Platform: give --platform FILE (a Platform manifest)"
        )
    };
    let rendered = match (&args.dir, &args.module) {
        (Some(dir), None) if dir.join(opm_core::opm::INSTANCE_FILE).is_file() => {
            if !has_platform {
                return Err(need_platform());
            }
            let key = format!("local:{}", dir.display());
            let dir = std::fs::canonicalize(dir)?;
            opm.render_instance(&renderer, &key, ".", std::path::Path::new("/"), &dir)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .0
        }
        (Some(dir), None) => std::sync::Arc::new(renderer.render_package(dir).await?),
        (None, Some(module)) => {
            let module = ModuleRef::parse(module)?;
            let values =
                crate::cue::local_values::merged(&args.values_from_file, args.values.as_deref())
                    .map_err(anyhow::Error::msg)?;
            let identity = ReleaseIdentity {
                name: args.name.clone(),
                namespace: args.namespace.clone(),
            };
            let facts = opm.facts(&renderer, &module, None).await?;
            match facts.flavour {
                Flavour::Plain => {
                    std::sync::Arc::new(renderer.render_module(&module, &values, &identity).await?)
                }
                Flavour::CoreV0 => bail!(
                    "{}",
                    opm_core::opm::core_v0_message(&format!(
                        "module {}@{}",
                        module.path, module.version
                    ))
                ),
                Flavour::Opm if !has_platform => return Err(need_platform()),
                Flavour::Opm => {
                    opm.render_module(&renderer, &module, &facts, &values, &identity, None)
                        .await
                        .map_err(|e| anyhow::anyhow!("{e}"))?
                        .0
                }
            }
        }
        _ => bail!("give either a release package directory or --module"),
    };
    let mut out = String::new();
    for (component, key, object) in rendered.objects() {
        if !out.is_empty() {
            out.push_str("---\n");
        }
        out.push_str(&format!("# component: {component}, key: {key}\n"));
        out.push_str(&serde_saphyr::to_string(object)?);
    }
    Ok(out)
}
