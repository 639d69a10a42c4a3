//! Figures over several seeds: each scenario's headline figures per
//! contender as a median with its min–max, the router's paired record
//! against each other contender (same world, same seed), and the
//! `adapter-bug` check of the bug world against its control.
//!
//! One seed is one draw of the world and of every decision; a figure that
//! holds at one seed is not yet a result (docs/routing-lab.md, "Over
//! seeds").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ledger::Cause;
use super::report::{ContenderReport, SimReport};
use super::stats::{mann_whitney_less, median, MannWhitney, Spread};

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    /// Smaller is better (regret, violations, delays).
    Lower,
    /// Larger is better (correct rows, AUC, occupancy).
    Higher,
}

/// One headline figure of a scenario and how to read it from a report.
#[derive(Debug, Clone, Copy)]
pub struct Headline {
    /// The scenario's command-line name.
    pub scenario: &'static str,
    /// The figure's name in the tables.
    pub figure: &'static str,
    /// Which way is better.
    pub better: Better,
    /// Reads the figure (`None` when the run has none, e.g. no liars).
    pub read: fn(&ContenderReport) -> Option<f64>,
}

fn regret_per_k(c: &ContenderReport) -> Option<f64> {
    Some(1000.0 * c.regret_total / c.attempts.max(1) as f64)
}

fn politeness(c: &ContenderReport) -> Option<f64> {
    Some(c.politeness_violations as f64)
}

fn bug_losses(c: &ContenderReport) -> Option<f64> {
    c.event.devices_lower_than_before.map(|_| {
        c.event
            .lower_devices
            .iter()
            .flat_map(|d| &d.losses)
            .filter(|l| matches!(l.cause, Cause::Bug | Cause::Unexplained))
            .count() as f64
    })
}

fn events_elsewhere(c: &ContenderReport) -> Option<f64> {
    c.event.devices_lower_than_before.map(|_| {
        c.event
            .adapter_events
            .iter()
            .filter(|e| e.1 != "src-1")
            .count() as f64
    })
}

fn over_cap(c: &ContenderReport) -> Option<f64> {
    (!c.budget.caps.is_empty()).then(|| c.budget.over_cap.values().sum::<u64>() as f64)
}

/// The headline figures, per scenario in report order: what each scenario
/// is built to show (docs/routing-lab.md, the lab's bars).
pub const HEADLINES: &[Headline] = &[
    Headline {
        scenario: "steady",
        figure: "regret per 1,000 attempts",
        better: Better::Lower,
        read: regret_per_k,
    },
    Headline {
        scenario: "steady",
        figure: "politeness violations",
        better: Better::Lower,
        read: politeness,
    },
    Headline {
        scenario: "drought",
        figure: "re-route delay, s",
        better: Better::Lower,
        read: |c| c.event.reroute_delay_s,
    },
    Headline {
        scenario: "drought",
        figure: "occupancy during the drought",
        better: Better::Higher,
        read: |c| c.event.occupancy_during,
    },
    Headline {
        scenario: "regime-change",
        figure: "blocked-archetype attempts after",
        better: Better::Lower,
        read: |c| c.event.blocked_attempts_after.map(|n| n as f64),
    },
    Headline {
        scenario: "regime-change",
        figure: "regret per 1,000 attempts",
        better: Better::Lower,
        read: regret_per_k,
    },
    Headline {
        scenario: "liars",
        figure: "correct-row fraction",
        better: Better::Higher,
        read: |c| Some(c.correct_fraction),
    },
    Headline {
        scenario: "liars",
        figure: "trust AUC honest vs lying",
        better: Better::Higher,
        read: |c| c.trust_auc,
    },
    Headline {
        scenario: "adapter-bug",
        figure: "trust losses from the bug",
        better: Better::Lower,
        read: bug_losses,
    },
    Headline {
        scenario: "adapter-bug",
        figure: "adapter events on sources without a bug",
        better: Better::Lower,
        read: events_elsewhere,
    },
    Headline {
        scenario: "budget-saturation",
        figure: "capped windows over their cap",
        better: Better::Lower,
        read: over_cap,
    },
    Headline {
        scenario: "budget-saturation",
        figure: "regret per 1,000 attempts",
        better: Better::Lower,
        read: regret_per_k,
    },
    Headline {
        scenario: "cold-start",
        figure: "regret per 1,000 attempts",
        better: Better::Lower,
        read: regret_per_k,
    },
];

/// The router's paired record against one other contender over the seeds
/// where both have the figure: seeds where the router was better, tied,
/// worse.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Seeds where the router's figure was better.
    pub router_better: usize,
    /// Seeds where the two were equal.
    pub tied: usize,
    /// Seeds where the router's figure was worse.
    pub router_worse: usize,
}

/// One figure of one contender over the seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Contender name.
    pub contender: String,
    /// The figure over seeds (`None` when no seed had it).
    pub spread: Option<Spread>,
    /// Against the router (absent for the router itself or without it).
    pub paired: Option<Paired>,
}

