//! The CI gates: per-profile budgets (`ci/budgets.toml`) checked against a
//! run's report. Every failure names the budget, its limit and the value.
//!
//! `DESIGN.md` §6; seed 000 §14 (the CI profile matrix).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::report::RunReport;

/// One profile's budgets.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileBudget {
    /// What the profile is, for people.
    pub description: String,
    /// The fleet profile it runs: `auto`, `pinned` or `serial`.
    pub fleet_profile: String,
    /// Time scale of the gate run.
    pub scale: f64,
    /// Cycles replayed.
    pub cycles: u32,
    /// Limit on the p95 of makespan over the lower bound.
    pub makespan_over_lower_bound_p95: f64,
    /// Limit on the p99 of makespan over the lower bound.
    pub makespan_over_lower_bound_p99: f64,
    /// Limit on throttled time over wall time, in [0, 1] (checked when measured).
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

fn lend_by_default() -> bool {
    true
}

/// The budgets file: profiles by name (`A`, `B`, …).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Profiles by name.
    pub profile: BTreeMap<String, ProfileBudget>,
    /// The comparison gate (`fleet-lab compare --gate`); `None` when the
    /// file has no `[compare]` table.
    #[serde(default)]
    pub compare: Option<crate::compare_gate::CompareBudget>,
}

/// Why the budgets file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetsError {
    /// Unreadable file.
    #[error("cannot read budgets {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or an unknown key.
    #[error("budgets {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message (names the key and line).
        message: String,
    },
    /// No such profile.
    #[error("budgets {path} has no profile {name:?} (it has: {known})")]
    NoProfile {
        /// The file.
        path: String,
        /// The profile asked for.
        name: String,
        /// The profiles it has.
        known: String,
    },
}

impl Budgets {
    /// Reads and parses a budgets file.
    pub fn load(path: &Path) -> Result<Self, BudgetsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BudgetsError::Read {
            path: shown.clone(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| BudgetsError::Parse {
            path: shown,
            message: e.to_string(),
        })
    }

