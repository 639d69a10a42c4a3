//! The comparison gate: `fleet-lab compare --gate` fails when the fleet
//! loses the comparison it exists for (`ci/budgets.toml` `[compare]`).
//!
//! The fleet (`fleet auto`) is set against every design it replaces in the
//! same run, on the same cores, input and co-tenant: its co-tenant probe
//! p99 against every baseline's, its cycle p99 against the best baseline's
//! and the pile of pools', its threads created per cycle and its peak
//! runnable threads against ⌊Q⌋ + 1 (`DESIGN.md` §3 "Budget": the fleet
//! never has more runnable threads than the cores it plans for plus the
//! reserve's one). A saturated fleet run or a failed parity always fails.

use serde::Deserialize;

use crate::gate::Breach;
use crate::report::RunReport;

/// The `[compare]` budgets.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CompareBudget {
    /// What the gate is, for people.
    pub description: String,
    /// The scale the limits were measured at (a run at another scale fails:
    /// the limits do not carry over).
    pub scale: f64,
    /// Cycles the CI step replays per contender.
    pub cycles: u32,
    /// The arrival rate the limits were measured at (`live` or `stress`).
    pub rate: String,
    /// Limit on fleet co-tenant probe p99 ÷ each baseline's.
    pub cotenant_p99_over_every_baseline_max: f64,
    /// Limit on fleet makespan p99 ÷ the best baseline's.
    pub makespan_p99_over_best_baseline_max: f64,
    /// Limit on fleet makespan p99 ÷ the pile of pools'.
    pub makespan_p99_over_pile_max: f64,
    /// Limit on the fleet's OS threads created per cycle.
    pub threads_created_per_cycle_max: f64,
    /// Limit on the fleet's peak runnable threads above ⌊Q⌋.
    pub peak_runnable_over_floor_quota_max: u64,
    /// Rounds the gate runs (each contender once per round, the order
    /// rotated; [`crate::compare_rounds`]).
    pub rounds: u32,
    /// The level of the sign test over rounds each timed limit is judged by.
    pub alpha: f64,
    /// Whether the fleet's timed standing against the baselines (the three
    /// ratio limits) fails the gate (`gate`, the default) or is printed
    /// and kept in the report only (`report`): the standing moves with the
    /// host's state, so CI reports it (docs/gates.md "The comparison").
    #[serde(default)]
    pub standing: Standing,
    /// `[compare.reference]`: with it, `--gate` pairs each round's fleet
    /// with a reference build's ([`crate::compare_paired`]) and needs
    /// `--reference`.
    #[serde(default)]
    pub reference: Option<crate::compare_paired::ReferenceTolerances>,
}

/// What the comparison does with the fleet's timed standing.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Standing {
    /// A standing limit over in enough rounds fails the gate.
    #[default]
    Gate,
    /// Printed and reported, never a failure.
    Report,
}

/// The label of the pile-of-pools baseline's run.
const PILE: &str = "pile of pools";

/// Checks one compare run's reports (the fleet's labelled `fleet auto`,
/// the baselines with profile `baseline`) against `b`, for a run made at
/// `scale` and `rate`; empty when the fleet wins within the limits.
pub fn check_compare(runs: &[RunReport], b: &CompareBudget, scale: f64, rate: &str) -> Vec<Breach> {
    let mut out = Vec::new();
    let breach = |budget: &'static str, detail: String| Breach { budget, detail };
    if (scale - b.scale).abs() > 1e-9 || rate != b.rate {
        out.push(breach(
            "conditions",
            format!(
                "the limits were measured at scale {} and rate {}; this run used scale {scale} and rate {rate}",
                b.scale, b.rate
            ),
        ));
    }
    for r in runs.iter().filter(|r| !r.parity) {
        out.push(breach(
            "parity",
            format!(
                "{} produced outcomes that differ from the golden corpus",
                r.label
            ),
        ));
    }
    let Some(fleet) = runs.iter().find(|r| r.label == "fleet auto") else {
        out.push(breach("contenders", "no fleet auto run to judge".into()));
        return out;
    };
    let baselines: Vec<&RunReport> = runs.iter().filter(|r| r.profile == "baseline").collect();
    if baselines.is_empty() {
        out.push(breach(
            "contenders",
            "no baseline ran: nothing to compare the fleet with".into(),
        ));
        return out;
    }
    if let Some(sat) = &fleet.saturation {
        out.push(breach(
            "saturation",
            format!(
                "fleet auto saturated from cycle {}: the last cycle started {:.0} ms late",
                sat.since_cycle, sat.last_late_ms
            ),
        ));
    }
    cotenant_breaches(fleet, &baselines, b, &mut out);
    makespan_breaches(fleet, &baselines, b, &mut out);
    thread_breaches(fleet, b, &mut out);
    out
}