/// One headline figure over the seeds, every contender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Scenario.
    pub scenario: String,
    /// Figure.
    pub figure: String,
    /// Which way is better.
    pub better: Better,
    /// One per contender, in report order.
    pub cells: Vec<Cell>,
    /// The contenders with the best median (ties all listed).
    pub best: Vec<String>,
}

fn better_than(better: Better, a: f64, b: f64) -> bool {
    match better {
        Better::Lower => a < b,
        Better::Higher => a > b,
    }
}

/// The headlines of a world file that is not a shipped scenario
/// (`route sim --world FILE`): what any world shows, and, where it has
/// timed source changes, what they cost (rows no run has are left out).
pub const WORLD_HEADLINES: &[Headline] = &[
    Headline {
        scenario: "",
        figure: "regret per 1,000 attempts",
        better: Better::Lower,
        read: regret_per_k,
    },
    Headline {
        scenario: "",
        figure: "politeness violations",
        better: Better::Lower,
        read: politeness,
    },
    Headline {
        scenario: "",
        figure: "correct-row fraction",
        better: Better::Higher,
        read: |c| Some(c.correct_fraction),
    },
    Headline {
        scenario: "",
        figure: "attempts by archetypes a source change shut, while shut",
        better: Better::Lower,
        read: shut_attempts,
    },
    Headline {
        scenario: "",
        figure: "regret on changed sources while the changes held",
        better: Better::Lower,
        read: regret_after_changes,
    },
];

/// Over the world's timed source changes that shut an archetype out: the
/// attempts by those archetypes on the source while the change held.
/// `None` where no change shut one.
fn shut_attempts(c: &ContenderReport) -> Option<f64> {
    let shutting: Vec<_> = c
        .event
        .changes
        .iter()
        .filter(|f| !f.shut.is_empty())
        .collect();
    (!shutting.is_empty()).then(|| {
        shutting
            .iter()
            .map(|f| {
                crate::world::ARCHETYPES
                    .iter()
                    .zip(f.after)
                    .filter(|(a, _)| f.shut.iter().any(|s| s == *a))
                    .map(|(_, n)| n as f64)
                    .sum::<f64>()
            })
            .sum()
    })
}

/// Regret on each changed source while its change held, summed; `None`
/// without timed source changes.
fn regret_after_changes(c: &ContenderReport) -> Option<f64> {
    let ch = &c.event.changes;
    (!ch.is_empty()).then(|| {
        ch.iter()
            .map(|f| f.regret_after.failures + f.regret_after.cost)
            .sum()
    })
}

/// The rows of `runs` (one report per scenario and seed; a scenario's
/// runs must share their contenders), in [`HEADLINES`] order, for the
/// scenarios present; then, for each world that is not a shipped scenario
/// (in the order of its first run), the [`WORLD_HEADLINES`].
pub fn rows(runs: &[SimReport]) -> Vec<Row> {
    let mut out: Vec<Row> = HEADLINES
        .iter()
        .filter_map(|h| row_of(h, h.scenario, runs))
        .collect();
    let mut worlds: Vec<&str> = Vec::new();
    for r in runs {
        let shipped = HEADLINES.iter().any(|h| h.scenario == r.scenario);
        if !shipped && !worlds.contains(&r.scenario.as_str()) {
            worlds.push(&r.scenario);
        }
    }
    for w in worlds {
        // A figure no run of the world has (no source change) is left out.
        let has = |r: &Row| r.cells.iter().any(|c| c.spread.is_some());
        out.extend(
            WORLD_HEADLINES
                .iter()
                .filter_map(|h| row_of(h, w, runs))
                .filter(has),
        );
    }
    out
}

/// Headline `h`'s row over the runs of `scenario`; `None` without runs.
fn row_of(h: &Headline, scenario: &str, runs: &[SimReport]) -> Option<Row> {
    let per_seed: Vec<&SimReport> = runs.iter().filter(|r| r.scenario == scenario).collect();
    let first = per_seed.first()?;
    let names: Vec<String> = first.contenders.iter().map(|c| c.name.clone()).collect();
    // values[contender][seed], None where the run lacks the figure.
    let values: Vec<Vec<Option<f64>>> = names
        .iter()
        .map(|n| {
            per_seed
                .iter()
                .map(|r| r.contenders.iter().find(|c| &c.name == n).and_then(h.read))
                .collect()
        })
        .collect();
    let router = names.iter().position(|n| n == "router");
    let cells: Vec<Cell> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Cell {
            contender: n.clone(),
            spread: Spread::of(values[i].iter().flatten().copied().collect()),
            paired: router.filter(|&r| r != i).map(|r| {
                let mut p = Paired::default();
                for (a, b) in values[r].iter().zip(&values[i]) {
                    if let (Some(a), Some(b)) = (a, b) {
                        if better_than(h.better, *a, *b) {
                            p.router_better += 1;
                        } else if better_than(h.better, *b, *a) {
                            p.router_worse += 1;
                        } else {
                            p.tied += 1;
                        }
                    }
                }
                p
            }),
        })
        .collect();
    let medians: Vec<Option<f64>> = cells
        .iter()
        .map(|c| c.spread.as_ref().map(|s| s.median))
        .collect();
    let best_value =
        medians.iter().flatten().copied().reduce(
            |a, b| {
                if better_than(h.better, b, a) {
                    b
                } else {
                    a
                }
            },
        );
    let best = names
        .iter()
        .zip(&medians)
        .filter(|(_, m)| m.is_some() && *m == &best_value)
        .map(|(n, _)| n.clone())
        .collect();
    Some(Row {
        scenario: scenario.to_string(),
        figure: h.figure.to_string(),
        better: h.better,
        cells,
        best,
    })
}