    /// One profile's budgets.
    pub fn profile(&self, name: &str, path: &Path) -> Result<&ProfileBudget, BudgetsError> {
        self.profile
            .get(name)
            .ok_or_else(|| BudgetsError::NoProfile {
                path: path.display().to_string(),
                name: name.to_string(),
                known: self.profile.keys().cloned().collect::<Vec<_>>().join(", "),
            })
    }
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

/// Checks a report against a profile's budgets; empty when it passes.
pub fn check(report: &RunReport, b: &ProfileBudget) -> Vec<Breach> {
    let mut out = Vec::new();
    if b.parity && !report.parity {
        let at = match &report.first_mismatch {
            Some(m) => format!(" (first at cycle {} path {})", m.cycle, m.path),
            None => String::new(),
        };
        out.push(Breach {
            budget: "parity",
            detail: format!("produced outcomes differ from the golden corpus{at}"),
        });
    }
    if let Some(sat) = &report.saturation {
        out.push(Breach {
            budget: "saturation",
            detail: format!(
                "the late-cycle backlog kept growing from cycle {} ({:.0} ms into the run) to the end; the last cycle started {:.0} ms late ({:.1} cycles behind)",
                sat.since_cycle, sat.since_ms, sat.last_late_ms, sat.backlog_cycles
            ),
        });
    }
    let ratio = &report.makespan_over_lower_bound;
    if ratio.p95 > b.makespan_over_lower_bound_p95 {
        out.push(Breach {
            budget: "makespan_over_lower_bound_p95",
            detail: format!(
                "{:.2} > limit {:.2}",
                ratio.p95, b.makespan_over_lower_bound_p95
            ),
        });
    }
    if ratio.p99 > b.makespan_over_lower_bound_p99 {
        out.push(Breach {
            budget: "makespan_over_lower_bound_p99",
            detail: format!(
                "{:.2} > limit {:.2}",
                ratio.p99, b.makespan_over_lower_bound_p99
            ),
        });
    }
    if report.histograms_out_of_range > 0 {
        out.push(Breach {
            budget: "histogram_range",
            detail: format!(
                "{} values above the histogram's range (never clamped)",
                report.histograms_out_of_range
            ),
        });
    }
    if let Some(t) = &report.throttle {
        if t.throttled_share > b.throttled_share_max {
            out.push(Breach {
                budget: "throttled_share_max",
                detail: format!(
                    "{:.4} > limit {:.4} ({} events)",
                    t.throttled_share, b.throttled_share_max, t.events
                ),
            });
        }
    }
    let per_cycle = report.threads.created_during_run as f64 / report.cycles.max(1) as f64;
    if per_cycle > b.threads_created_per_cycle_max {
        out.push(Breach {
            budget: "threads_created_per_cycle_max",
            detail: format!(
                "{per_cycle:.2} > limit {:.2} ({} threads over {} cycles)",
                b.threads_created_per_cycle_max, report.threads.created_during_run, report.cycles
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::{sample_run, SampleShape};

    fn budget() -> ProfileBudget {
        ProfileBudget {
            description: "t".into(),
            fleet_profile: "auto".into(),
            scale: 0.1,
            cycles: 10,
            makespan_over_lower_bound_p95: 1e9,
            makespan_over_lower_bound_p99: 1e9,
            throttled_share_max: 1.0,
            threads_created_per_cycle_max: 0.0,
            parity: true,
            lend_reserve: true,
        }
    }

    #[test]
    fn the_shipped_budgets_file_parses_and_has_profiles_a_and_b() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
        let b = Budgets::load(&path).unwrap();
        for name in ["A", "B"] {
            let p = b.profile(name, &path).unwrap();
            assert!(p.parity && p.threads_created_per_cycle_max == 0.0, "{name}");
        }
        let c = b.compare.as_ref().expect("a [compare] table");
        assert!(
            c.threads_created_per_cycle_max == 0.0 && c.peak_runnable_over_floor_quota_max <= 1
        );
        assert!(c.rate == "live" || c.rate == "stress", "{}", c.rate);
        assert!(b
            .profile("C", &path)
            .unwrap_err()
            .to_string()
            .contains("A, B"));
    }

    /// A run slowed 1.5× (every unit's CPU and I/O, `gate
    /// --inject-slowdown 1.5`) has makespan over lower bound ≥ 1.5 in every
    /// cycle by construction (`bench/tests/run_cli.rs` checks it), so
    /// profile A fails it exactly when one of its ratio limits is below 1.5.
    #[test]
    fn profile_a_ratio_limits_are_below_a_one_and_a_half_slowdown() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
        let b = Budgets::load(&path).unwrap();
        let a = b.profile("A", &path).unwrap();
        let tightest = a
            .makespan_over_lower_bound_p95
            .min(a.makespan_over_lower_bound_p99);
        assert!(
            tightest < 1.5,
            "profile A's ratio limits (p95 {}, p99 {}) let a 1.5× slowdown pass",
            a.makespan_over_lower_bound_p95,
            a.makespan_over_lower_bound_p99
        );
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.toml");
        std::fs::write(&p, "[profile.A]\nmakespan_p95 = 1\n").unwrap();
        let e = Budgets::load(&p).unwrap_err().to_string();
        assert!(e.contains("makespan_p95"), "{e}");
    }

    #[test]
    fn each_breach_names_its_budget() {
        let mut r = sample_run("auto", SampleShape::FLEET, 10, 0.1, 1);
        r.threads.created_during_run = 0;
        r.throttle = None;
        r.histograms_out_of_range = 0;
        r.parity = true;
        assert!(
            check(&r, &budget()).is_empty(),
            "{:?}",
            check(&r, &budget())
        );
        let mut b = budget();
        b.makespan_over_lower_bound_p99 = r.makespan_over_lower_bound.p99 / 2.0;
        let breaches = check(&r, &b);
        assert_eq!(breaches.len(), 1);
        assert_eq!(breaches[0].budget, "makespan_over_lower_bound_p99");
        r.parity = false;
        r.threads.created_during_run = 95 * 10;
        r.histograms_out_of_range = 1;
        let names: Vec<_> = check(&r, &budget()).iter().map(|b| b.budget).collect();
        assert_eq!(
            names,
            ["parity", "histogram_range", "threads_created_per_cycle_max"]
        );
    }
}
