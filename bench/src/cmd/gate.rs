//! `fleet-lab gate --profile A|B`: run a CI profile and enforce its budgets
//! (`ci/budgets.toml`); exit non-zero naming every budget broken.
//!
//! Profile A is `auto` on the runner (the serial tier on a small host);
//! profile B is forced `pinned` (marked oversubscribed on a small host).
//! Seed 000 §14; `DESIGN.md` §6.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use fleet::plan::Profile;

use crate::cmd::run::{run_and_write, ReplayArgs};
use crate::gate::{check, Budgets};
use crate::lab::{Contender, Injection};
use crate::report::render_run_summary;

/// Arguments of `fleet-lab gate`.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// The CI profile: a name in the budgets file (A = auto, B = forced pinned).
    #[arg(long, value_name = "A|B")]
    pub profile: String,
    /// The budgets file.
    #[arg(long, value_name = "FILE", default_value = "ci/budgets.toml")]
    pub budgets: PathBuf,
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Override the profile's scale.
    #[arg(long = "gate-scale", value_name = "F", allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_gate_scale)]
    pub gate_scale: Option<f64>,
    /// The report directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
    /// Test only: delay every cycle's hand-off by this many ms (shows the latency budgets fail).
    #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
    pub inject_delay_ms: u64,
    /// Test only: break one produced outcome (shows the parity budget fails).
    #[arg(long, hide = true)]
    pub inject_wrong_outcome: bool,
    /// Test only: multiply every unit's CPU and I/O time by F (≥ 1; shows a slowdown fails the ratio budgets).
    #[arg(long, value_name = "F", hide = true, value_parser = crate::cmd::bounds::parse_slowdown)]
    pub inject_slowdown: Option<f64>,
    /// Test only: refuse every background submit (shows refusals are counted in the report).
    #[arg(long, hide = true)]
    pub inject_refuse_background: bool,
}

/// `fleet-lab gate`.
pub fn run(args: GateArgs) -> Result<()> {
    let budgets = Budgets::load(&args.budgets)?;
    let budget = budgets.profile(&args.profile, &args.budgets)?;
    let profile: Profile = budget
        .fleet_profile
        .parse()
        .map_err(|e| anyhow::anyhow!("budgets profile {}: {e}", args.profile))?;
    let mut replay = args.replay.clone();
    // The budgets file sets the gate's scale and cycles unless overridden.
    replay.scale = args.gate_scale.unwrap_or(budget.scale);
    if replay.cycles.is_none() {
        replay.cycles = Some(budget.cycles);
    }
    replay.validate()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("fleet-lab-out/gate-{}", args.profile)));
    crate::report::check_out_dir(&out, args.force)?;
    let (path, corpus) = replay.load_corpus()?;
    let mut spec = replay.spec(Contender::Fleet(profile), path)?;
    spec.label = Some(format!("gate {} ({})", args.profile, budget.fleet_profile));
    spec.lend_reserve &= budget.lend_reserve;
    spec.injection = Injection {
        delay_ms: args.inject_delay_ms,
        wrong_outcome: args.inject_wrong_outcome,
        refuse_background: args.inject_refuse_background,
        slowdown: args.inject_slowdown,
    };
    let artifacts = run_and_write(&spec, &corpus, &out)?;
    print!("{}", render_run_summary(&artifacts.report));
    let breaches = check(&artifacts.report, budget);
    judge(
        &format!("gate {}", args.profile),
        &budget.description,
        &breaches,
    )
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