/// The fleet's co-tenant probe p99 against every baseline's.
fn cotenant_breaches(
    fleet: &RunReport,
    baselines: &[&RunReport],
    b: &CompareBudget,
    out: &mut Vec<Breach>,
) {
    let breach = |budget: &'static str, detail: String| Breach { budget, detail };
    match fleet.cotenant_lateness_us {
        None => out.push(breach(
            "cotenant_p99_over_every_baseline_max",
            "the co-tenant probe did not run (--cotenant off): nothing to judge".into(),
        )),
        Some(f) => {
            for base in baselines {
                match base.cotenant_lateness_us {
                    Some(o) if o.p99 > 0.0 => {
                        let r = f.p99 / o.p99;
                        if r > b.cotenant_p99_over_every_baseline_max {
                            out.push(breach(
                                "cotenant_p99_over_every_baseline_max",
                                format!(
                                    "fleet auto {:.0} µs ÷ {} {:.0} µs = {r:.2} > limit {:.2}",
                                    f.p99,
                                    base.label,
                                    o.p99,
                                    b.cotenant_p99_over_every_baseline_max
                                ),
                            ));
                        }
                    }
                    _ => out.push(breach(
                        "cotenant_p99_over_every_baseline_max",
                        format!("{} has no co-tenant figure to compare with", base.label),
                    )),
                }
            }
        }
    }
}

/// The fleet's makespan p99 against the best baseline's and the pile of
/// pools'.
fn makespan_breaches(
    fleet: &RunReport,
    baselines: &[&RunReport],
    b: &CompareBudget,
    out: &mut Vec<Breach>,
) {
    let breach = |budget: &'static str, detail: String| Breach { budget, detail };
    let p99 = |r: &RunReport| r.makespan_ms.p99;
    if let Some(best) = baselines.iter().min_by(|a, b| p99(a).total_cmp(&p99(b))) {
        let r = p99(fleet) / p99(best).max(1e-9);
        if r > b.makespan_p99_over_best_baseline_max {
            out.push(breach(
                "makespan_p99_over_best_baseline_max",
                format!(
                    "fleet auto {:.1} ms ÷ {} {:.1} ms = {r:.2} > limit {:.2}",
                    p99(fleet),
                    best.label,
                    p99(best),
                    b.makespan_p99_over_best_baseline_max
                ),
            ));
        }
    }
    match baselines.iter().find(|r| r.label == PILE) {
        Some(pile) => {
            let r = p99(fleet) / p99(pile).max(1e-9);
            if r > b.makespan_p99_over_pile_max {
                out.push(breach(
                    "makespan_p99_over_pile_max",
                    format!(
                        "fleet auto {:.1} ms ÷ pile of pools {:.1} ms = {r:.2} > limit {:.2}",
                        p99(fleet),
                        p99(pile),
                        b.makespan_p99_over_pile_max
                    ),
                ));
            }
        }
        None => out.push(breach("contenders", "the pile of pools did not run".into())),
    }
}

