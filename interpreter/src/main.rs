//! `opm-operator`: the operator process and its offline tools.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, Parser, Subcommand};
use opm_operator::module_ref::{ModuleRef, ReleaseIdentity};
use opm_operator::render::{DEFAULT_RENDER_TIMEOUT, RenderConfig, Renderer};
use opm_operator::run::RunArgs;

#[derive(Debug, Parser)]
#[command(
    name = "opm-operator",
    version,
    about = "Keeps clusters in sync with CUE-defined releases"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator against the cluster of the current kubeconfig or service account.
    Run(Box<RunArgs>),
    /// Print what a release would apply, as multi-document YAML, without a cluster.
    Render(Box<RenderArgs>),
    /// Print the CustomResourceDefinitions of ModuleRelease and Release.
    Crds,
}

/// How `cue` is run (shared by `run` and `render`).
#[derive(Debug, Args)]
struct CueArgs {
    /// The `cue` binary (pinned version).
    #[arg(long, env = "OPM_CUE_BIN", default_value_os_t = default_cue_binary())]
    cue_binary: PathBuf,
    /// Registry for CUE modules, as `CUE_REGISTRY` (e.g. `127.0.0.1:5000+insecure`).
    #[arg(long, env = "CUE_REGISTRY")]
    cue_registry: Option<String>,
    /// Deadline of one `cue` run.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    render_timeout: Duration,
}

#[derive(Debug, Args)]
struct RenderArgs {
    /// A release package directory (holding `release.cue`).
    #[arg(required_unless_present = "module", conflicts_with = "module")]
    dir: Option<PathBuf>,
    /// A module to render as a ModuleRelease: `path@version`
    /// (e.g. `example.com/modules/web@v0.2.1`).
    #[arg(long)]
    module: Option<String>,
    /// Values for the module (YAML or JSON), unified with its `#config`.
    #[arg(long, requires = "module", conflicts_with = "dir")]
    values: Option<PathBuf>,
    /// Values files merged in order before `--values`, as `valuesFrom` is (SPEC §27):
    /// `FILE` (a YAML/JSON mapping, merged at the root) or `TARGET.PATH=FILE` (the file's
    /// text as one string at that dot path). Repeatable.
    #[arg(
        long = "values-from-file",
        value_name = "[PATH=]FILE",
        requires = "module",
        conflicts_with = "dir"
    )]
    values_from_file: Vec<opm_operator::local_values::FileRef>,
    /// Release name handed to the module.
    #[arg(long, default_value = "release", conflicts_with = "dir")]
    name: String,
    /// Release namespace handed to the module.
    #[arg(long, default_value = "default", conflicts_with = "dir")]
    namespace: String,
    /// Directory for caches (`cue`'s module cache goes to `<dir>/cue`).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    cue: CueArgs,
}

/// The agreed tool location (`tools/install`), else `cue` on `PATH`.
fn default_cue_binary() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    cache
        .map(|c| c.join("opm-operator/tools/cue-v0.17.1/bin/cue"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("cue"))
}

/// `90s`, `5m`, `1h30m`, `250ms` or plain seconds; more than zero, at most 24h.
fn parse_duration(s: &str) -> Result<Duration, String> {
    opm_operator::flags::positive_duration(s)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render(args) => {
            init_render_logging();
            render(*args).await
        }
        // `run` installs its own subscriber (`--log-format`), and exits without waiting for
        // detached tasks (watches, endpoints) once the controllers have stopped.
        Command::Run(args) => match opm_operator::run::run(*args).await {
            Ok(()) => std::process::exit(0),
            Err(e) => Err(e),
        },
        Command::Crds => opm_operator::crds::yaml()
            .map(|y| print!("{y}"))
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn init_render_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}

async fn render(args: RenderArgs) -> anyhow::Result<()> {
    let mut config = RenderConfig::new(&args.cue.cue_binary);
    config.registry = args.cue.cue_registry.clone();
    config.timeout = if args.cue.render_timeout.is_zero() {
        DEFAULT_RENDER_TIMEOUT
    } else {
        args.cue.render_timeout
    };
    config.cue_cache_dir = args.cache_dir.as_ref().map(|d| d.join("cue"));
    let renderer = Renderer::new(config);
    let rendered = match (&args.dir, &args.module) {
        (Some(dir), None) => renderer.render_package(dir).await?,
        (None, Some(module)) => {
            let module = ModuleRef::parse(module)?;
            let values =
                opm_operator::local_values::merged(&args.values_from_file, args.values.as_deref())
                    .map_err(anyhow::Error::msg)?;
            let identity = ReleaseIdentity {
                name: args.name.clone(),
                namespace: args.namespace.clone(),
            };
            renderer.render_module(&module, &values, &identity).await?
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
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn render_needs_a_dir_or_a_module_but_not_both() {
        assert!(Cli::try_parse_from(["opm-operator", "render"]).is_err());
        assert!(
            Cli::try_parse_from(["opm-operator", "render", "d", "--module", "a@v0.1.0"]).is_err()
        );
        assert!(
            Cli::try_parse_from(["opm-operator", "render", "d", "--values", "v.yaml"]).is_err()
        );
        let cli = Cli::try_parse_from([
            "opm-operator",
            "render",
            "--module",
            "a.example/m@v0.1.0",
            "--values",
            "v.yaml",
            "--cue-registry",
            "127.0.0.1:1+insecure",
            "--cue-binary",
            "/bin/cue",
        ])
        .unwrap();
        let Command::Render(args) = cli.command else {
            panic!()
        };
        assert_eq!(
            args.cue.cue_registry.as_deref(),
            Some("127.0.0.1:1+insecure")
        );
        assert_eq!(args.cue.cue_binary, PathBuf::from("/bin/cue"));
    }
}
