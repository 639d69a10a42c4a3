//! The lease decision: which of an archetype's queued targets one device
//! gets now. A pure function of the field, the device, the candidates, the
//! politeness buckets and the time. Source: `ROUTING.md` §3 Assignment policy.
//!
//! Steps per lease: batch size from the lease-stamp price; candidates ordered
//! by the trust-band preference table ([`tiers::PREFERENCE`]), then schedule
//! priority, then target id; each is checked for feasibility (declared
//! capabilities, gates and a finite mean for the device's archetype in the
//! decision at its address), tier rules (verification cap, TTL and quorum
//! involvement, an identity related to a voter counting as involved:
//! docs/decisions/0028; low-value tiers only when value > priced cost), then
//! politeness admission (a token spent only for a grant). Filler is drawn
//! only when no other candidate was granted.

mod tiers;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use tiers::{preference, Band, Tier, PREFERENCE};

use crate::field::{Address, Field, FieldError, LossReason, Receipt, Work};
use crate::politeness::{Bucket, PolitenessError};
use crate::trust::Origin;
use crate::verify::{Verification, VerifyConfig, VerifyError};

/// Why a lease could not be decided at all (nothing was changed).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PolicyError {
    /// The field refused an address or option.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A politeness bucket refused its arguments.
    #[error(transparent)]
    Politeness(#[from] PolitenessError),
    /// A time that is not finite.
    #[error("time must be finite, got {0}")]
    BadTime(f64),
    /// A configuration value out of range.
    #[error("policy configuration out of range: {0}")]
    BadConfig(&'static str),
}

/// Policy constants and the prices it reads (configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyConfig {
    /// Decision temperature T (≥ 0).
    pub temperature: f64,
    /// Verification rule constants (τ_hi, quorum, cap, TTL).
    pub verify: VerifyConfig,
    /// Items per lease at zero stamp price for this archetype (browsers get
    /// small batches; ≥ 1).
    pub batch_base: usize,
    /// λ of the pool charged per lease (stamps), ≥ 0: the batch grows as
    /// ⌈base·(1 + λ)⌉ so fewer stamps are spent per target.
    pub stamp_price: f64,
    /// Priced cost of one granted item, Σ_pool λ·usage (cost units, ≥ 0).
    pub item_cost: f64,
    /// Capacity of a new host's bucket (tokens, ≥ 1).
    pub bucket_capacity: f64,
    /// Refill of a new host's bucket (tokens per second, > 0).
    pub bucket_rate: f64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            temperature: 1.0,
            verify: VerifyConfig::default(),
            batch_base: 1,
            stamp_price: 0.0,
            item_cost: 0.0,
            bucket_capacity: 4.0,
            bucket_rate: 1.0,
        }
    }
}

/// The device asking for work, as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct DeviceView<'a> {
    /// Device id.
    pub id: &'a str,
    /// Its archetype (a declared option of the field).
    pub archetype: &'a str,
    /// Its trust τ ∈ [0, 1].
    pub trust: f64,
    /// Whether the fleet-level cap lets the policy treat it as limited.
    pub limited: bool,
    /// Operator-gate capabilities it declared (`needs_js`, `residential`, …).
    pub capabilities: &'a [String],
    /// Most items it asked for.
    pub max_items: usize,
    /// Where its identity came from (`None`: unknown, related to no
    /// other). A verification is not offered to an identity related to one
    /// that voted on the row, unless its τ alone settles the row: its vote
    /// would replace the related one, not add to the quorum
    /// (`ROUTING.md` §3 Trust; docs/decisions/0028).
    pub origin: Option<&'a Origin>,
}

/// One queued target offered to the device.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    /// Target id.
    pub target: &'a str,
    /// Source host (one bucket per host).
    pub host: &'a str,
    /// Decision address of the target (source / binding / task).
    pub address: &'a Address,
    /// Its tier.
    pub tier: Tier,
    /// Schedule priority (higher first; non-finite counts as 0).
    pub priority: f64,
    /// Value of the work in cost units (compared to the priced cost for low-value tiers).
    pub value: f64,
    /// Operator gates the device must have declared as capabilities.
    pub requires: &'a [String],
    /// The row's verification state (for [`Tier::Verification`]).
    pub verification: Option<&'a Verification>,
    /// Live archetypes to decide among at the address (the device's own is always included).
    pub live: &'a [&'a str],
    /// A decision already made at the address (e.g. by the queue refill);
    /// used as the item's receipt instead of deciding again. `None`: decide now.
    pub receipt: Option<&'a Receipt>,
}