/// The fleet's threads created per cycle and its peak runnable threads
/// against ⌊Q⌋ + the limit.
fn thread_breaches(fleet: &RunReport, b: &CompareBudget, out: &mut Vec<Breach>) {
    let breach = |budget: &'static str, detail: String| Breach { budget, detail };
    let per_cycle = fleet.threads.created_during_run as f64 / fleet.cycles.max(1) as f64;
    if per_cycle > b.threads_created_per_cycle_max {
        out.push(breach(
            "threads_created_per_cycle_max",
            format!(
                "fleet auto {per_cycle:.2} > limit {:.2}",
                b.threads_created_per_cycle_max
            ),
        ));
    }
    let floor_q = fleet
        .machine
        .quota
        .unwrap_or(fleet.machine.cpus as f64)
        .floor() as u64;
    let cap = floor_q + b.peak_runnable_over_floor_quota_max;
    if fleet.threads.peak_runnable > cap {
        out.push(breach(
            "peak_runnable_over_floor_quota_max",
            format!(
                "fleet auto peaked at {} runnable threads > ⌊Q⌋ {floor_q} + {}",
                fleet.threads.peak_runnable, b.peak_runnable_over_floor_quota_max
            ),
        ));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::lab::Lateness;
    use crate::report::sample::{sample_run, SampleShape};

    /// Limits for the tests (also `compare_rounds`'): co-tenant 0.5,
    /// ÷best 1.2, ÷pile 1.0, 5 rounds at alpha 0.05, standing gated.
    pub(crate) fn budget() -> CompareBudget {
        CompareBudget {
            description: "t".into(),
            scale: 0.1,
            cycles: 10,
            rate: "stress".into(),
            cotenant_p99_over_every_baseline_max: 0.5,
            makespan_p99_over_best_baseline_max: 1.2,
            makespan_p99_over_pile_max: 1.0,
            threads_created_per_cycle_max: 0.0,
            peak_runnable_over_floor_quota_max: 1,
            rounds: 5,
            alpha: 0.05,
            standing: Standing::Gate,
            reference: None,
        }
    }

    /// A run of `label` at cycle p99 `p99_ms` and co-tenant p99
    /// `cotenant_p99_us`, on a 2-core quota; a baseline created 500 threads.
    pub(crate) fn run(label: &str, baseline: bool, p99_ms: f64, cotenant_p99_us: f64) -> RunReport {
        let mut r = sample_run(label, SampleShape::FLEET, 10, 0.1, 1);
        r.label = label.into();
        r.profile = if baseline { "baseline" } else { "auto" }.into();
        r.makespan_ms.p99 = p99_ms;
        r.cotenant_lateness_us = Some(Lateness {
            p99: cotenant_p99_us,
            ..Default::default()
        });
        r.threads.created_during_run = if baseline { 500 } else { 0 };
        r.threads.peak_runnable = 3;
        r.machine.quota = Some(2.0);
        r
    }

    fn field() -> Vec<RunReport> {
        vec![
            run("fleet auto", false, 50.0, 100.0),
            run("pile of pools", true, 55.0, 900.0),
            run("plain tokio", true, 45.0, 1500.0),
        ]
    }

    #[test]
    fn a_fleet_that_wins_within_the_limits_passes() {
        let v = check_compare(&field(), &budget(), 0.1, "stress");
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_slowed_fleet_fails_on_its_cycle_tail() {
        let mut runs = field();
        // 1.5× slower: 75 ms against plain tokio's 45 and the pile's 55.
        runs[0].makespan_ms.p99 *= 1.5;
        let names: Vec<_> = check_compare(&runs, &budget(), 0.1, "stress")
            .iter()
            .map(|b| b.budget)
            .collect();
        assert_eq!(
            names,
            [
                "makespan_p99_over_best_baseline_max",
                "makespan_p99_over_pile_max"
            ]
        );
    }

    #[test]
    fn a_fleet_that_delays_the_host_fails_on_the_cotenant() {
        let mut runs = field();
        runs[0].cotenant_lateness_us.as_mut().unwrap().p99 = 600.0;
        let v = check_compare(&runs, &budget(), 0.1, "stress");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("pile of pools"), "{}", v[0].detail);
    }

    #[test]
    fn saturation_threads_runnable_parity_and_conditions_each_fail_by_name() {
        let mut runs = field();
        runs[0].saturation = Some(crate::report::SaturationFigures {
            since_cycle: 3,
            since_ms: 300.0,
            last_late_ms: 900.0,
            backlog_cycles: 9.0,
            streak_cycles: 7,
        });
        runs[0].threads.created_during_run = 5;
        runs[0].threads.peak_runnable = 4;
        runs[2].parity = false;
        let names: Vec<_> = check_compare(&runs, &budget(), 0.2, "live")
            .iter()
            .map(|b| b.budget)
            .collect();
        assert_eq!(
            names,
            [
                "conditions",
                "parity",
                "saturation",
                "threads_created_per_cycle_max",
                "peak_runnable_over_floor_quota_max"
            ]
        );
    }

    #[test]
    fn missing_contenders_or_figures_fail_instead_of_passing() {
        let runs = field();
        let v = check_compare(&runs[1..], &budget(), 0.1, "stress");
        assert_eq!(v[0].budget, "contenders");
        let v = check_compare(&runs[..1], &budget(), 0.1, "stress");
        assert_eq!(v[0].budget, "contenders");
        let mut runs = field();
        runs[0].cotenant_lateness_us = None;
        let v = check_compare(&runs, &budget(), 0.1, "stress");
        assert_eq!(v[0].budget, "cotenant_p99_over_every_baseline_max");
    }
}
