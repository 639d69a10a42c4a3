//! `fleet-lab gate --profile A|B --reference BUILD`: a CI profile as a
//! paired, interleaved measurement against a reference build, judged by
//! its budgets (`ci/budgets.toml`); exit non-zero naming every budget
//! broken.
//!
//! The gate starts a block server (`fleet-lab blocks`) of this build and
//! one of the reference, with the same arguments, runs a warm-up block on
//! each and then `pairs` pairs of blocks in the balanced ABBA order, and
//! decides the timed figure (candidate ÷ reference mean makespan) by the
//! profile's sign test ([`crate::paired::sign`]). Deterministic figures
//! (parity, threads created, histogram range, saturation, throttling
//! inside the lab's cgroup) are gated absolutely on every candidate block.
//!
//! Profile A is `auto` on the runner (the serial tier on a small host);
//! profile B is forced `pinned` (marked oversubscribed on a small host).
//! `DESIGN.md` §6; docs/gates.md has the calibration.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::budgets::Budgets;
use crate::gate::{check_pairs, ProfileBudget};
use crate::paired::{self, Arm, BlockServer, Pair, SignVerdict};

/// The environment variable that lets a gate whose profile wants a lab
/// cgroup run without one where the cpu controller is not writable.
pub const ALLOW_NO_CGROUP: &str = "FLEET_GATE_ALLOW_NO_CGROUP";

/// Arguments of `fleet-lab gate`.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// The CI profile: a name in the budgets file (A = auto, B = forced pinned).
    #[arg(long, value_name = "A|B")]
    pub profile: String,
    /// The budgets file.
    #[arg(long, value_name = "FILE", default_value = "ci/budgets.toml")]
    pub budgets: PathBuf,
    /// The build to measure against: the path of another commit's
    /// `fleet-lab` (`ci/reference-lab.sh` builds the recorded one), or
    /// `self` for this build against itself (what the calibration's
    /// false-alarm runs do).
    #[arg(long, value_name = "PATH|self")]
    pub reference: String,
    /// Test only: the candidate build (default: this binary).
    #[arg(long, value_name = "PATH", hide = true)]
    pub candidate: Option<PathBuf>,
    /// The corpus file both builds replay (default: the shipped golden corpus).
    #[arg(long, value_name = "PATH")]
    pub corpus: Option<PathBuf>,
    /// Override the profile's measured pairs.
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// Override the profile's cycles per block.
    #[arg(long, value_name = "N")]
    pub block_cycles: Option<u32>,
    /// Override the profile's scale.
    #[arg(long = "gate-scale", value_name = "F", allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_gate_scale)]
    pub gate_scale: Option<f64>,
    /// The report directory (`paired.json`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
    /// Print only the verdict, not a line per pair.
    #[arg(long)]
    pub quiet: bool,
    /// Test only: delay every cycle's hand-off by this many ms (the candidate only).
    #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
    pub inject_delay_ms: u64,
    /// Test only: break one produced outcome (the candidate only; shows the parity budget fails).
    #[arg(long, hide = true)]
    pub inject_wrong_outcome: bool,
    /// Test only: multiply every unit's CPU and I/O time by F on the
    /// candidate (≥ 1; what the calibration's power runs inject).
    #[arg(long, value_name = "F", hide = true, value_parser = crate::cmd::bounds::parse_slowdown)]
    pub inject_slowdown: Option<f64>,
    /// Test only: refuse every background submit (the candidate only).
    #[arg(long, hide = true)]
    pub inject_refuse_background: bool,
}

/// What `paired.json` holds.
#[derive(Debug, Serialize)]
struct PairedReport<'a> {
    profile: &'a str,
    budget: &'a ProfileBudget,
    candidate: String,
    reference: String,
    injected_slowdown: Option<f64>,
    throttle_skip: Option<String>,
    pairs: &'a [Pair],
    ratios: Vec<f64>,
    verdict: &'a SignVerdict,
    breaches: Vec<String>,
    wall_seconds: f64,
}

