//! The budget authority: one table of CPU shares that never exceeds the quota.
//!
//! Source: `DESIGN.md` §3 "Budget authority"; seed 000 §5; the ambient-share
//! decision is recorded in `docs/decisions/0001-ambient-io-share.md`.
//!
//! Every consumer declares (peak cores, threads). Integer core shares sum
//! against ⌊Q⌋; the fractional remainder `Q − ⌊Q⌋` is spendable only by the
//! I/O-bound consumers (sim slots, ambient I/O). Declared shares above the
//! quota fail here, at derive time, never at run time.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Reserve `H` (host threads, pump, telemetry): fixed at 1 core.
pub const DEFAULT_RESERVE_CPUS: u32 = 1;
/// Resolve `R`: fixed at 1 core.
pub const DEFAULT_RESOLVE_CPUS: u32 = 1;
/// Merge `M`: exactly one pin, 1 core.
pub const DEFAULT_MERGE_CPUS: u32 = 1;
/// Solver pins: one per bin, structural (six bins), independent of the quota.
pub const SOLVER_PINS: u32 = 6;
/// Sim slot cap: at most 4 simulation seats.
pub const DEFAULT_SIM_SLOT_CAP: u32 = 4;
/// The smallest solver share that hosts the pinned roles (`S ≥ 2`).
pub const MIN_SOLVER_CPUS: u32 = 2;
/// The most cycle threads the serial shape runs: one per bin (a seventh
/// would have no walk of its own). Only a forced serial profile above
/// Q = 7 reaches it.
pub const SERIAL_MAX_CYCLE_THREADS: u32 = SOLVER_PINS;
/// Below this many cores no tier can host the fleet (`BelowHostFloor`).
pub const HOST_FLOOR_CPUS: f64 = 2.0;

/// The ambient I/O share `A = max(1, ⌊Q/4⌋)` for a quota floor `n = ⌊Q⌋`.
///
/// The signed-off worked table is the contract (Q = 8 → A = 2); see
/// `docs/decisions/0001-ambient-io-share.md`.
pub const fn ambient_share(quota_floor: u32) -> u32 {
    let a = quota_floor / 4;
    if a < 1 {
        1
    } else {
        a
    }
}

/// Operator overrides. A configured value is terminal: it wins over the
/// rule, is logged at derive time, and takes part in the same sum check.
/// Cores are whole cores; `sim_slot_cap` counts seats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetOverrides {
    /// Reserve `H` in cores (env `DEGENBOT_RESERVE_CPUS`).
    pub reserve_cpus: Option<u32>,
    /// Ambient I/O share `A` in cores, also its worker count (env `DEGENBOT_IO_WORKERS`).
    pub ambient_cpus: Option<u32>,
    /// Resolve share `R` in cores (env `DEGENBOT_RESOLVE_CPUS`).
    pub resolve_cpus: Option<u32>,
    /// Merge share `M` in cores (env `DEGENBOT_MERGE_CPUS`).
    pub merge_cpus: Option<u32>,
    /// Solver share `S` in cores = concurrent walk admission (env `DEGENBOT_SOLVE_CPUS`).
    pub solver_cpus: Option<u32>,
    /// Sim slot cap in seats (env `DEGENBOT_SIM_SLOT_CAP`).
    pub sim_slot_cap: Option<u32>,
}

