//! The `opm-operator` command: `run` (the operator), `crds` (print the CRDs).

use clap::{Parser, Subcommand};
use opm_operator::run::RunArgs;

#[derive(Parser)]
#[command(
    name = "opm-operator",
    version,
    about = "Reconciles OPM releases of CUE modules"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator against the cluster in KUBECONFIG (or in-cluster config).
    Run(Box<RunArgs>),
    /// Print both CustomResourceDefinitions as YAML.
    Crds,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => {
            tokio::runtime::Runtime::new()?.block_on(opm_operator::run::run(*args))
        }
        Command::Crds => {
            print!("{}", opm_operator::crds::yaml()?);
            Ok(())
        }
    }
}
