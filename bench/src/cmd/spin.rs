//! `fleet-lab spin`: keep N threads busy until stdin closes (the separate
//! process `--contend N` starts; also handy to load a host by hand).

use anyhow::Result;
use clap::Args;

use crate::lab::contend::MAX_CONTEND_THREADS;

/// Arguments of `fleet-lab spin`.
#[derive(Debug, Clone, Args)]
pub struct SpinArgs {
    /// Busy threads, 1..=256.
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = clap::value_parser!(u32).range(1..=MAX_CONTEND_THREADS as i64))]
    pub threads: u32,
}

/// `fleet-lab spin`.
pub fn run(args: SpinArgs) -> Result<()> {
    crate::lab::contend::spin(args.threads)?;
    Ok(())
}
