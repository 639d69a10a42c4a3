//! `fleet-lab plan`: the detected quota, the plan, the budget table and the
//! census projection for this host or a given quota.
//!
//! Source: `DESIGN.md` §6 (the lab verbs) and §3 "Plan", "Census and status".
//! `--json` prints [`fleet::status::RuntimeStatus`]; `--root DIR` runs the
//! detection against a captured tree (`DIR/proc/self/{cgroup,mountinfo,status}`
//! and the cgroup files under the mount points found there).

use anyhow::{Context, Result};
use clap::Args;
use fleet::config::FleetConfig;
use fleet::plan::{Plan, Profile};
use fleet::quota::{detect, detect_live};
use fleet::status::{runtime_status, RuntimeStatus};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of `fleet-lab plan`.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// Plan for this many cores (fractions allowed, e.g. 6.5; at most 4096) instead of the detected quota.
    #[arg(long, value_name = "CORES", allow_hyphen_values = true, value_parser = crate::cmd::bounds::parse_quota)]
    pub quota: Option<f64>,
    /// The profile: auto (tier from the quota), pinned or serial. Default: the config's, else auto.
    #[arg(long, value_name = "auto|pinned|serial")]
    pub profile: Option<Profile>,
    /// Print runtime_status() as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Detect against a captured filesystem tree instead of the live system.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A fleet config file (TOML); DEGENBOT_* environment overrides apply on top.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Compute the status for the arguments (no printing).
pub fn status(args: &PlanArgs) -> Result<RuntimeStatus> {
    let text = match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config {}", path.display()))?,
        None => String::new(),
    };
    let cfg = FleetConfig::load(&text, std::env::vars())?;
    let report = match &args.root {
        Some(root) => {
            anyhow::ensure!(
                root.is_dir(),
                "--root {} is not a directory",
                root.display()
            );
            detect(root)
        }
        None => detect_live(),
    };
    let quota = args.quota.unwrap_or_else(|| report.effective_cpus());
    let profile = args.profile.unwrap_or(cfg.profile);
    // As `run` does: a serial plan lends its reserve where the quota cannot
    // throttle (decision 0009).
    let plan = Plan::resolve(quota, profile, &cfg.budget)?.lend_reserve(&report);
    Ok(runtime_status(&plan, &report, None))
}

/// Run the verb: print tables (or JSON) to stdout.
pub fn run(args: &PlanArgs) -> Result<()> {
    let st = status(args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&st)?);
    } else {
        print!("{}", render(&st, args.quota.is_some()));
    }
    Ok(())
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    out.push_str(&line(header.iter().map(|h| h.to_string()).collect()));
    out.push_str(&line(width.iter().map(|w| "-".repeat(*w)).collect()));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
}

/// The terminal rendering of a status. `forced_quota`: the quota came from `--quota`.
pub fn render(st: &RuntimeStatus, forced_quota: bool) -> String {
    let mut out = String::new();
    render_quota(&mut out, st);
    render_plan(&mut out, st, forced_quota);
    render_budget(&mut out, st);
    render_census(&mut out, st);
    out
}

/// The detected quota: source, exact quota, mask, effective cores, reason.
fn render_quota(out: &mut String, st: &RuntimeStatus) {
    let q = &st.quota;
    let exact = q
        .exact_cpus
        .map_or("none".to_string(), |c| format!("{c} cores"));
    let _ = writeln!(out, "Quota (detected)");
    let _ = writeln!(out, "  source:         {}", q.source.name());
    let _ = writeln!(out, "  exact quota:    {exact}");
    let _ = writeln!(out, "  affinity mask:  {} CPUs", q.affinity_cpus);
    let _ = writeln!(out, "  effective:      {} cores", q.effective_cpus);
    let _ = writeln!(out, "  reason:         {}", q.reason);
}

/// The plan: quota, profile, binding, oversubscription, refused tier,
/// lending, walks at once.
fn render_plan(out: &mut String, st: &RuntimeStatus, forced_quota: bool) {
    let p = &st.plan;
    let _ = writeln!(out, "\nPlan");
    let from = if forced_quota {
        "from --quota"
    } else {
        "detected"
    };
    let _ = writeln!(out, "  quota:          {} cores ({from})", p.quota_cpus);
    let _ = writeln!(out, "  profile:        {}", p.profile);
    let _ = writeln!(out, "  binding:        {}", p.binding);
    let _ = writeln!(
        out,
        "  oversubscribed: {}",
        if p.oversubscribed { "YES" } else { "no" }
    );
    let refused = p
        .tier_refused
        .as_ref()
        .map_or("none".to_string(), |r| r.to_string());
    let _ = writeln!(out, "  tier refused:   {refused}");
    if p.binding == fleet::plan::Binding::Serial {
        let lent = if p.reserve_lent {
            "yes: every cycle thread at the idle class, the guard takes them back from other processes (decision 0009)"
        } else {
            "no: the quota may throttle, or is unknown"
        };
        let _ = writeln!(out, "  reserve lent:   {lent}");
    }
    let b = &st.budget.budget;
    let _ = writeln!(
        out,
        "  walks at once:  {} of {} solver pins; sim slot cap {}",
        if p.binding == fleet::plan::Binding::Pinned {
            b.solver_cpus
        } else {
            b.solver_pins
        },
        b.solver_pins,
        b.sim_slot_cap
    );
}

/// The budget's shares, one row per consumer.
fn render_budget(out: &mut String, st: &RuntimeStatus) {
    let p = &st.plan;
    let b = &st.budget.budget;
    let over = if b.oversubscribed {
        " — OVERSUBSCRIBED"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "\nBudget ({} shape; integer shares sum to {} of ⌊Q⌋ = {}{over})",
        b.shape_name(),
        b.integer_sum(),
        p.quota_cpus.floor()
    );
    let rows: Vec<Vec<String>> = st
        .budget
        .rows
        .iter()
        .map(|r| {
            let frac = if r.io_fraction > 0.0 {
                format!(" +{:.2}", r.io_fraction)
            } else {
                String::new()
            };
            vec![
                r.consumer.clone(),
                format!("{}{frac}", r.cores),
                r.threads.to_string(),
                r.sizing_rule.clone(),
            ]
        })
        .collect();
    table(out, &["consumer", "cores", "threads", "sizing rule"], &rows);
}

/// The census: every thread the plan makes, registered or projected.
fn render_census(out: &mut String, st: &RuntimeStatus) {
    let booted = if st.fleet_booted {
        "registered"
    } else {
        "projection, not booted"
    };
    let _ = writeln!(out, "\nCensus ({booted})");
    let rows: Vec<Vec<String>> = st
        .census
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.role.map_or("-".to_string(), |x| x.name().to_string()),
                r.count.to_string(),
                r.thread_name.clone(),
                r.binding.name().to_string(),
                r.sizing_rule.clone(),
            ]
        })
        .collect();
    table(
        out,
        &["name", "role", "count", "thread", "binding", "sizing rule"],
        &rows,
    );
}
