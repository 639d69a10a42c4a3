//! `fleet-lab spin`: keep N threads busy until stdin closes (the separate
//! process `--contend N` starts; also handy to load a host by hand), or,
//! with `--wake-us`, keep them waking at a low duty (the process
//! `compare --host-awake` starts).

use anyhow::{Context, Result};
use clap::Args;

use crate::lab::contend::MAX_CONTEND_THREADS;

/// Arguments of `fleet-lab spin`.
#[derive(Debug, Clone, Args)]
pub struct SpinArgs {
    /// Busy threads, 1..=256.
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = clap::value_parser!(u32).range(1..=MAX_CONTEND_THREADS as i64))]
    pub threads: u32,
    /// Instead of spinning, each thread sleeps this many µs and wakes,
    /// again and again (1..=1000000): the CPUs stay out of their deep idle
    /// states at a duty of a few percent.
    #[arg(long, value_name = "US", allow_hyphen_values = true, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub wake_us: Option<u64>,
    /// The threads' scheduling class: normal, nice19 or idle.
    #[arg(long, value_enum, default_value = "normal")]
    pub class: crate::lab::contend::ContendClass,
}

/// `fleet-lab spin`.
pub fn run(args: SpinArgs) -> Result<()> {
    args.class
        .apply()
        .with_context(|| format!("spin: could not enter the {} class", args.class.as_str()))?;
    match args.wake_us {
        Some(us) => crate::lab::contend::wake(args.threads, std::time::Duration::from_micros(us))?,
        None => crate::lab::contend::spin(args.threads)?,
    }
    Ok(())
}
