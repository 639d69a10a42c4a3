//! `fleet-lab route …`: the routing lab (`ROUTING.md` §5).
//!
//! - `route sim`: one scenario, every contender on the same world and seed;
//!   writes `report.json` and `report.html` and prints the table.
//! - `route compare`: every scenario, one table; one page per scenario.
//! - both with `--seeds LIST`: every seed, figures as median (min–max)
//!   ([`seeds`]).
//! - `route load`: starts `routerd` on loopback and drives it over HTTP
//!   with `router::load`; prints leases/s and latency percentiles.
//! - `route box-plot`: the small box's runs by population ([`box_plot`]).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use route_lab::plan::WorldPlan;
use route_lab::render::{render_compare, render_html, render_table};
use route_lab::{
    control_runs, simulate_over, Contender, Scenario, ServiceSpec, SimReport, SimSpec, Transport,
};

use crate::cmd::bounds::BoundError;

pub mod box_plot;
mod load;
pub use load::LoadArgs;
pub mod seeds;

/// The seeds of `--seeds` ([`seeds::parse_seeds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeds(pub Vec<u64>);
use crate::report::{check_out_dir, write_dir_atomically, REPORT_HTML, REPORT_JSON};

/// Writes `report.json` and `report.html` of `r` into `dir` (atomically).
fn write_report(dir: &std::path::Path, r: &SimReport) -> Result<()> {
    let json = serde_json::to_vec_pretty(r).context("cannot serialize the report")?;
    let html = render_html(r)?;
    write_dir_atomically(dir, &[(REPORT_JSON, &json), (REPORT_HTML, html.as_bytes())])?;
    Ok(())
}

/// Arguments of `fleet-lab route`.
#[derive(Debug, Clone, Args)]
pub struct RouteArgs {
    #[command(subcommand)]
    pub verb: RouteVerb,
}

/// The routing lab's verbs.
#[derive(Debug, Clone, Subcommand)]
pub enum RouteVerb {
    /// Simulate one scenario with every contender; write report.json and report.html.
    Sim(SimArgs),
    /// Simulate every scenario and print one table (one page per scenario).
    Compare(CompareArgs),
    /// Start routerd on loopback and drive it over HTTP; print leases/s and latency.
    Load(LoadArgs),
    /// Plot runs of ci/small-box.sh by population (leases/s, lease p99, memory).
    BoxPlot(box_plot::BoxPlotArgs),
}

/// The world's size and luck, shared by `sim` and `compare`.
#[derive(Debug, Clone, Args)]
pub struct WorldArgs {
    /// Devices in the simulated population (1..=100000).
    #[arg(long, value_name = "N", default_value_t = 150, allow_hyphen_values = true, value_parser = parse_devices)]
    pub devices: usize,
    /// Simulated hours (> 0, at most 168).
    #[arg(long, value_name = "H", default_value_t = 6.0, allow_hyphen_values = true, value_parser = parse_hours)]
    pub hours: f64,
    /// Seed of the world and of every draw.
    #[arg(long, value_name = "K", default_value_t = 42, allow_hyphen_values = true, value_parser = parse_seed)]
    pub seed: u64,
    /// Run at each of these seeds instead of one: seeds and inclusive
    /// ranges, comma-separated (e.g. 1-5,9; at most 1000). The tables give
    /// each figure's median (min–max) and the router's paired record.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true, conflicts_with = "seed", value_parser = |s: &str| seeds::parse_seeds(s).map(Seeds))]
    pub seeds: Option<Seeds>,
    /// Router tick period, simulated seconds (1..=600).
    #[arg(long, value_name = "S", default_value_t = 30.0, allow_hyphen_values = true, value_parser = parse_tick)]
    pub tick_s: f64,
    /// Contenders, comma-separated (default all: router, round-robin, greedy, flat-thompson, fixed-quorum, contextual-ts).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_contender)]
    pub contenders: Vec<Contender>,
    /// Show no progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Run the router as the service: a routerd per run on loopback, driven
    /// over HTTP in lockstep on its manual clock (only the router runs;
    /// docs/routing-lab.md, "The service end to end").
    #[arg(long)]
    pub http: bool,
    /// With --http: routerd's store, a postgres:// URL (a fresh schema per
    /// run; default SQLite in a fresh temporary directory).
    #[arg(long, value_name = "URL", requires = "http")]
    pub store: Option<String>,
    /// With --http: the routerd binary (default: next to fleet-lab, as
    /// `cargo build --release -p router` puts it).
    #[arg(long, value_name = "PATH", requires = "http")]
    pub routerd: Option<PathBuf>,
}

impl WorldArgs {
    pub(crate) fn spec(&self, scenario: Scenario) -> SimSpec {
        let mut s = SimSpec::new(scenario, self.devices, self.hours, self.seed);
        s.tick_s = self.tick_s;
        s.sample_s = s.sample_s.max(self.tick_s);
        s
    }

