//! The plan: one pure function of the quota and profile resolves the host
//! tier, the binding and the share table.
//!
//! Source: `DESIGN.md` §3 "Plan (host tiers)"; seed 000 §14 (the tier table).
//! No call site decides a tier on its own: bindings read [`Plan::binding`]
//! and [`Plan::seat_layout`].
//!
//! | quota (cores) | auto | forced pinned | forced serial |
//! |---|---|---|---|
//! | < 2 | `BelowHostFloor` | `BelowHostFloor` | `BelowHostFloor` |
//! | 2 ≤ Q, `S < 2` | serial, carries `QuotaTooSmallForPinnedRoles` | pinned, oversubscribed, carries the refusal | serial |
//! | `S ≥ 2` (Q ≥ 6 by default) | pinned | pinned | serial |

mod layout;

pub use layout::{serial_thread_name, SeatLayout, SeatSpec, SERIAL_THREAD_NAME};

use crate::budget::{BudgetError, BudgetOverrides, FleetBudget, HOST_FLOOR_CPUS};
use crate::quota::QuotaReport;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// The requested profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Resolve the tier from the quota (the default).
    #[default]
    Auto,
    /// Force the pinned binding (marked oversubscribed below the pinned floor).
    Pinned,
    /// Force the serial binding.
    Serial,
}

impl Profile {
    /// The lowercase name (`auto`, `pinned`, `serial`).
    pub const fn name(self) -> &'static str {
        match self {
            Profile::Auto => "auto",
            Profile::Pinned => "pinned",
            Profile::Serial => "serial",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A profile name that is not `auto`, `pinned` or `serial`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown profile {0:?}: use auto, pinned or serial")]
pub struct ParseProfileError(pub String);

impl FromStr for Profile {
    type Err = ParseProfileError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Profile::Auto),
            "pinned" => Ok(Profile::Pinned),
            "serial" => Ok(Profile::Serial),
            _ => Err(ParseProfileError(s.to_string())),
        }
    }
}

/// How lanes map to threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    /// One dedicated thread per seat.
    Pinned,
    /// One cycle thread per host runs every granted unit in grant order.
    Serial,
}

impl Binding {
    /// The lowercase name (`pinned`, `serial`), as in the profile metric label.
    pub const fn name(self) -> &'static str {
        match self {
            Binding::Pinned => "pinned",
            Binding::Serial => "serial",
        }
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tier the plan could not use, carried on the plan that was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TierRefusal {
    /// The quota leaves a solver share under 2 cores: the pinned roles do
    /// not fit. `auto` fell to serial; a forced pinned runs oversubscribed.
    QuotaTooSmallForPinnedRoles {
        /// The quota, cores.
        quota_cpus: f64,
        /// The solver share that remained, cores (may be negative).
        solver_cpus: i64,
        /// ⌊Q⌋ the pinned roles need with the same fixed shares, cores.
        needed_cpus: u32,
    },
}

impl fmt::Display for TierRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TierRefusal::QuotaTooSmallForPinnedRoles { quota_cpus, solver_cpus, needed_cpus } => write!(
                f,
                "QuotaTooSmallForPinnedRoles: {quota_cpus} cores leave a solver share of {solver_cpus} (pinned roles need {needed_cpus} cores)"
            ),
        }
    }
}

/// Why no plan exists. The process lives; the caller decides how to exit.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PlanError {
    /// Below 2 cores no tier can host the fleet.
    #[error("BelowHostFloor: quota {quota_cpus} cores is below the host floor of {floor_cpus} cores — no tier can host the fleet; give the process at least 2 cores")]
    BelowHostFloor {
        /// The quota, cores.
        quota_cpus: f64,
        /// The floor, cores (2).
        floor_cpus: f64,
    },
    /// The budget could not be derived (invalid quota, overrides above ⌊Q⌋).
    #[error("budget refused: {0}")]
    Budget(#[from] BudgetError),
}

/// The resolved plan (plan format 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The profile that was requested.
    pub profile: Profile,
    /// The binding the plan resolved.
    pub binding: Binding,
    /// Integer shares exceed ⌊Q⌋ (a forced pinned on a small host).
    pub oversubscribed: bool,
    /// The tier refused on the way here, if any.
    pub tier_refused: Option<TierRefusal>,
    /// The quota the plan was resolved for, cores.
    pub quota_cpus: f64,
    /// The share table: the pinned table, or the serial seats' table.
    pub budget: FleetBudget,
    /// Serial binding only: the reserved cores are lent to the fleet at the
    /// idle scheduling class (`docs/decisions/0009-reserve-lent-at-idle-class.md`):
    /// the layout adds `reserve_cpus` cycle threads and every cycle thread
    /// runs at `SCHED_IDLE`, so each of the host's own threads preempts them
    /// at once, under a guard that returns them to the normal class while
    /// other processes starve them. Set only by [`Plan::lend_reserve`].
    #[serde(default)]
    pub reserve_lent: bool,
}

