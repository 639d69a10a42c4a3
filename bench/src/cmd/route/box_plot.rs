//! `fleet-lab route box-plot`: the router's small box by population. Reads
//! the directories `ci/small-box.sh` wrote (one run each, at one
//! population: its `report.json` from the load generator and `group.txt`
//! with the cgroup's own figures), prints one row per run and writes the
//! plot of leases/s, lease p99 and the group's anonymous memory peak
//! against the devices registered (docs/router.md, "The small box";
//! `ci/small-box-sweep.sh` runs the populations and this).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::report::{box_population_svg, BoxRun};

/// Arguments of `fleet-lab route box-plot`.
#[derive(Debug, Clone, Args)]
pub struct BoxPlotArgs {
    /// The SVG file to write.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "fleet-lab-out/small-box-population.svg"
    )]
    pub out: PathBuf,
    /// The runs' directories, as `ci/small-box.sh --out DIR` wrote them
    /// (one or more).
    #[arg(value_name = "DIR", required = true)]
    pub runs: Vec<PathBuf>,
}

/// `group.txt` as keys and values (`key value` lines).
fn read_group(dir: &Path) -> Result<BTreeMap<String, String>> {
    let path = dir.join("group.txt");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (is {} a run of ci/small-box.sh?)",
            path.display(),
            dir.display()
        )
    })?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect())
}

/// A whole number of `group.txt`'s `key`.
fn group_number(g: &BTreeMap<String, String>, key: &str, path: &Path) -> Result<u64> {
    g.get(key).and_then(|v| v.parse().ok()).with_context(|| {
        format!(
            "{}: no whole number for {key}",
            path.join("group.txt").display()
        )
    })
}

/// One run from its directory. Where the load did not finish (routerd
/// killed: `report.json` empty or not a report), the run has its memory
/// figures and no rate or latency; its population then comes from
/// `devices` (the sweep writes it beside the run).
///
/// Errors: `group.txt` missing or without its figures; no population.
pub fn read_run(dir: &Path) -> Result<BoxRun> {
    let g = read_group(dir)?;
    let report: Option<serde_json::Value> = std::fs::read(dir.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|v: &serde_json::Value| v.get("leases_per_s").is_some());
    let devices = match report.as_ref().and_then(|r| r["devices"].as_u64()) {
        Some(d) => d,
        None => std::fs::read_to_string(dir.join("devices"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .with_context(|| {
                format!(
                    "{}: the load did not finish and no `devices` file says its population",
                    dir.display()
                )
            })?,
    };
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    Ok(BoxRun {
        devices,
        leases_per_s: report.as_ref().and_then(|r| r["leases_per_s"].as_f64()),
        lease_p99_ms: report
            .as_ref()
            .and_then(|r| r["lease_us"][2].as_f64())
            .map(|us| us / 1e3),
        anon_peak_mib: mib(group_number(&g, "anon_peak_bytes_sampled", dir)?),
        limit_mib: mib(group_number(&g, "memory_limit_bytes", dir)?),
        oom_kills: group_number(&g, "oom_kills", dir)?,
    })
}

/// `fleet-lab route box-plot`.
pub fn box_plot(a: BoxPlotArgs) -> Result<()> {
    let mut runs = a
        .runs
        .iter()
        .map(|d| read_run(d))
        .collect::<Result<Vec<_>>>()?;
    runs.sort_by_key(|r| r.devices);
    if runs.windows(2).any(|w| w[0].devices == w[1].devices) {
        bail!("two runs at the same population: give one directory per population");
    }
    println!("devices    leases/s   lease p99 ms   anon peak MiB   OOM kills");
    for r in &runs {
        let or_dash = |v: Option<f64>, digits: usize| {
            v.filter(|_| r.survived())
                .map_or("-".to_string(), |v| format!("{v:.digits$}"))
        };
        println!(
            "{:>7}  {:>10}   {:>12}   {:>13.1}   {:>9}",
            r.devices,
            or_dash(r.leases_per_s, 0),
            or_dash(r.lease_p99_ms, 2),
            r.anon_peak_mib,
            r.oom_kills
        );
    }
    let svg = box_population_svg(&runs)?;
    if let Some(parent) = a.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&a.out, svg).with_context(|| format!("cannot write {}", a.out.display()))?;
    println!("plot: {}", a.out.display());
    Ok(())
}
