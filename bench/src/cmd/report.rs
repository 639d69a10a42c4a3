//! `fleet-lab report A.json [B.json ...] [--out DIR]`: renders earlier runs
//! side by side (issue 7): prints the summary (or the compare table) and
//! writes `DIR/report.html` and `DIR/compare.json` atomically.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::report::{
    load_runs, load_sim_latency, render_compare_table, render_run_summary, render_verdict,
    write_compare_dir, REPORT_HTML,
};

/// Arguments of `fleet-lab report`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// `report.json` files written by earlier runs, rendered in this order.
    #[arg(required = true, value_name = "REPORT_JSON")]
    pub reports: Vec<PathBuf>,
    /// Directory to write `report.html` and `compare.json` into; replaced
    /// whole, atomically.
    #[arg(long, value_name = "DIR", default_value = "fleet-lab-report")]
    pub out: PathBuf,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
}

/// Runs the verb.
///
/// Errors: a report that cannot be read or parsed (named, with line and
/// column), or the output directory that cannot be written.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::report::check_out_dir(&args.out, args.force)?;
    let compare = load_runs(&args.reports).context("loading the run reports")?;
    match compare.runs.as_slice() {
        [one] => print!("{}", render_run_summary(one)),
        runs => print!("{}{}", render_compare_table(runs), render_verdict(runs)),
    }
    let sim_latency = args
        .reports
        .iter()
        .map(|p| load_sim_latency(p))
        .collect::<Result<Vec<_>, _>>()
        .context("loading the sim-latency logs beside the reports")?;
    write_compare_dir(&args.out, &compare, &sim_latency)
        .with_context(|| format!("writing the report to {}", args.out.display()))?;
    println!("\nwrote {}", args.out.join(REPORT_HTML).display());
    Ok(())
}