impl BudgetOverrides {
    /// `(key, value)` for every set override, in table order.
    pub fn set_keys(&self) -> Vec<(&'static str, u32)> {
        [
            ("reserve_cpus", self.reserve_cpus),
            ("ambient_cpus", self.ambient_cpus),
            ("resolve_cpus", self.resolve_cpus),
            ("merge_cpus", self.merge_cpus),
            ("solver_cpus", self.solver_cpus),
            ("sim_slot_cap", self.sim_slot_cap),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// Why a budget cannot be derived. Every variant says what to change.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BudgetError {
    /// The quota is not a finite positive number of cores.
    #[error("quota {quota} is not a positive number of cores; pass a quota such as 8 or 6.5")]
    InvalidQuota {
        /// The rejected quota, cores.
        quota: f64,
    },
    /// Below 2 cores no tier can host the fleet.
    #[error("quota {quota} cores is below the host floor of {HOST_FLOOR_CPUS} cores: no tier can host the fleet; give the process at least 2 cores")]
    BelowHostFloor {
        /// The quota, cores.
        quota: f64,
    },
    /// The solver share left after H, A, R, M is under 2 cores.
    #[error("quota {quota} cores leaves a solver share of {solver_cpus} cores (need ≥ {MIN_SOLVER_CPUS}, i.e. a quota of at least {needed_cpus} cores) — too small for the pinned roles; use the serial profile or raise the quota")]
    SolverShareTooSmall {
        /// The quota, cores.
        quota: f64,
        /// The solver share that remained (may be negative), cores.
        solver_cpus: i64,
        /// ⌊Q⌋ needed to host the pinned roles with the same fixed shares.
        needed_cpus: u32,
    },
    /// Overrides declare more integer cores than ⌊Q⌋.
    #[error("declared shares sum to {declared} cores but the quota allows ⌊{quota}⌋ = {quota_floor}; lower an override ({overrides}) or raise the quota")]
    Oversubscribed {
        /// The quota, cores.
        quota: f64,
        /// ⌊Q⌋.
        quota_floor: u32,
        /// Sum of the declared integer shares.
        declared: u32,
        /// The overrides in force, `key=value` comma-separated.
        overrides: String,
    },
    /// An override of zero for a consumer that needs at least one core/seat.
    #[error("override {key} = 0 is not allowed: the consumer needs at least 1; remove the override or set it ≥ 1")]
    ZeroOverride {
        /// The override key.
        key: &'static str,
    },
}

/// The shape a budget was derived for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetShape {
    /// One dedicated seat per role (`S` cores of walks, R, M pinned).
    Pinned,
    /// Cycle threads (1 core each) carry every lane between them
    /// (`solver_cpus` of them).
    Serial,
}

/// The derived share table. Cores are whole cores except `fractional_cpus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetBudget {
    /// The quota the table was derived from, cores (may be fractional).
    pub quota_cpus: f64,
    /// Reserve `H`, cores.
    pub reserve_cpus: u32,
    /// Ambient I/O share `A`, cores (0 in the serial table unless
    /// overridden: I/O rides the cycle threads and is duty-counted there).
    pub ambient_cpus: u32,
    /// Ambient I/O runtime worker threads (= A, at least 1).
    pub ambient_workers: u32,
    /// Resolve `R`, cores (0 in the serial table: a logical lane on the seat).
    pub resolve_cpus: u32,
    /// Merge `M`, cores (0 in the serial table: a logical lane on the seat).
    pub merge_cpus: u32,
    /// Solver `S`, cores: the concurrent walk admission in the pinned shape;
    /// the cycle threads (one core each) in the serial shape.
    pub solver_cpus: u32,
    /// Solver pins (one per bin), threads: always 6.
    pub solver_pins: u32,
    /// Sim slot cap, seats (4 unless overridden).
    pub sim_slot_cap: u32,
    /// `Q − ⌊Q⌋`, cores: spendable by sim slots and ambient I/O only.
    pub fractional_cpus: f64,
    /// Which shape the table describes.
    pub shape: BudgetShape,
    /// The integer shares exceed ⌊Q⌋ (only a forced pinned profile on a
    /// small host builds such a table; [`FleetBudget::derive`] never does).
    pub oversubscribed: bool,
    /// The overrides that were applied.
    pub overrides: BudgetOverrides,
}

/// One row of the budget table, for display and status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetRow {
    /// Consumer name (`reserve`, `ambient_io`, `resolve`, `merge`, `solver`,
    /// `serial_seat`, `sim_driver`).
    pub consumer: String,
    /// Integer core share, cores.
    pub cores: u32,
    /// Fractional cores this consumer may spend (I/O-bound consumers only).
    pub io_fraction: f64,
    /// Threads or seats the consumer runs.
    pub threads: u32,
    /// The sizing rule and its source.
    pub sizing_rule: String,
}

fn check_quota(quota: f64) -> Result<u32, BudgetError> {
    if !quota.is_finite() || quota <= 0.0 {
        return Err(BudgetError::InvalidQuota { quota });
    }
    Ok(quota.floor().min(u32::MAX as f64) as u32)
}

