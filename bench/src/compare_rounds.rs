//! The comparison in rounds: every contender once per round, in an order
//! rotated round by round, so no contender always runs first (on a host
//! whose first runs were the slow ones, the fleet always ran first). Each
//! figure is reported as its median over rounds with the min–max spread,
//! and the fleet's standing as the paired per-round ratio fleet auto ÷
//! each baseline (both runs of a ratio come from the same round, minutes
//! apart at most).
//!
//! The gate ([`check_rounds`]) judges deterministic figures (parity,
//! threads created, saturation, the run's conditions) in every round, and
//! each host-dependent limit ([`OVER_ROUNDS`]) by an exact sign test over the rounds
//! ([`crate::paired::sign`]): it fails when so many rounds are over the
//! limit that a fleet whose per-round ratio sits at the limit would do so
//! with probability at most `alpha`.

use serde::{Deserialize, Serialize};

use crate::compare_gate::{check_compare, CompareBudget, Standing};
use crate::gate::Breach;
use crate::paired::sign::{binomial_half_upper_tail, critical_count};
use crate::report::RunReport;

/// The limits of `[compare]` whose figures depend on the host's timing,
/// judged over rounds, not per round: the three timed ratios, and the peak
/// of runnable threads, which is sampled (`/proc/self/task` read one
/// thread at a time every millisecond, so a sample can count a thread
/// that was runnable a moment before the next one was); one round of five
/// in CI saw ⌊Q⌋ + 2 where the others saw ⌊Q⌋ + 1.
pub const OVER_ROUNDS: [&str; 4] = [
    "cotenant_p99_over_every_baseline_max",
    "makespan_p99_over_best_baseline_max",
    "makespan_p99_over_pile_max",
    "peak_runnable_over_floor_quota_max",
];

/// One contender's figures in one round (what `compare.json` keeps of
/// every round; the full reports are the median round's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundFigure {
    /// The round, from 1.
    pub round: u32,
    /// Where in the round it ran, from 1.
    pub position: u32,
    /// The contender.
    pub label: String,
    /// Cycle makespan p99, ms.
    pub makespan_p99_ms: f64,
    /// Cycle makespan median, ms.
    pub makespan_p50_ms: f64,
    /// The co-tenant probe's p99 lateness, µs.
    pub cotenant_p99_us: Option<f64>,
    /// Times the lend guard took the cycle threads back from the idle
    /// class in this run (decisions 0009, 0022); `null` for a run that did
    /// not lend, and in older reports.
    #[serde(default)]
    pub lent_promotions: Option<u64>,
}

/// A median with its spread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = f.precision().unwrap_or(2);
        write!(f, "{:.p$} ({:.p$}–{:.p$})", self.median, self.min, self.max)
    }
}

/// The median and min–max of `values` (`None` when empty or not finite).
pub fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// `items` rotated left by `round` (round 0 is the given order): over
/// `items.len()` rounds each item runs in each position once.
pub fn rotated<T: Clone>(items: &[T], round: u32) -> Vec<T> {
    if items.is_empty() {
        return Vec::new();
    }
    let k = round as usize % items.len();
    items[k..].iter().chain(&items[..k]).cloned().collect()
}

/// The compact figures of every round; `order[r]` lists round `r`'s labels
/// in the order they ran, `rounds[r]` its reports in table order.
pub fn figures(rounds: &[Vec<RunReport>], order: &[Vec<String>]) -> Vec<RoundFigure> {
    let mut out = Vec::new();
    for (r, runs) in rounds.iter().enumerate() {
        for run in runs {
            let position = order
                .get(r)
                .and_then(|o| o.iter().position(|l| *l == run.label))
                .map_or(0, |p| p as u32 + 1);
            out.push(RoundFigure {
                round: r as u32 + 1,
                position,
                label: run.label.clone(),
                makespan_p99_ms: run.makespan_ms.p99,
                makespan_p50_ms: run.makespan_ms.p50,
                cotenant_p99_us: run.cotenant_lateness_us.map(|l| l.p99),
                lent_promotions: run.lent_reserve.map(|l| l.promotions),
            });
        }
    }
    out
}

/// The index of the round whose fleet auto makespan p99 is the median
/// (the lower middle for an even count): the round the page shows.
pub fn median_round(rounds: &[Vec<RunReport>]) -> usize {
    let mut p: Vec<(f64, usize)> = rounds
        .iter()
        .enumerate()
        .map(|(i, runs)| {
            let f = runs.iter().find(|r| r.label == "fleet auto");
            (f.map_or(f64::INFINITY, |r| r.makespan_ms.p99), i)
        })
        .collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    p.get(p.len().saturating_sub(1) / 2).map_or(0, |x| x.1)
}

