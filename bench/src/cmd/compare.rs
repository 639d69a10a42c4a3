//! `fleet-lab compare`: the fleet (auto and forced pinned) and the designs
//! it replaces on the same corpus and scale, in rounds: every contender
//! once per round, the order rotated each round ([`crate::compare_rounds`]).
//! It prints the median round's table with its verdict (who won, in plain
//! sentences derived from the figures) and a legend of its columns, then
//! every figure's median and spread over rounds and the paired per-round
//! ratios fleet ÷ each baseline; the page shows the median round.
//!
//! `DESIGN.md` §6; the baselines are in [`crate::baseline`].

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use fleet::plan::Profile;

use crate::cmd::run::ReplayArgs;
use crate::compare_gate::CompareBudget;
use crate::lab::{self, Contender};
use crate::paired::BlockServer;
use crate::report::{
    read_log_histogram, render_compare_table, render_verdict, write_compare_dir, CompareReport,
    Metric, RunReport,
};

/// Arguments of `fleet-lab compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// The compare report directory.
    #[arg(long, value_name = "DIR", default_value = "fleet-lab-out/compare")]
    pub out: PathBuf,
    /// Replace --out even when it is a file or a directory holding no report.
    #[arg(long)]
    pub force: bool,
    /// Leave out the baselines (fleet auto and pinned only).
    #[arg(long)]
    pub fleet_only: bool,
    /// Hold the host "awake" for the whole comparison: a separate process
    /// with one thread per CPU, each waking every 200 µs (`fleet-lab spin
    /// --wake-us 200`), keeps the CPUs out of their deep idle states, the
    /// same for every contender (docs/lab.md, "The host's state"). Without
    /// it the host is as it is (on a quiet VM: deep idle between wake-ups).
    #[arg(long)]
    pub host_awake: bool,
    /// With --host-awake: the waker's period, µs (1..=100,000; default
    /// 200). On a VM whose idle vCPUs halt at once (cpuidle driver
    /// `none`) a 200 µs waker still lets them halt between its wakes; a
    /// shorter one halts them less, and preempts the fleet's idle-class
    /// cycle threads more (decision 0033).
    #[arg(long, value_name = "US", requires = "host_awake", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub awake_wake_us: Option<u64>,
    /// Leave out the host floor: by default each round also runs the
    /// host's own work alone on the same arrivals, no contender, in the
    /// rotation (one run's time more a round), and the rounds' block shows
    /// each contender's co-tenant p99 over it (docs/lab.md, "The host
    /// floor"; decision 0033).
    #[arg(long)]
    pub no_host_floor: bool,
    /// Set the guest's halt-polling window (`haltpoll.guest_halt_poll_ns`,
    /// 0..=10,000,000 ns) for the whole comparison and put the value it
    /// had back at the end: how long an idle vCPU polls before it halts
    /// (docs/lab.md, "The host's state"). Needs root on a guest with the
    /// haltpoll cpuidle driver; refused before any run otherwise.
    #[arg(long, value_name = "NS", value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub halt_poll_ns: Option<u64>,
    /// Rounds: each contender runs once per round, in an order rotated
    /// each round (1..=50; default 5, or the `[compare]` table's with --gate).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub rounds: Option<u32>,
    /// Fail (non-zero exit, naming each limit) when fleet auto loses the
    /// comparison beyond the `[compare]` limits of --budgets.
    #[arg(long)]
    pub gate: bool,
    /// With --gate and a `[compare.reference]` table: the reference build
    /// whose fleet auto each round is paired with (a `fleet-lab` binary,
    /// as `ci/reference-lab.sh` prints it, or `self` for this one).
    #[arg(long, value_name = "BUILD", requires = "gate")]
    pub reference: Option<String>,
    /// The budgets file --gate reads.
    #[arg(long, value_name = "FILE", default_value = "ci/budgets.toml")]
    pub budgets: PathBuf,
    /// Test only: multiply every fleet unit's CPU and I/O time by F (≥ 1;
    /// shows a slowed fleet fails --gate). The baselines run unslowed.
    #[arg(long, value_name = "F", hide = true, value_parser = crate::cmd::bounds::parse_slowdown)]
    pub inject_fleet_slowdown: Option<f64>,
}

/// The waker's default period under `--host-awake`, µs: each CPU wakes
/// 5,000 times a second, a few percent of a core, far more often than any
/// idle governor's poll window lets a CPU go deep (`--awake-wake-us`
/// changes it: where idle vCPUs halt at once, 200 µs still lets them
/// halt; decision 0033).
pub const HOST_AWAKE_WAKE_US: u64 = 200;

