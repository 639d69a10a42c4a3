//! `fleet-lab run`: replay the corpus through the fleet under a profile and
//! write a report (terminal table, `report.json`, `report.html`, the
//! produced outcomes, HdrHistogram interval logs).
//!
//! `DESIGN.md` §6. With no arguments: the shipped corpus, this host's auto
//! profile, scale 0.1 (a 333-cycle replay in about half a minute).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use fleet::config::FleetConfig;
use fleet::plan::Profile;
use fleet_bindings::PinCores;
use fleet_workloads::Corpus;

use crate::cmd::bounds;
use crate::lab::{self, Contender, QuotaShrink, RunArtifacts, RunSpec};
use crate::report::{check_out_dir, render_run_summary, write_report_dir_with};

/// Options every replaying verb shares (`run`, `parity`, `compare`, `gate`).
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The corpus file (default: the shipped golden corpus).
    #[arg(long, value_name = "PATH")]
    pub corpus: Option<PathBuf>,
    /// Time scale: CPU, I/O and the arrival interval are multiplied by it (> 0).
    #[arg(long, value_name = "F", default_value_t = 0.1, allow_hyphen_values = true, value_parser = bounds::parse_scale)]
    pub scale: f64,
    /// Replay only the first N cycles (≥ 1).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = bounds::parse_cycles)]
    pub cycles: Option<u32>,
    /// Plan for this many cores instead of the detected quota (at most 4096).
    #[arg(long, value_name = "CORES", allow_hyphen_values = true, value_parser = bounds::parse_quota)]
    pub quota: Option<f64>,
    /// Run inside a real child cgroup with this CPU quota (cores); needs root.
    #[arg(long, value_name = "CORES", allow_hyphen_values = true, value_parser = bounds::parse_cgroup_quota)]
    pub cgroup_quota: Option<f64>,
    /// Core pinning of seat threads: auto, on or off.
    #[arg(long, value_name = "auto|on|off", default_value = "auto", value_parser = parse_pin)]
    pub pin: PinCores,
    /// A fleet config file (TOML); DEGENBOT_* environment overrides apply on top.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Bound every receipt wait (resolve, walks, merge, sims) to this many
    /// ms; an overrun fails its paths as overrun and is counted in the
    /// report (default: ten cycle budgets, at least 5 s).
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = bounds::parse_window_ms)]
    pub unit_deadline_ms: Option<u64>,
    /// Re-detect the CPU quota every MS while the run lasts (default 1000);
    /// a change re-plans the fleet from the next cycle boundary and is
    /// listed in the report's plan_changes and timeline.
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = bounds::parse_window_ms)]
    pub quota_watch_ms: Option<u64>,
    /// The arrival rate: live (one cycle every 3.5 s at scale 1, the rate
    /// the live bot sees) or stress (the corpus's own one cycle per second,
    /// 3.5 times live). Scaled like every other duration. Default: live for
    /// `run`, stress for `compare`, `gate` and `parity`.
    #[arg(long, value_name = "live|stress", value_parser = parse_rate)]
    pub rate: Option<ArrivalRate>,
    /// Time between cycle arrivals at scale 1, ms (overrides --rate).
    #[arg(long, value_name = "MS", allow_hyphen_values = true, value_parser = bounds::parse_interval_ms)]
    pub interval_ms: Option<u64>,
    /// The host's own work beside the contender: on (a 1 ms wake-up probe
    /// and a CPU burst at each cycle start), probe (the probe only) or off.
    #[arg(long, value_name = "on|probe|off", default_value = "on")]
    pub cotenant: lab::CoTenantMode,
    /// Keep N threads busy in a separate process while each run lasts (a
    /// noisy neighbour on the host; 0 for none, at most 256).
    #[arg(long, value_name = "THREADS", default_value_t = 0, allow_hyphen_values = true, value_parser = clap::value_parser!(u32).range(0..=lab::contend::MAX_CONTEND_THREADS as i64))]
    pub contend: u32,
    /// The --contend threads' scheduling class: normal (nice 0), nice19
    /// (a background batch job) or idle (SCHED_IDLE).
    #[arg(long, value_enum, default_value = "normal")]
    pub contend_class: lab::contend::ContendClass,
    /// Whether a serial fleet lends its reserved cores at the idle class
    /// where the quota cannot throttle the process (decision 0009): auto
    /// (lend there) or off (keep them reserved).
    #[arg(long, value_name = "auto|off", default_value = "auto", value_parser = parse_lend, action = clap::ArgAction::Set)]
    pub lend_reserve: bool,
    /// Show no progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// How often cycles arrive (`--rate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalRate {
    /// One cycle every [`LIVE_INTERVAL_MS`] at scale 1.
    Live,
    /// The corpus's own interval (one cycle per second for the shipped one).
    Stress,
}