/// Why a candidate was passed over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Pass {
    /// The device lacks an operator capability the target requires.
    MissingCapability(String),
    /// The device's archetype is vetoed at the address (gate or non-finite mean).
    Infeasible(LossReason),
    /// The verification rules refuse this device now.
    Verify(VerifyError),
    /// A low-value tier whose value does not exceed its priced cost.
    NotWorthCost {
        /// The candidate's value.
        value: f64,
        /// The priced cost of one item.
        cost: f64,
    },
    /// The host's bucket has no token now.
    Politeness,
    /// The batch was already full.
    BatchFull,
    /// Filler not considered: other work was granted.
    FillerNotNeeded,
}

/// One granted item with the receipt of its decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// Target id.
    pub target: String,
    /// Its tier.
    pub tier: Tier,
    /// The decision at its address among the live archetypes.
    pub receipt: Receipt,
}

/// The outcome of one lease decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseDecision {
    /// Batch size allowed for this lease.
    pub batch: usize,
    /// The device's band as the policy treated it.
    pub band: Band,
    /// Granted items, in draw order.
    pub grants: Vec<Grant>,
    /// Candidates passed over, with the reason (in draw order).
    pub passed: Vec<(String, Pass)>,
    /// Work counters summed over the decisions made.
    pub work: Work,
}

/// The batch size for a lease: ⌈base·(1 + λ_stamp)⌉, at least 1, at most
/// `max_items` (0 when the device asked for none). A negative or non-finite
/// λ counts as 0 (prices are bounded by λ_max, so this is bad input).
pub fn batch_size(base: usize, stamp_price: f64, max_items: usize) -> usize {
    let lambda = if stamp_price.is_finite() && stamp_price > 0.0 {
        stamp_price
    } else {
        0.0
    };
    let raw = (base.max(1) as f64 * (1.0 + lambda)).ceil();
    let b = if raw.is_finite() && raw < usize::MAX as f64 {
        raw as usize
    } else {
        usize::MAX
    };
    b.clamp(1, max_items.max(1)).min(max_items)
}

/// Schedule priority of a due target: staleness × (1 + (1 − τ of its last
/// observer)) × volatility. Staleness in seconds since due (≥ 0), τ and
/// volatility ∈ [0, 1]; non-finite inputs count as 0 (τ as 0.5).
/// Source: `ROUTING.md` §3 Assignment policy, step 1.
pub fn schedule_priority(staleness_s: f64, last_observer_trust: f64, volatility: f64) -> f64 {
    let clean = |x: f64| if x.is_finite() { x.max(0.0) } else { 0.0 };
    let tau = if last_observer_trust.is_finite() {
        last_observer_trust.clamp(0.0, 1.0)
    } else {
        0.5
    };
    clean(staleness_s) * (1.0 + (1.0 - tau)) * clean(volatility).min(1.0)
}

fn check(config: &PolicyConfig, now_s: f64) -> Result<(), PolicyError> {
    if !now_s.is_finite() {
        return Err(PolicyError::BadTime(now_s));
    }
    config
        .verify
        .check()
        .map_err(|_| PolicyError::BadConfig("verification constants"))?;
    if !(config.item_cost.is_finite() && config.item_cost >= 0.0) {
        return Err(PolicyError::BadConfig("item_cost must be finite and >= 0"));
    }
    Bucket::new(config.bucket_capacity, config.bucket_rate)?;
    Ok(())
}

