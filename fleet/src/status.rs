//! `runtime_status()`: the plan, the budget table, the census and the
//! detected quota as one serializable value.
//!
//! Source: `DESIGN.md` §3 "Census and status"; seed 000 §14. Scripts read
//! these JSON keys: `fleet_booted`, `plan.{profile, binding, oversubscribed,
//! tier_refused, quota_cpus}`, `budget.{reserve_cpus, ambient_cpus,
//! resolve_cpus, merge_cpus, solver_cpus, solver_pins, sim_slot_cap}`,
//! `census` (array), `degraded` (`null` or `{cause, held_roles, since_ms,
//! action}`) and `quota.{exact_cpus, affinity_cpus, source, reason, unknown_reason}`.

use crate::budget::{BudgetOverrides, BudgetRow, FleetBudget};
use crate::census::{Census, CensusRow};
use crate::plan::{Binding, Plan, PlanError, Profile, TierRefusal};
use crate::quota::{QuotaReport, QuotaSource};
use serde::{Deserialize, Serialize};

/// The plan part of the status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanStatus {
    /// Requested profile.
    pub profile: Profile,
    /// Resolved binding.
    pub binding: Binding,
    /// Integer shares exceed ⌊Q⌋.
    pub oversubscribed: bool,
    /// The tier refused on the way, or `null`.
    pub tier_refused: Option<TierRefusal>,
    /// The quota the plan used, cores.
    pub quota_cpus: f64,
    /// Whether the serial tier lends its reserved cores at the idle class
    /// ([`Plan::reserve_lent`]).
    #[serde(default)]
    pub reserve_lent: bool,
}

/// The budget part: every [`FleetBudget`] field plus the table rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetStatus {
    /// The share table's fields (`reserve_cpus`, `solver_cpus`, …).
    #[serde(flatten)]
    pub budget: FleetBudget,
    /// The table rows (consumer, cores, threads, sizing rule).
    pub rows: Vec<BudgetRow>,
}

/// The detected quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaStatus {
    /// The cgroup quota, cores, or `null` when none limits or it is unknown.
    pub exact_cpus: Option<f64>,
    /// CPUs in the affinity mask.
    pub affinity_cpus: u32,
    /// `cgroup_v2`, `cgroup_v1`, `affinity` or `unknown`.
    pub source: QuotaSource,
    /// What was read and why.
    pub reason: String,
    /// Why the quota is unknown (`source` is `unknown`): the fleet may be
    /// planning for more cores than it has. `null` when the quota is known
    /// (limited, or no limit).
    pub unknown_reason: Option<String>,
    /// min(affinity, exact), cores.
    pub effective_cpus: f64,
}

/// The whole status value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeStatus {
    /// `true` once a binding booted and registered its census rows;
    /// `false` for the pre-boot projection.
    pub fleet_booted: bool,
    /// The plan.
    pub plan: PlanStatus,
    /// The budget table.
    pub budget: BudgetStatus,
    /// Census rows: the registered ones when booted, else the projection.
    pub census: Vec<CensusRow>,
    /// The detected quota.
    pub quota: QuotaStatus,
    /// `null` while healthy; once a lane death latched the sticky cordon,
    /// its cause and the roles held until a restart (a booted fleet's
    /// status fills it from its posture owner).
    #[serde(default)]
    pub degraded: Option<crate::posture::Degradation>,
}

/// Build the status for `plan` and the detected `quota`. With `census`
/// (a booted fleet) its registered rows are reported and `fleet_booted` is
/// true; without, the plan's census projection with `fleet_booted: false`.
pub fn runtime_status(plan: &Plan, quota: &QuotaReport, census: Option<&Census>) -> RuntimeStatus {
    RuntimeStatus {
        fleet_booted: census.is_some(),
        plan: PlanStatus {
            profile: plan.profile,
            binding: plan.binding,
            oversubscribed: plan.oversubscribed,
            tier_refused: plan.tier_refused.clone(),
            quota_cpus: plan.quota_cpus,
            reserve_lent: plan.reserve_lent,
        },
        budget: BudgetStatus {
            budget: plan.budget.clone(),
            rows: plan.budget.rows(),
        },
        census: census.map_or_else(|| plan.census_projection(), Census::rows),
        quota: QuotaStatus {
            exact_cpus: quota.exact_cpus,
            affinity_cpus: quota.affinity_cpus,
            source: quota.source.clone(),
            reason: quota.reason.clone(),
            unknown_reason: match &quota.source {
                QuotaSource::Unknown { reason } => Some(reason.clone()),
                _ => None,
            },
            effective_cpus: quota.effective_cpus(),
        },
        degraded: None,
    }
}

/// The pre-boot projection for the default (`auto`) profile on the
/// detected quota. Errors: [`PlanError`] (e.g. below the host floor).
pub fn projected_status(
    quota: &QuotaReport,
    overrides: &BudgetOverrides,
) -> Result<RuntimeStatus, PlanError> {
    let plan = Plan::resolve(quota.effective_cpus(), Profile::Auto, overrides)?;
    Ok(runtime_status(&plan, quota, None))
}