/// The waker of `--host-awake` (one thread per CPU every `wake_us`), or
/// `None` without it. Errors: this binary cannot be found or started.
fn start_waker(host_awake: bool, wake_us: u64) -> Result<Option<crate::lab::contend::Contention>> {
    if !host_awake {
        return Ok(None);
    }
    let exe = std::env::current_exe().context("cannot find this fleet-lab to start the waker")?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    crate::lab::contend::Contention::start_waker(&exe, cpus, wake_us)
        .map(Some)
        .context("cannot start the waker of --host-awake")
}

/// The halt-polling window of `--halt-poll-ns`, set until the value is
/// dropped (`None` without the flag). Errors: it cannot be set.
fn set_halt_poll(args: &CompareArgs) -> Result<Option<crate::probe::haltpoll::HaltPollSet>> {
    args.halt_poll_ns
        .map(crate::probe::haltpoll::HaltPollSet::set)
        .transpose()
        .context("cannot set --halt-poll-ns")
}

/// The rounds a comparison runs when neither --rounds nor --gate says.
pub const DEFAULT_ROUNDS: u32 = 5;

/// The contenders, in table order. The gate leaves out forced pinned (it
/// judges fleet auto against the baselines only; a round is then four runs).
pub fn contenders(fleet_only: bool, gate: bool) -> Vec<Contender> {
    let mut c = vec![Contender::Fleet(Profile::Auto)];
    if !gate {
        c.push(Contender::Fleet(Profile::Pinned));
    }
    if !fleet_only {
        c.extend([
            Contender::PileOfPools,
            Contender::PlainTokio,
            Contender::RayonTokio,
        ]);
    }
    c
}

/// The paired rounds' file in the compare report directory.
pub const PAIRED_JSON: &str = "paired.json";

/// Starts the paired rounds' block servers: this build (slowed where the
/// fleet is) and the reference, both serving fleet auto blocks in the
/// comparison's own shape on the one corpus file this build resolved;
/// each block is `[compare.reference] block_cycles` long where the table
/// sets it, else the comparison's own `--cycles`.
fn start_pairs(
    args: &CompareArgs,
    reference: &str,
    corpus: &std::path::Path,
    budget: Option<&CompareBudget>,
) -> Result<crate::compare_paired::RoundPairs> {
    let block_cycles = budget
        .and_then(|b| b.reference)
        .and_then(|t| t.block_cycles);
    if let Some(n) = block_cycles {
        println!("paired with the reference: 2 blocks of each build per round, {n} cycles each ([compare.reference] block_cycles)");
    }
    let this = std::env::current_exe().context("cannot find this binary")?;
    let reference = match reference {
        "self" => this.clone(),
        path => PathBuf::from(path),
    };
    if !reference.is_file() {
        anyhow::bail!(
            "--reference {}: no such file (build it with ci/reference-lab.sh, or give `self`)",
            reference.display()
        );
    }
    let corpus = std::path::absolute(corpus).unwrap_or_else(|_| corpus.to_path_buf());
    let common = block_args(&args.replay, &corpus, block_cycles);
    let mut cand = common.clone();
    if let Some(f) = args.inject_fleet_slowdown {
        cand.extend(["--inject-slowdown".into(), f.to_string().into()]);
    }
    let c = BlockServer::start(&this, &cand).context("this build's block server")?;
    let r = BlockServer::start(&reference, &common).context("the reference's block server")?;
    Ok(crate::compare_paired::RoundPairs::start(c, r))
}

/// `fleet-lab blocks` arguments for fleet auto in the shape of `replay`
/// (its scale, cycles, rate or interval, co-tenant, lending, quota, config
/// and busy threads), with `cycles` instead of its cycles where given.
fn block_args(replay: &ReplayArgs, corpus: &std::path::Path, cycles: Option<u32>) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["--fleet-profile".into(), "auto".into()];
    let mut flag = |k: &str, v: String| a.extend([OsString::from(k), OsString::from(v)]);
    flag("--scale", replay.scale.to_string());
    if let Some(c) = cycles.or(replay.cycles) {
        flag("--cycles", c.to_string());
    }
    match replay.interval_ms {
        Some(ms) => flag("--interval-ms", ms.to_string()),
        None => flag("--rate", replay.rate().as_str().to_string()),
    }
    flag("--cotenant", replay.cotenant.as_str().to_string());
    flag(
        "--lend-reserve",
        if replay.lend_reserve { "auto" } else { "off" }.to_string(),
    );
    if let Some(q) = replay.quota {
        flag("--quota", q.to_string());
    }
    if let Some(c) = &replay.config {
        flag("--config", c.display().to_string());
    }
    if replay.contend > 0 {
        flag("--contend", replay.contend.to_string());
        if replay.contend_class != crate::lab::contend::ContendClass::Normal {
            flag("--contend-class", replay.contend_class.as_str().to_string());
        }
    }
    a.push("--quiet".into());
    a.extend(["--corpus".into(), corpus.as_os_str().to_owned()]);
    a
}