/// The live bot's time between cycles at scale 1, ms: its survey counted
/// 333 cycles in 1,158 s (≈ 3.5 s each).
pub const LIVE_INTERVAL_MS: u64 = 3_500;

impl ArrivalRate {
    /// `live` or `stress`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArrivalRate::Live => "live",
            ArrivalRate::Stress => "stress",
        }
    }
}

fn parse_rate(s: &str) -> Result<ArrivalRate, String> {
    match s {
        "live" => Ok(ArrivalRate::Live),
        "stress" => Ok(ArrivalRate::Stress),
        other => Err(format!(
            "unknown rate {other:?}: use live (a cycle every 3.5 s at scale 1) or stress (the corpus's one per second)"
        )),
    }
}

fn parse_lend(s: &str) -> Result<bool, String> {
    match s {
        "auto" => Ok(true),
        "off" => Ok(false),
        other => Err(format!(
            "unknown lending {other:?}: use auto (lend the reserved cores at the idle class where the quota cannot throttle) or off"
        )),
    }
}

fn parse_pin(s: &str) -> Result<PinCores, String> {
    match s {
        "auto" => Ok(PinCores::Auto),
        "on" => Ok(PinCores::On),
        "off" => Ok(PinCores::Off),
        other => Err(format!("unknown pinning {other:?}: use auto, on or off")),
    }
}

impl ReplayArgs {
    /// The corpus path: `--corpus`, else `corpus/golden-v1.txt` under the
    /// working directory, else the one shipped next to this build.
    pub fn corpus_path(&self) -> PathBuf {
        crate::cmd::corpus::replay_corpus_path(self.corpus.as_deref())
    }

    /// Loads and checks the corpus (checksum, fields), refusing bad input
    /// with the file, line and reason.
    pub fn load_corpus(&self) -> Result<(PathBuf, Corpus)> {
        let path = self.corpus_path();
        let corpus =
            Corpus::load(&path).with_context(|| format!("cannot use corpus {}", path.display()))?;
        Ok((path, corpus))
    }

    /// Checks the scale, the cgroup quota and the fleet config before
    /// anything starts.
    pub fn validate(&self) -> Result<()> {
        self.fleet_config()?;
        if !(self.scale.is_finite() && self.scale > 0.0) {
            bail!("--scale {} is invalid: give a positive number (1.0 is the live bot's timing, 0.1 ten times faster)", self.scale);
        }
        if let Some(q) = self.cgroup_quota {
            if !(q.is_finite() && q >= 0.01) {
                bail!("--cgroup-quota {q} is invalid: give a positive number of cores (at least 0.01)");
            }
        }
        Ok(())
    }

    /// The fleet config (boot policy, pump timing), bounded like the
    /// command line's numbers ([`bounds::load_config`]).
    pub fn fleet_config(&self) -> Result<FleetConfig> {
        Ok(bounds::load_config(
            self.config.as_deref(),
            std::env::vars().collect(),
        )?)
    }

    /// The arrival rate asked for, stress when none was.
    pub fn rate(&self) -> ArrivalRate {
        self.rate.unwrap_or(ArrivalRate::Stress)
    }

    /// The arrival interval at scale 1, µs: `--interval-ms`, else `--rate`
    /// (`None`: the corpus's own).
    pub fn interval_us(&self) -> Option<u64> {
        match (self.interval_ms, self.rate()) {
            (Some(ms), _) => Some(ms * 1_000),
            (None, ArrivalRate::Live) => Some(LIVE_INTERVAL_MS * 1_000),
            (None, ArrivalRate::Stress) => None,
        }
    }

    /// A run spec for `contender` from these options.
    pub fn spec(&self, contender: Contender, corpus_path: PathBuf) -> Result<RunSpec> {
        let cfg = self.fleet_config()?;
        let mut spec = RunSpec::new(contender, corpus_path, self.scale);
        spec.cycles = self.cycles;
        spec.quota = self.quota;
        spec.cgroup_quota = self.cgroup_quota;
        spec.pin_cores = self.pin;
        spec.unit_deadline = self.unit_deadline_ms.map(std::time::Duration::from_millis);
        if let Some(ms) = self.quota_watch_ms {
            spec.quota_watch = Some(std::time::Duration::from_millis(ms));
        }
        spec.posture = cfg.posture;
        spec.pump = cfg.pump.into();
        spec.budget = cfg.budget;
        spec.progress = !self.quiet;
        spec.cotenant = self.cotenant;
        spec.contend = self.contend;
        spec.contend_class = self.contend_class;
        spec.lend_reserve = self.lend_reserve;
        spec.interval_us = self.interval_us();
        Ok(spec)
    }
}

