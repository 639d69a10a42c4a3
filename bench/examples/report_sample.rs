//! Writes sample report directories from synthetic runs, to look at the
//! page without replaying the corpus:
//!
//! `cargo run -p fleet-bench --example report_sample -- OUT_DIR`
//! writes `OUT_DIR/run/` (one run, with its interval logs) and
//! `OUT_DIR/compare/` (the fleet against the pile of pools). The figures are
//! made up.

use std::path::PathBuf;

use fleet_bench::report::sample::{sample_run_with_logs, SampleShape};
use fleet_bench::report::{
    read_log_histogram, write_compare_dir, write_report_dir, CompareReport, HdrLog, Metric,
};

fn sim_histogram(logs: &[HdrLog]) -> anyhow::Result<Option<hdrhistogram::Histogram<u64>>> {
    let log = logs
        .iter()
        .find(|l| l.file_name == Metric::SimLatency.file_name());
    Ok(log.map(|l| read_log_histogram(&l.bytes)).transpose()?)
}

fn main() -> anyhow::Result<()> {
    let out: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("usage: report_sample OUT_DIR"))?;
    let (fleet, fleet_logs) = sample_run_with_logs("fleet auto", SampleShape::FLEET, 333, 1.0, 7);
    let (pile, pile_logs) = sample_run_with_logs("pile of pools", SampleShape::PILE, 333, 1.0, 11);
    write_report_dir(&out.join("run"), &fleet, &fleet_logs, b"")?;
    let sims = vec![sim_histogram(&fleet_logs)?, sim_histogram(&pile_logs)?];
    write_compare_dir(
        &out.join("compare"),
        &CompareReport {
            runs: vec![fleet, pile],
            rounds: Vec::new(),
            host: None,
            host_floor: Vec::new(),
        },
        &sims,
    )?;
    println!("wrote {}/run and {}/compare", out.display(), out.display());
    Ok(())
}