/// The `adapter-bug` check over seeds (`ROUTING.md` §3, the adapter-bug
/// bar, read as docs/routing-lab.md says): the router's trust losses the
/// world's truth attributes to the bug (must be 0), and whether honest
/// devices' trust changes from the bug's start to the end are worse in the
/// bug world than in the control world of the same seeds, by a one-sided
/// Mann–Whitney U test over the pooled changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterCheck {
    /// Seeds with both runs.
    pub seeds: Vec<u64>,
    /// Losses attributed to the bug (or unexplained) over all seeds.
    pub bug_losses: u64,
    /// Honest devices' trust changes, bug world, pooled over seeds.
    pub bug_deltas: Vec<f64>,
    /// The same in the control world.
    pub control_deltas: Vec<f64>,
    /// Median and mean of each: (bug, control).
    pub medians: (f64, f64),
    /// Means (bug, control).
    pub means: (f64, f64),
    /// Per seed: devices whose trust ended lower, (bug, control).
    pub lower_per_seed: Vec<(u64, usize, usize)>,
    /// The test of "bug world's changes are smaller".
    pub test: Option<MannWhitney>,
    /// Significance level the verdict uses.
    pub alpha: f64,
    /// Bug losses are 0 and the test does not reject at `alpha`.
    pub passes: bool,
}

/// Significance level of [`AdapterCheck`].
pub const ADAPTER_ALPHA: f64 = 0.05;

/// The check over the `adapter-bug` runs among `runs` that carry the
/// router and its control; `None` when there is none.
pub fn adapter_check(runs: &[SimReport]) -> Option<AdapterCheck> {
    let mut seeds = Vec::new();
    let (mut bug, mut control) = (Vec::new(), Vec::new());
    let mut losses = 0;
    let mut lower = Vec::new();
    for r in runs.iter().filter(|r| r.scenario == "adapter-bug") {
        let (Some(router), Some(ctl)) = (
            r.contenders.iter().find(|c| c.name == "router"),
            r.control.as_ref(),
        ) else {
            continue;
        };
        seeds.push(r.seed);
        losses += bug_losses(router).unwrap_or(0.0) as u64;
        bug.extend(&router.event.trust_deltas);
        control.extend(&ctl.trust_deltas);
        let count = |d: &[f64]| d.iter().filter(|&&x| x < -1e-9).count();
        lower.push((
            r.seed,
            count(&router.event.trust_deltas),
            count(&ctl.trust_deltas),
        ));
    }
    if seeds.is_empty() {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let test = mann_whitney_less(&bug, &control);
    let passes = losses == 0 && test.as_ref().is_some_and(|t| t.p_less >= ADAPTER_ALPHA);
    Some(AdapterCheck {
        seeds,
        bug_losses: losses,
        medians: (median(&bug).unwrap_or(0.0), median(&control).unwrap_or(0.0)),
        means: (mean(&bug), mean(&control)),
        bug_deltas: bug,
        control_deltas: control,
        lower_per_seed: lower,
        test,
        alpha: ADAPTER_ALPHA,
        passes,
    })
}

/// Everything `route sim`/`route compare` write for several seeds: the
/// rows, the adapter check, and each run's headline values by scenario,
/// seed and contender (the runs' own reports are written beside it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedsSummary {
    /// Seeds, in run order.
    pub seeds: Vec<u64>,
    /// Devices per run.
    pub devices: usize,
    /// Simulated hours per run.
    pub hours: f64,
    /// Headline rows.
    pub rows: Vec<Row>,
    /// `adapter-bug` against its control, when it ran with the router.
    pub adapter_check: Option<AdapterCheck>,
    /// Wall seconds per contender, summed over runs (timing, not a figure).
    pub wall_s: BTreeMap<String, f64>,
}

impl SeedsSummary {
    /// The summary of `runs` (scenario × seed reports of one size).
    pub fn of(runs: &[SimReport], seeds: &[u64]) -> SeedsSummary {
        let mut wall_s = BTreeMap::new();
        for r in runs {
            for c in &r.contenders {
                *wall_s.entry(c.name.clone()).or_insert(0.0) += c.timing.wall_s;
            }
        }
        SeedsSummary {
            seeds: seeds.to_vec(),
            devices: runs.first().map_or(0, |r| r.devices),
            hours: runs.first().map_or(0.0, |r| r.hours),
            rows: rows(runs),
            adapter_check: adapter_check(runs),
            wall_s,
        }
    }
}

#[cfg(test)]
#[path = "seeds_tests.rs"]
mod tests;