/// The rounds' table: each contender's figures as median (min–max) over
/// rounds, then fleet auto ÷ each baseline paired per round.
pub fn render_rounds(rounds: &[Vec<RunReport>]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let Some(first) = rounds.first() else {
        return out;
    };
    let _ = writeln!(
        out,
        "\nRounds: {} (each contender once per round, the order rotated each round); median (min–max) over rounds:",
        rounds.len()
    );
    let _ = writeln!(
        out,
        "  {:<16} {:>26} {:>26}",
        "contender", "makespan p99 ms", "co-tenant p99 µs"
    );
    let of = |label: &str, f: &dyn Fn(&RunReport) -> Option<f64>| -> Vec<f64> {
        rounds
            .iter()
            .filter_map(|runs| runs.iter().find(|r| r.label == label).and_then(f))
            .collect()
    };
    let p99 = |r: &RunReport| Some(r.makespan_ms.p99);
    let co = |r: &RunReport| r.cotenant_lateness_us.map(|l| l.p99);
    for run in first {
        let m = spread(&of(&run.label, &p99)).map_or("-".into(), |s| format!("{s:.1}"));
        let c = spread(&of(&run.label, &co)).map_or("-".into(), |s| format!("{s:.0}"));
        let _ = writeln!(out, "  {:<16} {:>26} {:>26}", run.label, m, c);
    }
    let _ = write!(out, "{}", promotions_line(rounds));
    let _ = writeln!(
        out,
        "Paired per round, fleet auto ÷ each baseline, median (min–max):"
    );
    for base in first.iter().filter(|r| r.profile == "baseline") {
        let ratio = |f: &dyn Fn(&RunReport) -> Option<f64>| -> Vec<f64> {
            rounds
                .iter()
                .filter_map(|runs| {
                    let fl = runs.iter().find(|r| r.label == "fleet auto").and_then(f)?;
                    let b = runs.iter().find(|r| r.label == base.label).and_then(f)?;
                    (b > 0.0).then(|| fl / b)
                })
                .collect()
        };
        let m = spread(&ratio(&p99)).map_or("-".into(), |s| format!("{s:.2}"));
        let c = spread(&ratio(&co)).map_or("-".into(), |s| format!("{s:.2}"));
        let _ = writeln!(
            out,
            "  ÷ {:<14} makespan p99 {:<20} co-tenant p99 {}",
            base.label, m, c
        );
    }
    out
}

/// The lend guard's promotions of fleet auto in each round, one line, or
/// nothing when no round's fleet auto lent its reserve.
fn promotions_line(rounds: &[Vec<RunReport>]) -> String {
    let per_round: Vec<String> = rounds
        .iter()
        .map(|runs| {
            runs.iter()
                .find(|r| r.label == "fleet auto")
                .and_then(|r| r.lent_reserve)
                .map_or("-".into(), |l| l.promotions.to_string())
        })
        .collect();
    if per_round.iter().all(|p| p == "-") {
        return String::new();
    }
    format!(
        "  fleet auto's lend guard, promotions per round (decision 0022): {}\n",
        per_round.join(", ")
    )
}

/// The timed standing limits (fleet ÷ the baselines) among [`OVER_ROUNDS`].
pub const STANDING: [&str; 3] = [
    "cotenant_p99_over_every_baseline_max",
    "makespan_p99_over_best_baseline_max",
    "makespan_p99_over_pile_max",
];

/// Splits [`check_rounds`]'s breaches into what fails the gate and what is
/// only reported: with [`Standing::Report`] the standing limits
/// ([`STANDING`]) are reported; every other breach fails.
pub fn split_standing(breaches: Vec<Breach>, b: &CompareBudget) -> (Vec<Breach>, Vec<Breach>) {
    match b.standing {
        Standing::Gate => (breaches, Vec::new()),
        Standing::Report => breaches
            .into_iter()
            .partition(|br| !STANDING.contains(&br.budget)),
    }
}

/// Checks `b`'s rounds and level can make a gate that can fail.
pub fn validate(b: &CompareBudget) -> Result<(), String> {
    if !(b.alpha > 0.0 && b.alpha < 1.0) {
        return Err(format!("[compare] alpha {} must be in (0, 1)", b.alpha));
    }
    if critical_count(b.rounds, b.alpha).is_none() {
        return Err(format!(
            "[compare] rounds {}: even every round over a limit has P = 2^-{} > alpha {}, so the gate could never fail",
            b.rounds, b.rounds, b.alpha
        ));
    }
    if let Some(t) = &b.reference {
        t.validate()?;
    }
    Ok(())
}

/// Judges the rounds of one comparison against `b` (see the module doc);
/// empty when the fleet holds its standing.
pub fn check_rounds(
    rounds: &[Vec<RunReport>],
    b: &CompareBudget,
    scale: f64,
    rate: &str,
) -> Vec<Breach> {
    let n = rounds.len() as u32;
    let per_round: Vec<Vec<Breach>> = rounds
        .iter()
        .map(|runs| check_compare(runs, b, scale, rate))
        .collect();
    let mut out: Vec<Breach> = Vec::new();
    for (i, breaches) in per_round.iter().enumerate() {
        for br in breaches
            .iter()
            .filter(|br| !OVER_ROUNDS.contains(&br.budget))
        {
            if !out.iter().any(|o| o.budget == br.budget) {
                out.push(Breach {
                    budget: br.budget,
                    detail: format!("round {}: {}", i + 1, br.detail),
                });
            }
        }
    }
    for kind in OVER_ROUNDS {
        let over: Vec<(usize, &Breach)> = per_round
            .iter()
            .enumerate()
            .filter_map(|(i, bs)| bs.iter().find(|br| br.budget == kind).map(|br| (i, br)))
            .collect();
        let k = over.len() as u32;
        let p = binomial_half_upper_tail(n, k);
        if k > 0 && p <= b.alpha {
            out.push(Breach {
                budget: kind,
                detail: format!(
                    "over the limit in {k} of {n} rounds (sign test p = {p:.4} ≤ alpha {}); round {}: {}",
                    b.alpha,
                    over[0].0 + 1,
                    over[0].1.detail
                ),
            });
        }
    }
    if n == 0 {
        out.push(Breach {
            budget: "contenders",
            detail: "no round ran".into(),
        });
    }
    out
}

#[cfg(test)]
#[path = "compare_rounds_tests.rs"]
mod tests;