fn pick(key: &'static str, over: Option<u32>, rule: u32) -> Result<u32, BudgetError> {
    match over {
        Some(0) => Err(BudgetError::ZeroOverride { key }),
        Some(v) => {
            tracing::info!(
                key,
                value = v,
                rule,
                "[fleet-budget] override wins over the sizing rule"
            );
            Ok(v)
        }
        None => Ok(rule),
    }
}

fn overrides_text(o: &BudgetOverrides) -> String {
    let keys = o.set_keys();
    if keys.is_empty() {
        return "none set".into();
    }
    keys.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl FleetBudget {
    /// Derive the pinned share table for `quota_cpus` cores.
    ///
    /// `H = 1, A = max(1, ⌊Q/4⌋), R = 1, M = 1, S = ⌊Q⌋ − H − A − R − M`.
    /// Errors: [`BudgetError::InvalidQuota`] for non-finite or ≤ 0;
    /// [`BudgetError::SolverShareTooSmall`] when `S < 2`;
    /// [`BudgetError::Oversubscribed`] when overrides sum above ⌊Q⌋;
    /// [`BudgetError::ZeroOverride`] for an override of 0.
    ///
    /// ```
    /// use fleet::budget::{BudgetError, FleetBudget};
    ///
    /// // The worked row of DESIGN.md §2: 8 cores → H 1, A 2, R 1, M 1, S 3.
    /// let b = FleetBudget::derive(8.0, &Default::default()).unwrap();
    /// let shares = (b.reserve_cpus, b.ambient_cpus, b.resolve_cpus, b.merge_cpus, b.solver_cpus);
    /// assert_eq!(shares, (1, 2, 1, 1, 3));
    ///
    /// // A non-finite quota is a typed error, never a panic.
    /// assert!(matches!(
    ///     FleetBudget::derive(f64::NAN, &Default::default()),
    ///     Err(BudgetError::InvalidQuota { .. })
    /// ));
    /// ```
    pub fn derive(
        quota_cpus: f64,
        overrides: &BudgetOverrides,
    ) -> Result<FleetBudget, BudgetError> {
        let n = check_quota(quota_cpus)?;
        let b = Self::pinned_shares(quota_cpus, n, overrides)?;
        let fixed = b.reserve_cpus + b.ambient_cpus + b.resolve_cpus + b.merge_cpus;
        let solver = match overrides.solver_cpus {
            Some(s) => {
                let s = pick("solver_cpus", Some(s), s)?;
                if s < MIN_SOLVER_CPUS {
                    return Err(BudgetError::SolverShareTooSmall {
                        quota: quota_cpus,
                        solver_cpus: s as i64,
                        needed_cpus: fixed + MIN_SOLVER_CPUS,
                    });
                }
                s
            }
            None => {
                let s = n as i64 - fixed as i64;
                if s < MIN_SOLVER_CPUS as i64 {
                    return Err(BudgetError::SolverShareTooSmall {
                        quota: quota_cpus,
                        solver_cpus: s,
                        needed_cpus: fixed + MIN_SOLVER_CPUS,
                    });
                }
                s as u32
            }
        };
        let declared = fixed + solver;
        if declared > n {
            return Err(BudgetError::Oversubscribed {
                quota: quota_cpus,
                quota_floor: n,
                declared,
                overrides: overrides_text(overrides),
            });
        }
        Ok(FleetBudget {
            solver_cpus: solver,
            ..b
        })
    }

    /// The pinned table without the sum check, for a forced pinned profile
    /// on a host below the pinned floor: `S = max(2, ⌊Q⌋ − H − A − R − M)`
    /// and `oversubscribed` set when the integer shares exceed ⌊Q⌋.
    /// Errors: [`BudgetError::InvalidQuota`], [`BudgetError::ZeroOverride`].
    pub fn pinned_oversubscribed(
        quota_cpus: f64,
        overrides: &BudgetOverrides,
    ) -> Result<FleetBudget, BudgetError> {
        let n = check_quota(quota_cpus)?;
        let b = Self::pinned_shares(quota_cpus, n, overrides)?;
        let fixed = b.reserve_cpus + b.ambient_cpus + b.resolve_cpus + b.merge_cpus;
        let rule = (n as i64 - fixed as i64).max(MIN_SOLVER_CPUS as i64) as u32;
        let solver = pick("solver_cpus", overrides.solver_cpus, rule)?.max(MIN_SOLVER_CPUS);
        let oversubscribed = fixed + solver > n;
        Ok(FleetBudget {
            solver_cpus: solver,
            oversubscribed,
            ..b
        })
    }

    /// The serial tier's share table: reserve `H`, and every other whole
    /// core a cycle thread: `C = min(⌊Q⌋ − H − A, SERIAL_MAX_CYCLE_THREADS)`
    /// cycle threads (1 core each, carrying the solver, sim, resolve and
    /// merge lanes between them) with `A = 0` — the serial binding has no
    /// ambient runtime, its I/O rides the cycle threads' runtimes and is
    /// duty-counted there — unless `ambient_cpus` is overridden. Below the
    /// cap the integer shares sum to ⌊Q⌋ exactly (`C + A = ⌊Q⌋ − H`);
    /// `docs/decisions/0003-serial-cycle-threads.md`.
    /// Errors: [`BudgetError::InvalidQuota`], [`BudgetError::BelowHostFloor`]
    /// (Q < 2), [`BudgetError::Oversubscribed`] (overrides leave no core for
    /// a cycle thread), [`BudgetError::ZeroOverride`].
    ///
    /// ```
    /// use fleet::budget::FleetBudget;
    ///
    /// // 5 cores: the reserve and four cycle threads, nothing idle.
    /// let b = FleetBudget::derive_serial(5.0, &Default::default()).unwrap();
    /// assert_eq!((b.reserve_cpus, b.solver_cpus, b.ambient_cpus), (1, 4, 0));
    /// assert_eq!(b.integer_sum(), 5);
    /// ```
    pub fn derive_serial(
        quota_cpus: f64,
        overrides: &BudgetOverrides,
    ) -> Result<FleetBudget, BudgetError> {
        let n = check_quota(quota_cpus)?;
        if quota_cpus < HOST_FLOOR_CPUS {
            return Err(BudgetError::BelowHostFloor { quota: quota_cpus });
        }
        let reserve = pick("reserve_cpus", overrides.reserve_cpus, DEFAULT_RESERVE_CPUS)?;
        let ambient = match overrides.ambient_cpus {
            Some(a) => pick("ambient_cpus", Some(a), a)?,
            None => 0,
        };
        let sim_slot_cap = pick("sim_slot_cap", overrides.sim_slot_cap, DEFAULT_SIM_SLOT_CAP)?;
        let room = n.saturating_sub(reserve.saturating_add(ambient));
        if room < 1 {
            return Err(BudgetError::Oversubscribed {
                quota: quota_cpus,
                quota_floor: n,
                declared: reserve.saturating_add(ambient).saturating_add(1),
                overrides: overrides_text(overrides),
            });
        }
        let cycle_threads = room.min(SERIAL_MAX_CYCLE_THREADS);
        Ok(FleetBudget {
            quota_cpus,
            reserve_cpus: reserve,
            ambient_cpus: ambient,
            ambient_workers: ambient.max(1),
            resolve_cpus: 0,
            merge_cpus: 0,
            solver_cpus: cycle_threads,
            solver_pins: SOLVER_PINS,
            sim_slot_cap,
            fractional_cpus: quota_cpus - n as f64,
            shape: BudgetShape::Serial,
            oversubscribed: false,
            overrides: *overrides,
        })
    }

    fn pinned_shares(
        quota_cpus: f64,
        n: u32,
        o: &BudgetOverrides,
    ) -> Result<FleetBudget, BudgetError> {
        let ambient = pick("ambient_cpus", o.ambient_cpus, ambient_share(n))?;
        Ok(FleetBudget {
            quota_cpus,
            reserve_cpus: pick("reserve_cpus", o.reserve_cpus, DEFAULT_RESERVE_CPUS)?,
            ambient_cpus: ambient,
            ambient_workers: ambient,
            resolve_cpus: pick("resolve_cpus", o.resolve_cpus, DEFAULT_RESOLVE_CPUS)?,
            merge_cpus: pick("merge_cpus", o.merge_cpus, DEFAULT_MERGE_CPUS)?,
            solver_cpus: 0,
            solver_pins: SOLVER_PINS,
            sim_slot_cap: pick("sim_slot_cap", o.sim_slot_cap, DEFAULT_SIM_SLOT_CAP)?,
            fractional_cpus: quota_cpus - n as f64,
            shape: BudgetShape::Pinned,
            oversubscribed: false,
            overrides: *o,
        })
    }

    /// `pinned` or `serial`.
    pub fn shape_name(&self) -> &'static str {
        match self.shape {
            BudgetShape::Pinned => "pinned",
            BudgetShape::Serial => "serial",
        }
    }

    /// Sum of the integer core shares, cores.
    pub fn integer_sum(&self) -> u32 {
        self.reserve_cpus
            + self.ambient_cpus
            + self.resolve_cpus
            + self.merge_cpus
            + self.solver_cpus
    }

    /// The table rows (consumer, cores, threads, sizing rule), in table order.
    pub fn rows(&self) -> Vec<BudgetRow> {
        let o = &self.overrides;
        let rule = |over: Option<u32>, text: &str| match over {
            Some(v) => format!("override = {v} (terminal, sum-checked)"),
            None => text.to_string(),
        };
        let row = |consumer: &str, cores, io_fraction, threads, sizing_rule| BudgetRow {
            consumer: consumer.into(),
            cores,
            io_fraction,
            threads,
            sizing_rule,
        };
        let frac = self.fractional_cpus;
        let mut rows = vec![row(
            "reserve",
            self.reserve_cpus,
            0.0,
            0,
            rule(
                o.reserve_cpus,
                "fixed H = 1: host threads, pump, telemetry (DESIGN §3)",
            ),
        )];
        let ambient_rule = match self.shape {
            BudgetShape::Pinned => "A = max(1, ⌊Q/4⌋) (decision 0001)",
            BudgetShape::Serial => {
                "0: no ambient runtime, I/O rides the cycle threads (duty-counted; decision 0003)"
            }
        };
        rows.push(row(
            "ambient_io",
            self.ambient_cpus,
            frac,
            self.ambient_workers,
            rule(o.ambient_cpus, ambient_rule),
        ));
        match self.shape {
            BudgetShape::Pinned => {
                rows.push(row(
                    "resolve",
                    self.resolve_cpus,
                    0.0,
                    1,
                    rule(o.resolve_cpus, "fixed R = 1"),
                ));
                rows.push(row(
                    "merge",
                    self.merge_cpus,
                    0.0,
                    1,
                    rule(o.merge_cpus, "exactly one merge pin, M = 1"),
                ));
                rows.push(row(
                    "solver",
                    self.solver_cpus,
                    0.0,
                    self.solver_pins,
                    rule(
                        o.solver_cpus,
                        "S = ⌊Q⌋ − H − A − R − M ≥ 2; 6 pins, S walks at once",
                    ),
                ));
            }
            BudgetShape::Serial => rows.push(row(
                "serial_seat",
                self.solver_cpus,
                0.0,
                self.solver_cpus,
                "C = min(⌊Q⌋ − H − A, 6) cycle threads, 1 core each; every lane rides one, in grant order (decision 0003)".into(),
            )),
        }
        rows.push(row(
            "sim_driver",
            0,
            frac,
            self.sim_slot_cap,
            rule(
                o.sim_slot_cap,
                "fractional remainder only; I/O-bound, duty-counted; cap 4",
            ),
        ));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_off_rows() {
        // (Q, A, S) from the signed-off worked table and the decision record.
        for (q, a, s) in [(6.0, 1, 2), (7.0, 1, 3), (8.0, 2, 3), (16.0, 4, 9)] {
            let b = FleetBudget::derive(q, &BudgetOverrides::default()).unwrap();
            assert_eq!(
                (b.reserve_cpus, b.ambient_cpus, b.resolve_cpus, b.merge_cpus),
                (1, a, 1, 1),
                "Q={q}"
            );
            assert_eq!(b.solver_cpus, s, "Q={q}");
            assert_eq!(b.integer_sum(), q as u32);
        }
    }

    #[test]
    fn rows_sum_to_integer_sum() {
        let b = FleetBudget::derive(6.5, &BudgetOverrides::default()).unwrap();
        let rows = b.rows();
        assert_eq!(rows.iter().map(|r| r.cores).sum::<u32>(), 6);
        for r in &rows {
            let io = r.consumer == "sim_driver" || r.consumer == "ambient_io";
            assert_eq!(r.io_fraction > 0.0, io, "{}", r.consumer);
        }
    }
}
