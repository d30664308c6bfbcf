//! `kubectl opm`: the day-2 CLI for opm-operator releases, a kubectl plugin.
//!
//! It reuses the operator rather than re-implementing it: the core (`opm-core`) judges
//! health, compares fields, builds objects from a render and decides ownership; the
//! operator crate (`opm-operator`) renders with `cue`, fetches artifacts, reads
//! `valuesFrom`, classifies API errors and offers `render`. What is left here is the
//! command line, the requests a user makes, and the wording.
//!
//! Exit codes: 0 success (for `diff`: no change), 1 a failure the verb reports (`diff`:
//! changes; `reconcile --wait`: the attempt failed, stalled or timed out), 2 an error of
//! the command (bad arguments, a refused or failed request, a render that failed).

mod connect;
mod control;
mod diff;
mod dispatch;
mod error;
mod events;
mod get;
mod output;
mod releases;
mod report;
mod target;
mod tree;
mod why;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use opm_operator::commands::render_cmd::{CueArgs, RenderArgs};

use connect::Conn;
use error::Verdict;
use output::Out;

const EXAMPLES: &str = "\
Examples:
  kubectl opm get -A                         every release in every namespace
  kubectl opm get mr/web -o yaml             one ModuleRelease as YAML
  kubectl opm why rel/hello                   why a release is not Ready, in words
  kubectl opm tree mr/web                    its objects by component, with live health
  kubectl opm events mr/web                  the operator's events about it
  kubectl opm reconcile mr/web --wait        reconcile now and wait for the outcome
  kubectl opm reconcile rel/hello --with-source --wait
  kubectl opm suspend mr/web; kubectl opm resume mr/web
  kubectl opm diff mr/web --values new.yaml  what a values change would do (exit 1 if any)
  kubectl opm diff mr/web --version v0.3.0 --as-release -o json
  kubectl opm diff rel/hello --path ./release (a local checkout of the release package)
  kubectl opm render --module example.com/modules/web@v0.2.1 --values values.yaml
  source <(kubectl opm completion bash)

KIND is mr (ModuleRelease) or rel (Release), or the kind's name.
Exit codes: 0 success or no change; 1 changes (diff) or a failed/stalled reconcile; 2 error.";

#[derive(Debug, Parser)]
#[command(
    name = "kubectl-opm",
    bin_name = "kubectl opm",
    version,
    about = "Day-2 operations on opm-operator releases (ModuleRelease, Release)",
    after_help = EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `KIND/NAME` or `KIND NAME`.
