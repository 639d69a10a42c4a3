//! The CI gates: per-profile budgets (`ci/budgets.toml`) checked against a
//! run's report. Every failure names the budget, its limit and the value.
//!
//! `DESIGN.md` §6; seed 000 §14 (the CI profile matrix).

use serde::{Deserialize, Serialize};

/// One profile's budgets: what its blocks run, the paired timed test and
/// the absolute limits on deterministic figures (docs/gates.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileBudget {
    /// What the profile is, for people.
    pub description: String,
    /// The fleet profile it runs: `auto`, `pinned` or `serial`.
    pub fleet_profile: String,
    /// Time scale of the gate's blocks.
    pub scale: f64,
    /// Cycles per block: each block replays the corpus's first this many.
    pub block_cycles: u32,
    /// Measured pairs of blocks (candidate and reference each once).
    pub pairs: u32,
    /// Unmeasured blocks each side runs first (the first boot of a process
    /// pays for its page faults and cold caches).
    #[serde(default = "one")]
    pub warmup_blocks: u32,
    /// A pair counts against the candidate when its mean makespan is more
    /// than this many times the reference's (> 1).
    pub slowdown_tolerance: f64,
    /// The sign test's level (0 < alpha < 1): the largest chance of failing
    /// a candidate that is exactly `slowdown_tolerance` times slower.
    pub alpha: f64,
    /// A cgroup quota (cores) the lab makes for every block, so the
    /// throttle gate reads a cgroup that can throttle. Where the cpu
    /// controller is not writable the gate fails unless
    /// `FLEET_GATE_ALLOW_NO_CGROUP=1` allows the skip.
    #[serde(default)]
    pub cgroup_quota: Option<f64>,
    /// Limit on throttled time over wall time, in [0, 1].
    pub throttled_share_max: f64,
    /// Limit on OS threads created per cycle during the run.
    pub threads_created_per_cycle_max: f64,
    /// Whether every outcome must equal the golden one.
    pub parity: bool,
    /// Whether a serial fleet may lend its reserved cores at the idle class
    /// (decision 0009; default true). Off, the run gates the serial binding
    /// against the one-core bound of its own cycle thread.
    #[serde(default = "lend_by_default")]
    pub lend_reserve: bool,
}

fn one() -> u32 {
    1
}

impl ProfileBudget {
    /// The sign test these budgets set.
    pub fn sign_test(&self) -> crate::paired::SignTest {
        crate::paired::SignTest {
            tolerance: self.slowdown_tolerance,
            alpha: self.alpha,
        }
    }

    /// Checks the numbers can make a gate that can fail: a tolerance above
    /// 1, a level in (0, 1), at least one block cycle, and enough pairs that
    /// some count of them is significant at the level.
    pub fn validate(&self, name: &str) -> Result<(), String> {
        let mut bad = Vec::new();
        if !(self.slowdown_tolerance.is_finite() && self.slowdown_tolerance > 1.0) {
            bad.push(format!(
                "slowdown_tolerance {} must be above 1",
                self.slowdown_tolerance
            ));
        }
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            bad.push(format!("alpha {} must be in (0, 1)", self.alpha));
        } else if crate::paired::sign::critical_count(self.pairs, self.alpha).is_none() {
            bad.push(format!(
                "pairs {}: even all of them above the tolerance has P = 2^-{} > alpha {}, so the gate could never fail",
                self.pairs, self.pairs, self.alpha
            ));
        }
        if self.block_cycles == 0 {
            bad.push("block_cycles must be at least 1".into());
        }
        if !(self.scale.is_finite() && self.scale > 0.0) {
            bad.push(format!("scale {} must be positive", self.scale));
        }
        if let Some(q) = self.cgroup_quota {
            if !(q.is_finite() && q >= 0.01) {
                bad.push(format!("cgroup_quota {q} must be at least 0.01 cores"));
            }
        }
        match bad.is_empty() {
            true => Ok(()),
            false => Err(format!("profile {name}: {}", bad.join("; "))),
        }
    }
}

fn lend_by_default() -> bool {
    true
}

/// A budget a run broke.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    /// The budget's key in the file.
    pub budget: &'static str,
    /// What happened, with the limit and the value.
    pub detail: String,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.budget, self.detail)
    }
}