    /// Where the router runs. Errors: --store not a postgres:// URL, or no routerd binary.
    pub(crate) fn transport(&self) -> Result<Transport> {
        if !self.http {
            return Ok(Transport::InProcess);
        }
        if let Some(url) = &self.store {
            if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
                bail!("--store must be a postgres:// URL (or absent for SQLite), got {url:?}");
            }
        }
        Ok(Transport::Service(ServiceSpec {
            routerd: routerd_path(self.routerd.clone())?,
            store: self.store.clone(),
        }))
    }

    fn contenders(&self) -> Vec<Contender> {
        if self.contenders.is_empty() && self.http {
            vec![Contender::Router]
        } else if self.contenders.is_empty() {
            Contender::ALL.to_vec()
        } else {
            let mut c = self.contenders.clone();
            c.dedup();
            c
        }
    }
}

/// Arguments of `fleet-lab route sim`.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// The scenario: steady, drought, regime-change, liars, adapter-bug, budget-saturation, cold-start.
    #[arg(long, value_name = "S", value_parser = parse_scenario, required_unless_present = "world_file")]
    pub scenario: Option<Scenario>,
    /// A world file (TOML; docs/routing-lab.md, "Worlds as files") instead of a scenario.
    #[arg(
        long = "world",
        id = "world_file",
        value_name = "FILE",
        conflicts_with = "scenario"
    )]
    pub world_file: Option<PathBuf>,
    #[command(flatten)]
    pub world: WorldArgs,
    /// The report directory (replaced atomically). An existing path that is
    /// not a report directory is refused without --force.
    #[arg(long, value_name = "DIR", default_value = "fleet-lab-out/route-sim")]
    pub out: PathBuf,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `fleet-lab route compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub world: WorldArgs,
    /// The compare directory: compare.json, report.html (the table) and one page per scenario.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "fleet-lab-out/route-compare"
    )]
    pub out: PathBuf,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
}

fn count(flag: &'static str, s: &str, max: u64, unit: &'static str) -> Result<u64, BoundError> {
    let n = super::bounds::count(flag, s, "a whole number of at least 1")?;
    if n > max {
        return Err(BoundError::TooLarge {
            flag,
            text: s.trim().to_string(),
            max: max.to_string(),
            unit,
        });
    }
    Ok(n)
}

fn positive(
    flag: &'static str,
    s: &str,
    min: f64,
    max: f64,
    expected: &'static str,
    unit: &'static str,
) -> Result<f64, BoundError> {
    let text = s.trim().to_string();
    let v: f64 = text.parse().map_err(|_| BoundError::NotANumber {
        flag,
        text: text.clone(),
    })?;
    if !v.is_finite() {
        return Err(BoundError::NotFinite {
            flag,
            text,
            expected,
        });
    }
    if v <= 0.0 || v < min {
        return Err(BoundError::TooSmall {
            flag,
            text,
            expected,
        });
    }
    if v > max {
        return Err(BoundError::TooLarge {
            flag,
            text,
            max: max.to_string(),
            unit,
        });
    }
    Ok(v)
}

/// `--devices`: 1..=100,000.
pub fn parse_devices(s: &str) -> Result<usize, BoundError> {
    count("--devices", s, 100_000, "devices").map(|n| n as usize)
}

/// `--seed`: a whole number in 0..=2^64 − 1.
pub fn parse_seed(s: &str) -> Result<u64, BoundError> {
    let text = s.trim().to_string();
    if text.starts_with('-') {
        return Err(BoundError::TooSmall {
            flag: "--seed",
            text,
            expected: "a whole number from 0 to 18446744073709551615",
        });
    }
    text.parse().map_err(|_| BoundError::NotANumber {
        flag: "--seed",
        text: text.clone(),
    })
}

/// `--threads`: 1..=256.
pub fn parse_threads(s: &str) -> Result<usize, BoundError> {
    count("--threads", s, 256, "threads").map(|n| n as usize)
}

/// `--targets`: 1..=1,000,000.
pub fn parse_targets(s: &str) -> Result<usize, BoundError> {
    count("--targets", s, 1_000_000, "targets").map(|n| n as usize)
}

/// `--hours`: positive, finite, at most 168 (a week).
pub fn parse_hours(s: &str) -> Result<f64, BoundError> {
    positive(
        "--hours",
        s,
        0.0,
        168.0,
        "a positive number of simulated hours, e.g. 6 or 0.5",
        "hours (one week)",
    )
}

/// `--tick-s`: 1..=600 simulated seconds.
pub fn parse_tick(s: &str) -> Result<f64, BoundError> {
    positive(
        "--tick-s",
        s,
        1.0,
        600.0,
        "a tick of at least 1 simulated second",
        "seconds",
    )
}

/// `--seconds`: 0.1..=3,600.
pub fn parse_seconds(s: &str) -> Result<f64, BoundError> {
    positive(
        "--seconds",
        s,
        0.1,
        3600.0,
        "at least 0.1 seconds",
        "seconds",
    )
}

fn parse_scenario(s: &str) -> Result<Scenario, String> {
    Scenario::parse(s).map_err(|e| e.to_string())
}

fn parse_contender(s: &str) -> Result<Contender, String> {
    Contender::parse(s)
}

/// `fleet-lab route`.
pub fn run(args: RouteArgs) -> Result<()> {
    match args.verb {
        RouteVerb::Sim(a) => sim(a),
        RouteVerb::Compare(a) => compare(a),
        RouteVerb::Load(a) => load::load(a),
        RouteVerb::BoxPlot(a) => box_plot::box_plot(a),
    }
}

fn bar(quiet: bool, total_s: f64, label: &str) -> ProgressBar {
    let target = if quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let pb = ProgressBar::with_draw_target(Some(total_s.max(1.0) as u64), target);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>18} [{bar:30}] {percent:>3}% simulated {elapsed_precise} {msg}",
    ) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_prefix(label.to_string());
    pb
}

pub(crate) fn run_one(
    spec: &SimSpec,
    contenders: &[Contender],
    transport: &Transport,
    quiet: bool,
) -> Result<SimReport> {
    let pb = bar(
        quiet,
        spec.end_s() * (contenders.len() + control_runs(spec, contenders)) as f64,
        spec.scenario.name(),
    );
    let step = spec.sample_s as u64;
    let report = simulate_over(spec, contenders, transport, &|_, _| pb.inc(step))
        .with_context(|| format!("scenario {}", spec.scenario))?;
    pb.finish_and_clear();
    Ok(report)
}

fn sim(a: SimArgs) -> Result<()> {
    check_out_dir(&a.out, a.force)?;
    let spec = match (&a.world_file, a.scenario) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the world file {}", path.display()))?;
            let plan = WorldPlan::parse(&text).with_context(|| path.display().to_string())?;
            let mut spec = a.world.spec(Scenario::Steady);
            spec.world = Some(plan);
            spec
        }
        (None, Some(s)) => a.world.spec(s),
        (None, None) => bail!("give --scenario or --world"),
    };
    if let Some(seeds) = &a.world.seeds {
        let contenders = a.world.contenders();
        return seeds::run_seeds(&a.world, &[spec], &seeds.0, &contenders, &a.out);
    }
    let report = run_one(
        &spec,
        &a.world.contenders(),
        &a.world.transport()?,
        a.world.quiet,
    )?;
    print!("{}", render_table(&report));
    write_report(&a.out, &report)
        .with_context(|| format!("cannot write the report to {}", a.out.display()))?;
    println!("report: {}", a.out.join(REPORT_HTML).display());
    Ok(())
}

fn compare(a: CompareArgs) -> Result<()> {
    check_out_dir(&a.out, a.force)?;
    let contenders = a.world.contenders();
    if let Some(seeds) = &a.world.seeds {
        let specs: Vec<SimSpec> = Scenario::ALL.iter().map(|&s| a.world.spec(s)).collect();
        return seeds::run_seeds(&a.world, &specs, &seeds.0, &contenders, &a.out);
    }
    let transport = a.world.transport()?;
    let mut reports = Vec::new();
    for scenario in Scenario::ALL {
        let spec = a.world.spec(scenario);
        reports.push(run_one(&spec, &contenders, &transport, a.world.quiet)?);
    }
    let table = render_compare(&reports);
    print!("{table}");
    let json = serde_json::to_vec_pretty(&reports)?;
    let mut pages = Vec::new();
    for r in &reports {
        pages.push((format!("{}.html", r.scenario), render_html(r)?));
    }
    let links: String = reports
        .iter()
        .map(|r| format!("<li><a href=\"{0}.html\">{0}</a></li>", r.scenario))
        .collect();
    let index = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>routing lab: compare</title><style>body{{font-family:sans-serif;margin:24px}}pre{{background:#f6f6f6;padding:12px;font-size:13px}}</style></head><body><h1>Routing lab: every scenario</h1><pre>{}</pre><ul>{links}</ul></body></html>\n",
        table.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    );
    let mut files: Vec<(&str, &[u8])> =
        vec![("compare.json", &json), (REPORT_HTML, index.as_bytes())];
    for (name, html) in &pages {
        files.push((name.as_str(), html.as_bytes()));
    }
    write_dir_atomically(&a.out, &files)
        .with_context(|| format!("cannot write the compare report to {}", a.out.display()))?;
    println!("report: {}", a.out.join(REPORT_HTML).display());
    Ok(())
}

fn routerd_path(given: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        if p.is_file() {
            return Ok(p);
        }
        bail!("--routerd {} is not a file", p.display());
    }
    let exe = std::env::current_exe().context("locating fleet-lab")?;
    let sibling = exe.parent().map(|p| p.join("routerd"));
    match sibling {
        Some(p) if p.is_file() => Ok(p),
        _ => bail!(
            "routerd not found next to {}: build it with `cargo build --release -p router` or pass --routerd PATH",
            exe.display()
        ),
    }
}