#[derive(Debug, Args)]
struct One {
    /// The release: KIND/NAME (e.g. mr/web) or KIND NAME.
    #[arg(value_name = "KIND/NAME", num_args = 1..=2, required = true)]
    target: Vec<String>,
    #[command(flatten)]
    conn: Conn,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List releases, or show one: READY, REASON, REVISION, AGE, NEXT RETRY.
    #[command(
        after_help = "Examples:\n  kubectl opm get\n  kubectl opm get mr -A\n  kubectl opm get rel/hello -o wide"
    )]
    Get {
        /// [KIND[/NAME]]: both kinds when omitted.
        #[arg(value_name = "KIND[/NAME]", num_args = 0..=2)]
        target: Vec<String>,
        /// After the table, print a row each time a release changes (until interrupted).
        #[arg(short = 'w', long)]
        watch: bool,
        #[command(flatten)]
        conn: Conn,
        #[command(flatten)]
        out: Out,
    },
    /// The release's objects grouped by component, each with its live health.
    Tree {
        #[command(flatten)]
        one: One,
        #[command(flatten)]
        out: Out,
    },
    /// The operator's events about the release, oldest first.
    Events {
        #[command(flatten)]
        one: One,
        #[command(flatten)]
        out: Out,
    },
    /// Why the release is in its state: conditions, last failures, next retry, triggers.
    Why {
        #[command(flatten)]
        one: One,
        #[command(flatten)]
        out: Out,
    },
    /// Ask for an attempt now (the reconcile.opmodel.dev/requestedAt annotation).
    #[command(
        after_help = "Exit 1 with --wait when the attempt fails, stalls or does not finish in --timeout."
    )]
    Reconcile {
        #[command(flatten)]
        one: One,
        /// Wait until the operator handled the request, and print the outcome.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, value_parser = opm_operator::commands::render_cmd::parse_duration, default_value = "5m")]
        timeout: Duration,
        /// First ask the Release's Flux source to fetch (reconcile.fluxcd.io/requestedAt).
        #[arg(long)]
        with_source: bool,
    },
    /// Stop reconciling the release (spec.suspend: true).
    Suspend {
        #[command(flatten)]
        one: One,
    },
    /// Reconcile the release again (spec.suspend: false).
    Resume {
        #[command(flatten)]
        one: One,
    },
    /// What a change would do, by a server-side dry-run of every object (exit 0 no change,
    /// 1 changes, 2 error).
    #[command(
        after_help = "Examples:\n  kubectl opm diff mr/web --values new-values.yaml\n  kubectl opm diff mr/web --version v0.3.0 --as-release\n  kubectl opm diff rel/hello --path ./checkout/releases/shop -o json"
    )]
    Diff {
        #[command(flatten)]
        one: One,
        /// Values (YAML or JSON) replacing spec.values of a ModuleRelease.
        #[arg(long, value_name = "FILE")]
        values: Option<PathBuf>,
        /// A module version replacing spec.module.version of a ModuleRelease.
        #[arg(long, value_name = "V")]
        version: Option<String>,
        /// A local release package (holding release.cue) rendered instead of the release's
        /// source.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["values", "version"])]
        path: Option<PathBuf>,
        /// Run the dry-run as the release's ServiceAccount, as the operator does.
        #[arg(long)]
        as_release: bool,
        /// With --as-release: the ServiceAccount when the release names none (the
        /// operator's --default-service-account).
        #[arg(long, value_name = "NAME", requires = "as_release")]
        service_account: Option<String>,
        /// Directory for caches (cue's module cache, downloaded artifacts).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// A Platform manifest to render OPM modules and instances with, instead of the
        /// cluster's Platform.
        #[arg(long, value_name = "FILE")]
        platform: Option<PathBuf>,
        #[command(flatten)]
        cue: CueArgs,
        #[command(flatten)]
        out: Out,
    },
    /// Print what a release would apply (as `opm-operator render`). OPM modules and
    /// instances render through --platform FILE, else the cluster's Platform `cluster`
    /// (read with --kubeconfig/--context when it can be; nothing else is read).
    Render {
        #[command(flatten)]
        args: Box<RenderArgs>,
        /// Path to the kubeconfig file the cluster's Platform is read with (default:
        /// $KUBECONFIG, then ~/.kube/config).
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// The kubeconfig context to read the cluster's Platform in.
        #[arg(long, value_name = "NAME")]
        context: Option<String>,
    },
    /// Print a shell completion script.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KUBECTL_OPM_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(dispatch::run(cli.command)) {
        Ok((text, verdict)) => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(output::for_terminal(&text).as_bytes());
            let _ = stdout.flush();
            match verdict {
                Verdict::Ok => ExitCode::SUCCESS,
                Verdict::Failed => ExitCode::from(1),
            }
        }
        Err(e) => {
            eprintln!("error: {}", output::for_terminal(&e.to_string()));
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Format;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn connection_flags_as_kubectl_spells_them() {
        let cli = Cli::try_parse_from([
            "kubectl-opm",
            "get",
            "mr",
            "-n",
            "demo",
            "--context",
            "c",
            "--kubeconfig",
            "/k",
            "-o",
            "wide",
        ])
        .unwrap();
        let Command::Get {
            target, conn, out, ..
        } = cli.command
        else {
            panic!()
        };
        assert_eq!(target, vec!["mr"]);
        assert_eq!(conn.namespace.as_deref(), Some("demo"));
        assert_eq!(conn.context.as_deref(), Some("c"));
        assert_eq!(out.format, Format::Wide);
        assert!(Cli::try_parse_from(["kubectl-opm", "get", "-o", "xml"]).is_err());
        assert!(
            Cli::try_parse_from([
                "kubectl-opm",
                "diff",
                "mr/x",
                "--path",
                "d",
                "--values",
                "v"
            ])
            .is_err()
        );
    }
}