/// The profile's budgets with the command line's overrides applied.
///
/// Errors: the budgets file, an unknown profile, numbers that cannot make
/// a gate that can fail, an unknown fleet profile.
fn gate_budget(args: &GateArgs) -> Result<ProfileBudget> {
    let budgets = Budgets::load(&args.budgets)?;
    let mut budget = budgets.profile(&args.profile, &args.budgets)?.clone();
    budget.scale = args.gate_scale.unwrap_or(budget.scale);
    budget.pairs = args.pairs.unwrap_or(budget.pairs);
    budget.block_cycles = args.block_cycles.unwrap_or(budget.block_cycles);
    budget
        .validate(&args.profile)
        .map_err(|m| anyhow::anyhow!("{m} (after the command line's overrides)"))?;
    budget
        .fleet_profile
        .parse::<fleet::plan::Profile>()
        .map_err(|e| anyhow::anyhow!("budgets profile {}: fleet_profile: {e}", args.profile))?;
    Ok(budget)
}

/// The candidate and reference builds (`self`: the candidate itself).
///
/// Errors: either is not a file.
fn builds(args: &GateArgs) -> Result<(PathBuf, PathBuf)> {
    let this = std::env::current_exe().context("cannot find this binary")?;
    let candidate = args.candidate.clone().unwrap_or_else(|| this.clone());
    let reference = match args.reference.as_str() {
        "self" => candidate.clone(),
        path => PathBuf::from(path),
    };
    for (what, p) in [("--reference", &reference), ("--candidate", &candidate)] {
        if !p.is_file() {
            bail!(
                "{what} {}: no such file (build the reference with ci/reference-lab.sh, or give `self`)",
                p.display()
            );
        }
    }
    Ok((candidate, reference))
}

/// Prints the sign test's verdict over the pairs.
fn print_verdict(profile: &str, budget: &ProfileBudget, verdict: &SignVerdict) {
    println!(
        "gate {}: {} of {} pairs above {:.2}× (median ratio {:.3}, range {:.3}–{:.3}); sign test p = {:.4}, fails at {} of {} (alpha {})",
        profile,
        verdict.above,
        verdict.pairs,
        budget.slowdown_tolerance,
        verdict.median_ratio,
        verdict.min_ratio,
        verdict.max_ratio,
        verdict.p_value,
        verdict.critical.map_or("-".to_string(), |c| c.to_string()),
        verdict.pairs,
        budget.alpha
    );
}

/// `fleet-lab gate`.
pub fn run(args: GateArgs) -> Result<()> {
    let budget = gate_budget(&args)?;
    let (candidate, reference) = builds(&args)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("fleet-lab-out/gate-{}", args.profile)));
    crate::report::check_out_dir(&out, args.force)?;
    let throttle_skip = cgroup_decision(&budget)?;
    // Both builds replay the one corpus file this build resolves (a cached
    // reference would look for its own next to a source tree that is gone).
    let corpus = crate::cmd::corpus::replay_corpus_path(args.corpus.as_deref());
    let corpus = std::path::absolute(&corpus).unwrap_or(corpus);
    let common = server_args(&budget, &corpus, throttle_skip.is_none());
    let mut cand_args = common.clone();
    cand_args.extend(injections(&args));
    let t0 = std::time::Instant::now();
    println!(
        "gate {}: {} pairs of {}-cycle blocks at scale {} ({}), candidate {} against reference {}{}",
        args.profile,
        budget.pairs,
        budget.block_cycles,
        budget.scale,
        budget.fleet_profile,
        candidate.display(),
        if args.reference == "self" { "itself".to_string() } else { reference.display().to_string() },
        match args.inject_slowdown {
            Some(f) => format!(", candidate slowed {f}×"),
            None => String::new(),
        }
    );
    if let Some(why) = &throttle_skip {
        println!("gate {}: throttle gate SKIPPED: {why}", args.profile);
    }
    let mut cand =
        BlockServer::start(&candidate, &cand_args).context("the candidate's block server")?;
    let mut refr =
        BlockServer::start(&reference, &common).context("the reference's block server")?;
    let quiet = args.quiet;
    let pairs = paired::measure(
        &mut cand,
        &mut refr,
        budget.warmup_blocks,
        budget.pairs,
        |i, p| {
            if !quiet {
                println!(
                    "  pair {:>2} ({} first): candidate {:.2} ms, reference {:.2} ms, ratio {:.3}",
                    i + 1,
                    match p.first {
                        Arm::Candidate => "candidate",
                        Arm::Reference => "reference",
                    },
                    p.candidate.makespan_mean_ms,
                    p.reference.makespan_mean_ms,
                    p.ratio()
                );
            }
        },
    )?;
    drop((cand, refr));
    let (breaches, verdict) = check_pairs(&pairs, &budget, throttle_skip.as_deref());
    print_verdict(&args.profile, &budget, &verdict);
    let report = PairedReport {
        profile: &args.profile,
        budget: &budget,
        candidate: candidate.display().to_string(),
        reference: reference.display().to_string(),
        injected_slowdown: args.inject_slowdown,
        throttle_skip: throttle_skip.clone(),
        pairs: &pairs,
        ratios: pairs.iter().map(Pair::ratio).collect(),
        verdict: &verdict,
        breaches: breaches.iter().map(|b| b.to_string()).collect(),
        wall_seconds: t0.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_vec_pretty(&report)?;
    crate::report::write_paired_dir(&out, &json)
        .with_context(|| format!("cannot write the gate's report to {}", out.display()))?;
    println!(
        "report: {}",
        out.join(crate::report::write::PAIRED_JSON).display()
    );
    judge(
        &format!("gate {}", args.profile),
        &budget.description,
        &breaches,
    )
}