/// Checks a paired measurement against a profile's budgets; empty when it
/// passes.
///
/// Deterministic figures are absolute, on every candidate block: parity,
/// saturation, histogram range, threads created, and the throttled share
/// (which must have been read from a cgroup the lab made, unless
/// `throttle_skip` says why not). A reference block that lost parity
/// fails too: the measurement is then not against a working build. The
/// timed figure is relative: the pairs' mean-makespan ratios under the
/// profile's sign test (`paired_slowdown`).
pub fn check_pairs(
    pairs: &[crate::paired::Pair],
    b: &ProfileBudget,
    throttle_skip: Option<&str>,
) -> (Vec<Breach>, crate::paired::SignVerdict) {
    let mut out = Vec::new();
    let ratios: Vec<f64> = pairs.iter().map(|p| p.ratio()).collect();
    let verdict = b.sign_test().judge(&ratios);
    let candidate: Vec<&crate::paired::BlockFigures> = pairs.iter().map(|p| &p.candidate).collect();
    if b.parity {
        if let Some(i) = candidate.iter().position(|c| !c.parity) {
            out.push(Breach {
                budget: "parity",
                detail: format!(
                    "produced outcomes differ from the golden corpus (candidate block of pair {})",
                    i + 1
                ),
            });
        }
        if let Some(i) = pairs.iter().position(|p| !p.reference.parity) {
            out.push(Breach {
                budget: "reference",
                detail: format!(
                    "the reference's outcomes differ from the golden corpus (pair {}): it is no reference",
                    i + 1
                ),
            });
        }
    }
    if let Some(i) = candidate.iter().position(|c| c.saturated) {
        out.push(Breach {
            budget: "saturation",
            detail: format!(
                "the candidate's late-cycle backlog kept growing to the end of pair {}'s block",
                i + 1
            ),
        });
    }
    let out_of_range: u64 = candidate.iter().map(|c| c.histograms_out_of_range).sum();
    if out_of_range > 0 {
        out.push(Breach {
            budget: "histogram_range",
            detail: format!("{out_of_range} values above the histogram's range (never clamped)"),
        });
    }
    let cycles: u64 = candidate.iter().map(|c| c.cycles).sum();
    let created: u64 = candidate.iter().map(|c| c.threads_created).sum();
    let per_cycle = created as f64 / cycles.max(1) as f64;
    if per_cycle > b.threads_created_per_cycle_max {
        out.push(Breach {
            budget: "threads_created_per_cycle_max",
            detail: format!(
                "{per_cycle:.2} > limit {:.2} ({created} threads over {cycles} cycles)",
                b.threads_created_per_cycle_max
            ),
        });
    }
    out.extend(throttle_breach(&candidate, b, throttle_skip));
    if verdict.fails {
        out.push(Breach {
            budget: "paired_slowdown",
            detail: format!(
                "{} of {} pairs had the candidate more than {:.2}× the reference's mean makespan (p = {:.4} ≤ alpha {}; median ratio {:.3})",
                verdict.above, verdict.pairs, b.slowdown_tolerance, verdict.p_value, b.alpha, verdict.median_ratio
            ),
        });
    }
    (out, verdict)
}

/// The throttle gate over the candidate's blocks: their wall-weighted
/// throttled share against the limit, read where the lab made a cgroup
/// with a quota (a skip allowed by the caller says why it was not).
fn throttle_breach(
    candidate: &[&crate::paired::BlockFigures],
    b: &ProfileBudget,
    throttle_skip: Option<&str>,
) -> Option<Breach> {
    if b.cgroup_quota.is_some() && throttle_skip.is_none() {
        if let Some(i) = candidate.iter().position(|c| !c.throttle_in_lab_cgroup) {
            return Some(Breach {
                budget: "throttled_share_max",
                detail: format!(
                    "pair {}'s candidate block read no throttle figure from a cgroup the lab made: the throttle gate could not fail",
                    i + 1
                ),
            });
        }
    }
    let wall: f64 = candidate.iter().map(|c| c.wall_seconds).sum();
    let throttled: f64 = candidate
        .iter()
        .map(|c| c.throttled_share.unwrap_or(0.0) * c.wall_seconds)
        .sum();
    let share = if wall > 0.0 { throttled / wall } else { 0.0 };
    (share > b.throttled_share_max).then(|| Breach {
        budget: "throttled_share_max",
        detail: format!("{share:.4} > limit {:.4}", b.throttled_share_max),
    })
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