/// The `[compare]` limits `--gate` judges by (`None` without `--gate`).
///
/// Errors: the budgets file unreadable, or without a `[compare]` table.
fn gate_budget(args: &CompareArgs) -> Result<Option<CompareBudget>> {
    if !args.gate {
        return Ok(None);
    }
    let budgets = crate::budgets::Budgets::load(&args.budgets)?;
    let b = budgets.compare.ok_or_else(|| {
        anyhow::anyhow!(
            "--gate: {} has no [compare] table of limits",
            args.budgets.display()
        )
    })?;
    Ok(Some(b))
}

/// Refuses, before any run, a comparison the gate could not judge against
/// `b`'s limits (another scale, rate, cycle count or round count, no
/// co-tenant, no baselines, a reference without tolerances or the reverse).
fn refuse_unjudgeable(args: &CompareArgs, b: &CompareBudget, rate: &str) -> Result<()> {
    // What the gate would refuse after the runs is refused before them.
    let mut wrong = Vec::new();
    if (args.replay.scale - b.scale).abs() > 1e-9 {
        wrong.push(format!(
            "--scale {} (limits measured at {})",
            args.replay.scale, b.scale
        ));
    }
    if rate != b.rate {
        wrong.push(format!("rate {rate} (limits measured at {})", b.rate));
    }
    if args.replay.cycles != Some(b.cycles) {
        wrong.push(format!(
            "--cycles {} (limits measured over {})",
            args.replay
                .cycles
                .map_or("all".to_string(), |c| c.to_string()),
            b.cycles
        ));
    }
    if args.replay.cotenant == crate::lab::CoTenantMode::Off {
        wrong.push("--cotenant off (the gate judges the co-tenant probe)".to_string());
    }
    if args.fleet_only {
        wrong.push("--fleet-only (the gate compares with the baselines)".to_string());
    }
    if let Some(r) = args.rounds.filter(|r| *r != b.rounds) {
        wrong.push(format!(
            "--rounds {r} (the gate's sign test is set for {})",
            b.rounds
        ));
    }
    if let Err(e) = crate::compare_rounds::validate(b) {
        wrong.push(e);
    }
    match (&b.reference, &args.reference) {
        (Some(_), None) => wrong.push(
            "no --reference (the [compare.reference] table pairs each round's fleet with a reference build: give the build ci/reference-lab.sh prints, or `self`)".to_string(),
        ),
        (None, Some(_)) => wrong.push(
            "--reference without a [compare.reference] table (no tolerances to judge the pairs by)".to_string(),
        ),
        _ => {}
    }
    if !wrong.is_empty() {
        anyhow::bail!(
            "--gate: this run cannot be judged against {}'s [compare] limits: {}",
            args.budgets.display(),
            wrong.join("; ")
        );
    }
    Ok(())
}

/// What the rounds measured: each round's reports and sim-latency
/// histograms in table order, and the order each round ran in.
struct Rounds {
    all: Vec<Vec<RunReport>>,
    sims: Vec<Vec<Option<hdrhistogram::Histogram<u64>>>>,
    order: Vec<Vec<String>>,
    floors: Vec<crate::compare_floor::FloorRound>,
}

