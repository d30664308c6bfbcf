//! `opm-operator`: the operator process and its offline tools.

use clap::{Parser, Subcommand};
use opm_operator::commands::render_cmd::RenderArgs;
use opm_operator::commands::run::RunArgs;

/// jemalloc, not glibc's malloc: the operator's heap is mostly release objects that the
/// watch replaces wholesale on every status write, allocated and freed on different
/// runtime threads. Under glibc that left freed memory held across its per-thread arenas
/// (10 000 releases: 142 MiB after the converge, 156 MiB after every release ran again);
/// jemalloc returns it (bench/README.md, "Memory per release").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Print the CustomResourceDefinitions of ModuleRelease, Release and Platform.
    Crds,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Render(args) => {
            init_render_logging();
            opm_operator::commands::render_cmd::render(&args)
                .await
                .map(|out| print!("{out}"))
        }
        // `run` installs its own subscriber (`--log-format`), and exits without waiting for
        // detached tasks (watches, endpoints) once the controllers have stopped.
        Command::Run(args) => match opm_operator::commands::run::run(*args).await {
            Ok(()) => std::process::exit(0),
            Err(e) => Err(e),
        },
        Command::Crds => opm_operator::commands::crds::yaml()
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

#[cfg(test)]
mod tests {
    use super::*;
    use opm_operator::commands::render_cmd::parse_duration;
    use std::path::PathBuf;
    use std::time::Duration;

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
