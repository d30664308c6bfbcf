//! `opm-sim`: run the reconcile core against a simulated cluster on a virtual clock, or
//! replay traces the operator recorded (SPEC §23).
//!
//! Exit codes: 0 success; 1 a replayed trace differs; 2 bad input (unreadable or invalid
//! scenario or trace, usage errors); 3 the simulated world broke a rule.

mod replay;
mod report;
mod run;
mod svg;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A simulated day allocates and frees a few hundred small values per attempt (statuses,
/// rendered manifests, field maps), millions of times over. In `perf` profiles of a
/// 2 000-release run glibc's malloc and free were ~30 % of the time; mimalloc's share of
/// a 4 000-release run is ~12 % (examples/sim/README.md, "Timing").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "opm-sim",
    version,
    about = "Simulate and replay opm-operator reconciles"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario (YAML or JSON) and print its timeline and final statuses.
    Run {
        scenario: PathBuf,
        /// Machine-readable output (one JSON document) instead of text.
        #[arg(long)]
        json: bool,
        /// Also draw the timeline as an SVG picture into this file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Overrides the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Only the final statuses, not one line per attempt (large fleets).
        #[arg(long)]
        summary: bool,
        /// Also write every attempt's trace into this directory (replayable).
        #[arg(long, value_name = "DIR")]
        trace_dir: Option<PathBuf>,
        /// Run every attempt through the core. By default a NoOp whose inputs are all
        /// unchanged since the release's last attempt is answered from that attempt;
        /// the output is the same either way, this is only slower.
        #[arg(long)]
        every_attempt: bool,
    },
    /// Replay trace files (or directories of them) through the core; exit 1 naming the
    /// first difference.
    Replay {
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// Print each attempt step by step: input, then the effects the core produced.
        #[arg(long)]
        explain: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            scenario,
            json,
            svg,
            seed,
            quiet,
            summary,
            trace_dir,
            every_attempt,
        } => {
            let opts = run::RunOpts {
                scenario,
                json,
                svg,
                seed,
                quiet,
                summary,
                trace_dir,
                every_attempt,
            };
            match run::run(&opts) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("opm-sim: {e}");
                    ExitCode::from(e.exit_code())
                }
            }
        }
        Command::Replay { traces, explain } => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let result = replay::replay_paths(&traces, explain, &mut out);
            let _ = out.flush();
            match result {
                Ok(stats) => {
                    eprintln!(
                        "opm-sim: {} attempts in {} files replayed identically",
                        stats.attempts, stats.files
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("opm-sim: {e}");
                    ExitCode::from(e.exit_code())
                }
            }
        }
    }
}