/// Runs `rounds` rounds of every contender of `table` (and the host floor,
/// a slot of its own in the rotation, unless `--no-host-floor`), each
/// round in an order rotated from the last, and measures the paired
/// blocks after each round when a reference is given.
fn run_rounds(
    args: &CompareArgs,
    table: &[Contender],
    rounds: u32,
    path: &std::path::Path,
    corpus: &fleet_workloads::Corpus,
    paired: &mut Option<crate::compare_paired::RoundPairs>,
) -> Result<Rounds> {
    let mut all: Vec<Vec<RunReport>> = Vec::new();
    let mut all_sims = Vec::new();
    let mut order = Vec::new();
    let mut floors = Vec::new();
    let mut slots: Vec<Option<Contender>> = table.iter().copied().map(Some).collect();
    if !args.no_host_floor {
        slots.push(None);
    }
    for round in 0..rounds {
        let ran = crate::compare_rounds::rotated(&slots, round);
        order.push(
            ran.iter()
                .map(|c| c.map_or(lab::floor::FLOOR_LABEL.to_string(), |c| c.label()))
                .collect::<Vec<_>>(),
        );
        let mut by_contender = Vec::new();
        for (position, slot) in ran.into_iter().enumerate() {
            let Some(contender) = slot else {
                let spec = args.replay.spec(table[0], path.to_path_buf())?;
                let f = lab::floor::host_floor(&spec, corpus)
                    .with_context(|| format!("the host floor (round {})", round + 1))?;
                floors.push(crate::compare_floor::FloorRound::of(
                    round + 1,
                    position as u32 + 1,
                    &f,
                ));
                continue;
            };
            let mut spec = args.replay.spec(contender, path.to_path_buf())?;
            if matches!(contender, Contender::Fleet(_)) {
                spec.injection.slowdown = args.inject_fleet_slowdown;
            }
            let a = lab::run(&spec, corpus)
                .with_context(|| format!("{} run (round {})", contender.label(), round + 1))?;
            let sim = a
                .logs
                .iter()
                .find(|l| l.file_name == Metric::SimLatency.file_name())
                .and_then(|l| read_log_histogram(&l.bytes).ok());
            by_contender.push((contender, a.report, sim));
        }
        // Table order, whatever order the round ran in.
        by_contender.sort_by_key(|(c, _, _)| table.iter().position(|t| t == c));
        let (runs, sims): (Vec<_>, Vec<_>) =
            by_contender.into_iter().map(|(_, r, s)| (r, s)).unzip();
        all.push(runs);
        all_sims.push(sims);
        if let Some(p) = paired.as_mut() {
            let pair = p
                .measure(round)
                .with_context(|| format!("the paired blocks of round {}", round + 1))?;
            if !args.replay.quiet {
                println!(
                    "  round {}: fleet auto against the reference ({} first): mean makespan {:.2} ÷ {:.2} ms = {:.3}, co-tenant p99 {:.3}",
                    round + 1,
                    match pair.first {
                        crate::paired::Arm::Candidate => "candidate",
                        crate::paired::Arm::Reference => "reference",
                    },
                    pair.candidate.makespan_mean_ms,
                    pair.reference.makespan_mean_ms,
                    pair.ratio(),
                    crate::compare_paired::cotenant_ratio(pair)
                );
            }
        }
    }
    Ok(Rounds {
        all,
        sims: all_sims,
        order,
        floors,
    })
}

/// Prints the timer slack of each contender's threads.
fn print_timer_slack(runs: &[RunReport]) {
    println!("  timer slack of each contender's threads (ns × threads, the median round):");
    for r in runs {
        let slack: Vec<String> = r
            .timer_slack_ns
            .iter()
            .map(|(ns, n)| format!("{ns} × {n}"))
            .collect();
        let slack = if slack.is_empty() {
            "-".to_string()
        } else {
            slack.join(", ")
        };
        println!("    {:<14} {slack}", r.label);
    }
}

/// Judges the rounds (and the paired blocks, with a reference) against the
/// `[compare]` limits; prints the reported standing.
///
/// Errors: a breached limit (the gate fails), or the paired figures
/// unwritable.
fn judge_gate(
    args: &CompareArgs,
    b: &CompareBudget,
    all: &[Vec<RunReport>],
    rate: &str,
    paired: Option<crate::compare_paired::RoundPairs>,
) -> Result<()> {
    let breaches = crate::compare_rounds::check_rounds(all, b, args.replay.scale, rate);
    let (mut breaches, reported) = crate::compare_rounds::split_standing(breaches, b);
    if let (Some(p), Some(t)) = (paired, b.reference) {
        let (found, rounds) = crate::compare_paired::judge(p.finish(), t, b.alpha);
        print!("{}", crate::compare_paired::render(&rounds));
        let json = serde_json::to_vec_pretty(&rounds)?;
        std::fs::write(args.out.join(PAIRED_JSON), json)
            .with_context(|| format!("cannot write {}", args.out.join(PAIRED_JSON).display()))?;
        breaches.extend(found);
    }
    if !reported.is_empty() || b.standing == crate::compare_gate::Standing::Report {
        println!(
            "compare standing (reported, not gated: docs/gates.md \"The comparison\"): {}",
            if reported.is_empty() {
                "within every limit"
            } else {
                "over a limit"
            }
        );
    }
    for r in &reported {
        println!("  standing {r}");
    }
    crate::cmd::gate::judge("compare gate", &b.description, &breaches)?;
    Ok(())
}