impl Plan {
    /// Resolve the plan for `quota_cpus` cores and a profile (tier table in
    /// the module docs). Errors: [`PlanError::BelowHostFloor`] for Q < 2;
    /// [`PlanError::Budget`] for an invalid quota or overrides above ⌊Q⌋.
    ///
    /// ```
    /// use fleet::plan::{Binding, Plan, PlanError, Profile};
    ///
    /// // 8 cores hold the pinned roles; 5 do not, so auto falls back to serial.
    /// let big = Plan::resolve(8.0, Profile::Auto, &Default::default()).unwrap();
    /// assert_eq!(big.binding, Binding::Pinned);
    /// let small = Plan::resolve(5.0, Profile::Auto, &Default::default()).unwrap();
    /// assert_eq!(small.binding, Binding::Serial);
    ///
    /// // Below the host floor of 2 cores nothing can be hosted.
    /// assert!(matches!(
    ///     Plan::resolve(1.5, Profile::Auto, &Default::default()),
    ///     Err(PlanError::BelowHostFloor { .. })
    /// ));
    /// ```
    pub fn resolve(
        quota_cpus: f64,
        profile: Profile,
        overrides: &BudgetOverrides,
    ) -> Result<Plan, PlanError> {
        if !quota_cpus.is_finite() || quota_cpus <= 0.0 {
            return Err(BudgetError::InvalidQuota { quota: quota_cpus }.into());
        }
        if quota_cpus < HOST_FLOOR_CPUS {
            return Err(PlanError::BelowHostFloor {
                quota_cpus,
                floor_cpus: HOST_FLOOR_CPUS,
            });
        }
        let pinned = FleetBudget::derive(quota_cpus, overrides);
        let refusal = match &pinned {
            Err(BudgetError::SolverShareTooSmall {
                quota,
                solver_cpus,
                needed_cpus,
            }) => Some(TierRefusal::QuotaTooSmallForPinnedRoles {
                quota_cpus: *quota,
                solver_cpus: *solver_cpus,
                needed_cpus: *needed_cpus,
            }),
            _ => None,
        };
        let serial = |tier_refused| -> Result<Plan, PlanError> {
            Ok(Plan {
                profile,
                binding: Binding::Serial,
                oversubscribed: false,
                tier_refused,
                quota_cpus,
                budget: FleetBudget::derive_serial(quota_cpus, overrides)?,
                reserve_lent: false,
            })
        };
        match (profile, pinned) {
            (Profile::Serial, _) => serial(None),
            (_, Ok(budget)) => Ok(Plan {
                profile,
                binding: Binding::Pinned,
                oversubscribed: false,
                tier_refused: None,
                quota_cpus,
                budget,
                reserve_lent: false,
            }),
            (Profile::Auto, Err(BudgetError::SolverShareTooSmall { .. })) => serial(refusal),
            (Profile::Pinned, Err(BudgetError::SolverShareTooSmall { .. })) => {
                let budget = FleetBudget::pinned_oversubscribed(quota_cpus, overrides)?;
                Ok(Plan {
                    profile,
                    binding: Binding::Pinned,
                    oversubscribed: budget.oversubscribed,
                    tier_refused: refusal,
                    quota_cpus,
                    budget,
                    reserve_lent: false,
                })
            }
            (_, Err(e)) => Err(e.into()),
        }
    }

    /// Re-derives this running plan for a changed quota (`DESIGN.md` §3
    /// "Quota detection": a change re-derives the budget). The binding is
    /// kept (threads and seats are fixed at boot): a pinned plan re-resolves
    /// as forced `pinned` (marked oversubscribed when the new quota is too
    /// small for the pinned roles), a serial one as `serial`; the profile
    /// asked for and the overrides are kept.
    ///
    /// Errors: as [`Plan::resolve`] — [`PlanError::BelowHostFloor`] when the
    /// new quota is below 2 cores (keep the bounds in force and log it).
    pub fn replan(&self, quota_cpus: f64) -> Result<Plan, PlanError> {
        let profile = match self.binding {
            Binding::Pinned => Profile::Pinned,
            Binding::Serial => Profile::Serial,
        };
        let mut plan = Plan::resolve(quota_cpus, profile, &self.budget.overrides)?;
        plan.profile = self.profile;
        // The cycle threads are fixed at boot, and so is their class.
        plan.reserve_lent = self.reserve_lent;
        Ok(plan)
    }

    /// This plan with its reserved cores lent to the fleet where that is
    /// safe (`docs/decisions/0009-reserve-lent-at-idle-class.md`): a serial
    /// plan whose quota covers every CPU the process may run on, in a
    /// cgroup that can never throttle it ([`QuotaReport::cannot_throttle`]).
    /// Elsewhere (the pinned binding; a quota below the affinity mask, where
    /// an idle-class thread would spend the quota the host's own threads
    /// need; an unknown quota) the plan is returned unchanged.
    ///
    /// ```
    /// use fleet::plan::{Plan, Profile};
    /// use fleet::quota::{QuotaReport, QuotaSource};
    ///
    /// let two_cpus = QuotaReport {
    ///     exact_cpus: None,
    ///     affinity_cpus: 2,
    ///     source: QuotaSource::Affinity,
    ///     reason: String::new(),
    ///     cgroup_dir: None,
    ///     limiting_dir: None,
    ///     affinity_list: vec![0, 1],
    /// };
    /// let plan = Plan::resolve(2.0, Profile::Auto, &Default::default()).unwrap();
    /// let lent = plan.clone().lend_reserve(&two_cpus);
    /// assert!(lent.reserve_lent);
    /// // One cycle thread of its own plus the lent reserve core.
    /// assert_eq!(lent.seat_layout().cycle_threads, 2);
    /// assert_eq!(plan.seat_layout().cycle_threads, 1);
    /// ```
    pub fn lend_reserve(mut self, quota: &QuotaReport) -> Plan {
        self.reserve_lent = self.binding == Binding::Serial
            && quota.cannot_throttle()
            && quota.affinity_cpus > 0
            && self.quota_cpus >= f64::from(quota.affinity_cpus);
        self
    }
}