/// Decides the lease of `device` from `candidates` at time `now_s`
/// (seconds, the caller's clock), spending politeness tokens from `buckets`
/// (keyed by host; a host without a bucket gets a full one from the
/// configuration). Deterministic: the same inputs give the same grants.
///
/// Errors: [`PolicyError`] for a non-finite time, a configuration out of
/// range, or an address/archetype the field does not know; on error no
/// bucket was changed.
pub fn lease(
    field: &Field,
    device: &DeviceView<'_>,
    candidates: &[Candidate<'_>],
    buckets: &mut BTreeMap<String, Bucket>,
    now_s: f64,
    config: &PolicyConfig,
) -> Result<LeaseDecision, PolicyError> {
    check(config, now_s)?;
    let band = Band::of(device.trust, device.limited, config.verify.tau_hi);
    let batch = batch_size(config.batch_base, config.stamp_price, device.max_items);
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    let prio = |c: &Candidate<'_>| {
        if c.priority.is_finite() {
            c.priority
        } else {
            0.0
        }
    };
    order.sort_by(|&a, &b| {
        let (ca, cb) = (&candidates[a], &candidates[b]);
        preference(band, ca.tier)
            .cmp(&preference(band, cb.tier))
            .then(prio(cb).total_cmp(&prio(ca)))
            .then(ca.target.cmp(cb.target))
    });
    // Decide every candidate first (reads only), so an error leaves the buckets untouched.
    let mut receipts = Vec::with_capacity(order.len());
    let mut work = Work::default();
    for &i in &order {
        let c = &candidates[i];
        if let Some(r) = c.receipt {
            receipts.push(r.clone());
            continue;
        }
        let mut allowed: Vec<&str> = c.live.to_vec();
        if !allowed.contains(&device.archetype) {
            allowed.push(device.archetype);
        }
        let r = field.decide(c.address, config.temperature, &allowed)?;
        work.add(r.work);
        receipts.push(r);
    }
    let mut out = LeaseDecision {
        batch,
        band,
        grants: Vec::new(),
        passed: Vec::new(),
        work,
    };
    for (&i, receipt) in order.iter().zip(receipts) {
        let c = &candidates[i];
        if c.tier == Tier::Filler && !out.grants.is_empty() {
            out.passed
                .push((c.target.to_string(), Pass::FillerNotNeeded));
            continue;
        }
        if out.grants.len() >= batch {
            out.passed.push((c.target.to_string(), Pass::BatchFull));
            continue;
        }
        match admissible(field, device, c, &receipt, now_s, config) {
            Err(p) => out.passed.push((c.target.to_string(), p)),
            Ok(()) => {
                let bucket = match buckets.get_mut(c.host) {
                    Some(b) => b,
                    None => buckets
                        .entry(c.host.to_string())
                        .or_insert(Bucket::new(config.bucket_capacity, config.bucket_rate)?),
                };
                if bucket.admit(now_s)? {
                    out.grants.push(Grant {
                        target: c.target.to_string(),
                        tier: c.tier,
                        receipt,
                    });
                } else {
                    out.passed.push((c.target.to_string(), Pass::Politeness));
                }
            }
        }
    }
    Ok(out)
}

/// Feasibility and tier rules for one candidate (no token spent).
fn admissible(
    field: &Field,
    device: &DeviceView<'_>,
    c: &Candidate<'_>,
    receipt: &Receipt,
    now_s: f64,
    config: &PolicyConfig,
) -> Result<(), Pass> {
    if let Some(missing) = c.requires.iter().find(|r| !device.capabilities.contains(r)) {
        return Err(Pass::MissingCapability(missing.clone()));
    }
    // Gates written since a reused receipt was made still veto.
    for n in 0..=c.address.depth() {
        let p = c.address.prefix(n);
        if field.gate(&p, device.archetype) == Some(false) {
            return Err(Pass::Infeasible(LossReason::Gate(p)));
        }
    }
    if let Some(mine) = receipt
        .alternatives
        .iter()
        .find(|a| a.option == device.archetype)
    {
        if matches!(mine.reason, LossReason::Gate(_) | LossReason::NonFiniteMean) {
            return Err(Pass::Infeasible(mine.reason.clone()));
        }
    }
    if c.tier == Tier::Verification {
        let fresh = Verification::new();
        let v = c.verification.unwrap_or(&fresh);
        if !v.can_open(device.id, now_s, &config.verify) {
            let mut probe = v.clone();
            let err = probe
                .begin(device.id, now_s, &config.verify)
                .err()
                .unwrap_or(VerifyError::Full);
            return Err(Pass::Verify(err));
        }
        if related_to_a_voter(v, device, now_s, &config.verify) {
            return Err(Pass::Verify(VerifyError::AlreadyInvolved));
        }
    }
    if c.tier.low_value() {
        let value = if c.value.is_finite() { c.value } else { 0.0 };
        if value <= config.item_cost {
            return Err(Pass::NotWorthCost {
                value,
                cost: config.item_cost,
            });
        }
    }
    Ok(())
}

/// Whether `device`'s vote on the row `v` could only replace the vote of
/// an identity related to it at `now_s` (`config.relation`), so that a
/// verification would cost the device a crawl and add nothing to the
/// quorum. A device whose τ alone settles (at or above `config.tau_hi`) is
/// never refused for it, nor is one of unknown origin.
fn related_to_a_voter(
    v: &Verification,
    device: &DeviceView<'_>,
    now_s: f64,
    config: &VerifyConfig,
) -> bool {
    let Some(mine) = device.origin else {
        return false;
    };
    device.trust < config.tau_hi
        && v.votes().iter().any(|vote| {
            vote.origin
                .as_ref()
                .is_some_and(|o| o.related(mine, &config.relation, now_s))
        })
}