/// `fleet-lab compare`.
/// The banner's words on `--contend` (empty without it).
fn contention_note(replay: &crate::cmd::run::ReplayArgs) -> String {
    if replay.contend == 0 {
        return String::new();
    }
    format!(
        ", {} busy threads ({} class) in a separate process",
        replay.contend,
        replay.contend_class.as_str()
    )
}

pub fn run(args: CompareArgs) -> Result<()> {
    args.replay.validate()?;
    let budget = gate_budget(&args)?;
    let rate = match args.replay.interval_ms {
        Some(ms) => format!("interval {ms} ms"),
        None => args.replay.rate().as_str().to_string(),
    };
    if let Some(b) = &budget {
        refuse_unjudgeable(&args, b, &rate)?;
    }
    let rounds = args
        .rounds
        .or(budget.as_ref().map(|b| b.rounds))
        .unwrap_or(DEFAULT_ROUNDS);
    crate::report::check_out_dir(&args.out, args.force)?;
    let (path, corpus) = args.replay.load_corpus()?;
    let interval_ms = args
        .replay
        .interval_us()
        .unwrap_or(corpus.header.cycle_interval_us) as f64
        * args.replay.scale
        / 1e3;
    println!(
        "compare: {rounds} round(s), scale {}, {} cycles, rate {rate} (a cycle every {interval_ms:.0} ms), co-tenant {}{}",
        args.replay.scale,
        args.replay
            .cycles
            .map_or(corpus.cycles.len(), |c| (c as usize).min(corpus.cycles.len())),
        args.replay.cotenant.as_str(),
        contention_note(&args.replay)
    );
    let mut paired = match &args.reference {
        Some(r) => Some(start_pairs(&args, r, &path, budget.as_ref())?),
        None => None,
    };
    let table = contenders(args.fleet_only, budget.is_some());
    // Held until the comparison's end, so the host state read then is it.
    let _halt_poll = set_halt_poll(&args)?;
    let wake_us = args.awake_wake_us.unwrap_or(HOST_AWAKE_WAKE_US);
    let waker = start_waker(args.host_awake, wake_us)?;
    let watch = crate::probe::hoststate::HostWatch::begin();
    let Rounds {
        all,
        sims: all_sims,
        order,
        floors,
    } = run_rounds(&args, &table, rounds, &path, &corpus, &mut paired)?;
    let shown = crate::compare_rounds::median_round(&all);
    let runs = all[shown].clone();
    if rounds > 1 {
        println!(
            "The median round (round {} of {rounds}, by fleet auto's makespan p99):",
            shown + 1
        );
    }
    print!("{}{}", render_compare_table(&runs), render_verdict(&runs));
    if rounds > 1 {
        print!("{}", crate::compare_rounds::render_rounds(&all));
    }
    print!("{}", crate::compare_floor::render_floor(&all, &floors));
    let mut host = watch.finish();
    host.awake_wake_us = waker.map(|w| {
        w.stop();
        wake_us
    });
    print!("{}", host.render());
    print_timer_slack(&runs);
    crate::compare_sims::print_sim_bounds(&table, &runs);
    let compare = CompareReport {
        runs,
        rounds: crate::compare_rounds::figures(&all, &order),
        host: Some(host),
        host_floor: floors,
    };
    write_compare_dir(&args.out, &compare, &all_sims[shown])
        .with_context(|| format!("cannot write the compare report to {}", args.out.display()))?;
    println!("report: {}", args.out.join("report.html").display());
    if let Some(b) = &budget {
        judge_gate(&args, b, &all, &rate, paired)?;
    }
    let lost: Vec<String> = all
        .iter()
        .flatten()
        .filter(|r| !r.parity)
        .map(|r| r.label.clone())
        .collect();
    if !lost.is_empty() {
        anyhow::bail!("parity failed for: {}", lost.join(", "));
    }
    Ok(())
}