/// Where the profile wants a lab cgroup: `None` when one can be made; the
/// skip's reason when it cannot and [`ALLOW_NO_CGROUP`] allows it; an
/// error naming the variable otherwise. A profile without a quota needs
/// none.
fn cgroup_decision(budget: &ProfileBudget) -> Result<Option<String>> {
    if budget.cgroup_quota.is_none() {
        return Ok(None);
    }
    match crate::probe::cgroup::probe_writable() {
        Ok(_) => Ok(None),
        Err(e) if std::env::var(ALLOW_NO_CGROUP).is_ok_and(|v| v == "1") => Ok(Some(format!(
            "no cgroup with a quota can be made here ({e}); {ALLOW_NO_CGROUP}=1 allows running without one"
        ))),
        Err(e) => bail!(
            "this profile's throttle gate runs inside a cgroup quota the lab makes, and none can be made here: {e}. Run as root where the cpu controller is writable, or set {ALLOW_NO_CGROUP}=1 to run without the throttle gate"
        ),
    }
}

/// The arguments both block servers get: the profile, scale, block
/// length, the gates' arrival rate (stress) and co-tenant (on), the
/// reserve's lending, the corpus and, where made, the cgroup quota.
fn server_args(budget: &ProfileBudget, corpus: &Path, with_cgroup: bool) -> Vec<OsString> {
    let mut a: Vec<OsString> = [
        "--fleet-profile",
        &budget.fleet_profile,
        "--scale",
        &budget.scale.to_string(),
        "--cycles",
        &budget.block_cycles.to_string(),
        "--rate",
        "stress",
        "--cotenant",
        "on",
        "--lend-reserve",
        if budget.lend_reserve { "auto" } else { "off" },
        "--quiet",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    if let (Some(q), true) = (budget.cgroup_quota, with_cgroup) {
        a.extend(["--cgroup-quota".into(), q.to_string().into()]);
    }
    a.extend(["--corpus".into(), corpus.as_os_str().to_owned()]);
    a
}

/// The candidate's fault injections as `blocks` arguments.
fn injections(args: &GateArgs) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    if let Some(f) = args.inject_slowdown {
        a.extend(["--inject-slowdown".into(), f.to_string().into()]);
    }
    if args.inject_delay_ms > 0 {
        a.extend([
            "--inject-delay-ms".into(),
            args.inject_delay_ms.to_string().into(),
        ]);
    }
    if args.inject_wrong_outcome {
        a.push("--inject-wrong-outcome".into());
    }
    if args.inject_refuse_background {
        a.push("--inject-refuse-background".into());
    }
    a
}

/// Prints `NAME: PASS (description)`, or one `NAME: FAIL budget: detail`
/// line per breach and returns an error counting them (the lines say
/// which; the error does not repeat them).
pub(crate) fn judge(name: &str, description: &str, breaches: &[crate::gate::Breach]) -> Result<()> {
    if breaches.is_empty() {
        println!("{name}: PASS ({description})");
        return Ok(());
    }
    for b in breaches {
        println!("{name}: FAIL {b}");
    }
    bail!(
        "{name} failed {} limit(s): {} (details above)",
        breaches.len(),
        breaches
            .iter()
            .map(|b| b.budget)
            .collect::<Vec<_>>()
            .join(", ")
    )
}