/// Arguments of `fleet-lab run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The profile: auto (tier from the quota), pinned or serial. Default: the config's, else auto.
    #[arg(long, value_name = "auto|pinned|serial")]
    pub profile: Option<Profile>,
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// The report directory (replaced atomically; nothing is half-written).
    /// An existing path that is not a report directory is refused without --force.
    #[arg(long, value_name = "DIR", default_value = "fleet-lab-out/run")]
    pub out: PathBuf,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
    /// Shrink the real cgroup's quota mid-run: `CYCLE:CORES[:CYCLES]` (default 30 cycles), then restore it.
    /// Repeat the flag for several shrinks.
    #[arg(long, value_name = "CYCLE:CORES[:CYCLES]", value_parser = parse_shrink)]
    pub quota_shrink_at: Vec<QuotaShrink>,
    /// Stream each cycle's row and outcomes to DIR/cycles.jsonl and
    /// DIR/outcomes.jsonl, and each second's latency intervals to
    /// DIR/<metric>.hlog, as the run goes instead of keeping them in memory
    /// (for long soaks); the report's per_cycle is then empty.
    #[arg(long, value_name = "DIR")]
    pub stream: Option<PathBuf>,
    /// Sample the run with pprof and write a flamegraph SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Keep the allocator's free memory after a cordon drains (by default
    /// it is handed back once per cordon; a `heap_release` timeline event).
    #[arg(long)]
    pub keep_heap: bool,
    /// A label for tables and plots.
    #[arg(long)]
    pub label: Option<String>,
    /// Serve Prometheus metrics on this loopback address while the run lasts (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Serve the posture operator channel on this loopback address (see `fleet-lab posture`).
    #[arg(long, value_name = "ADDR")]
    pub operator_addr: Option<std::net::SocketAddr>,
    /// Test only: refuse every background submit (shows refusals are counted in the report).
    #[arg(long, hide = true)]
    pub inject_refuse_background: bool,
}

/// Parses `CYCLE:CORES[:CYCLES]`.
pub fn parse_shrink(s: &str) -> Result<QuotaShrink, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || format!("--quota-shrink-at {s:?}: expected CYCLE:CORES[:CYCLES], e.g. 40:0.5:30");
    if !(2..=3).contains(&parts.len()) {
        return Err(bad());
    }
    let at_cycle = parts[0].parse().map_err(|_| bad())?;
    let cores: f64 = parts[1].parse().map_err(|_| bad())?;
    if !(cores.is_finite() && cores >= 0.01) {
        return Err(format!(
            "--quota-shrink-at: {cores} cores is invalid: give at least 0.01"
        ));
    }
    let cycles = match parts.get(2) {
        Some(c) => c.parse().map_err(|_| bad())?,
        None => 30,
    };
    Ok(QuotaShrink {
        at_cycle,
        cores,
        cycles,
    })
}

/// Runs one contender and writes its report directory; returns the artifacts.
pub fn run_and_write(spec: &RunSpec, corpus: &Corpus, out: &Path) -> Result<RunArtifacts> {
    let artifacts = lab::run(spec, corpus)?;
    write_report_dir_with(
        out,
        &artifacts.report,
        &artifacts.logs,
        &artifacts.outcomes_jsonl,
        &artifacts.extras,
    )
    .with_context(|| format!("cannot write the report to {}", out.display()))?;
    Ok(artifacts)
}

/// `fleet-lab run`.
pub fn run(mut args: RunArgs) -> Result<()> {
    // The main job replays at the live bot's rate unless told otherwise.
    args.replay.rate.get_or_insert(ArrivalRate::Live);
    args.replay.validate()?;
    check_out_dir(&args.out, args.force)?;
    let (path, corpus) = args.replay.load_corpus()?;
    // As `plan` does: the flag, else the config's profile, else auto.
    let profile = match args.profile {
        Some(p) => p,
        None => args.replay.fleet_config()?.profile,
    };
    let mut spec = args.replay.spec(Contender::Fleet(profile), path)?;
    spec.quota_shrinks = args.quota_shrink_at.clone();
    spec.flamegraph = args.flamegraph.clone();
    spec.stream_to = args.stream.clone();
    spec.release_heap = !args.keep_heap;
    spec.label = args.label.clone();
    spec.metrics_addr = args.metrics_addr;
    spec.operator_addr = args.operator_addr;
    spec.injection.refuse_background = args.inject_refuse_background;
    let artifacts = run_and_write(&spec, &corpus, &args.out)?;
    print!("{}", render_run_summary(&artifacts.report));
    println!("report: {}", args.out.join("report.html").display());
    if !artifacts.report.parity {
        bail!("parity failed: the produced outcomes differ from the golden corpus (see first_mismatch in report.json)");
    }
    Ok(())
}
