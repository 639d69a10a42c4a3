//! `fleet-lab`: the lab's command line. One subcommand per verb; each verb
//! lives in `fleet_bench::cmd::<verb>`. Errors print as one plain message
//! (with its causes) on stderr and exit with status 2.

use clap::{Parser, Subcommand};
use fleet_bench::cmd;
use std::process::ExitCode;

/// The fleet lab.
#[derive(Debug, Parser)]
#[command(
    name = "fleet-lab",
    version,
    about = "The fleet lab: plan, replay, compare and gate the worker fleet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay the corpus through the fleet and write a report (the main job).
    Run(cmd::run::RunArgs),
    /// Check both bindings against the golden corpus (non-zero exit on the first difference).
    Parity(cmd::parity::ParityArgs),
    /// Print the detected quota, the plan, the budget table and the census projection.
    Plan(cmd::plan::PlanArgs),
    /// Generate, verify or derive the golden outcome corpus.
    Corpus(cmd::corpus::CorpusArgs),
    /// Render earlier runs' reports side by side.
    Report(cmd::report::Args),
    /// Read or retune the posture policy of a live run (its operator channel).
    Posture(cmd::posture::PostureArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(args),
        Command::Parity(args) => cmd::parity::run(args),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Corpus(args) => cmd::corpus::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Posture(args) => cmd::posture::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet-lab: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
