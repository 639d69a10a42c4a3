//! Evidence dynamics: clock aging of stored evidence and the fast/slow drift detector.
//!
//! Aging: precision and information scale by 2^(−Δt/48 h), so an unobserved
//! cell returns to its prior, never beyond. Drift: fast ← fast + 0.50(x −
//! fast), slow ← slow + 0.05(x − slow); after ≥ 8 baseline observations, 3
//! consecutive gaps (fast − slow) of one sign beyond the threshold confirm a
//! regime change. Source: `ROUTING.md` §3 Evidence dynamics.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::field::{Address, Field, FieldError};

pub use crate::field::AGING_HALF_LIFE_H;
/// Factor applied to a cell's old precision and information on confirmation.
pub const CONFIRM_DISCOUNT: f64 = 0.20;
/// Gap threshold for `reliability` inputs (x = 1 − ok).
pub const RELIABILITY_THRESHOLD: f64 = 0.35;
/// Gap threshold for `latency` inputs (x = ln seconds).
pub const LATENCY_THRESHOLD: f64 = 0.50;
/// Entries kept in a detector's trace.
pub const TRACE_LEN: usize = 32;

/// Errors of the dynamics module.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DynamicsError {
    /// A duration that is not finite.
    #[error("elapsed time must be finite, got {0}")]
    BadDuration(f64),
    /// A drift input that is not finite.
    #[error("drift input must be finite, got {0}")]
    NonFinite(f64),
    /// A configuration value outside its range.
    #[error("bad drift configuration: {0}")]
    BadConfig(&'static str),
    /// The field refused the update.
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// The aging factor 2^(−|Δt|/48 h) ∈ (0, 1] for `dt_hours` elapsed (a
/// backwards clock ages as much as a forward one, never rejuvenates), to be
/// passed to `Field::discount`. Errors: [`DynamicsError::BadDuration`].
pub fn aging_factor(dt_hours: f64) -> Result<f64, DynamicsError> {
    crate::field::aging_factor(dt_hours).map_err(|_| DynamicsError::BadDuration(dt_hours))
}

/// Drift detector constants (configuration; defaults from the brief).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DriftConfig {
    /// Fast estimate step, (0, 1].
    pub fast: f64,
    /// Slow estimate step, (0, 1].
    pub slow: f64,
    /// Baseline observations required before gaps count.
    pub baseline: u32,
    /// Consecutive same-sign gaps required to confirm.
    pub streak: u32,
    /// Gap threshold (input units), > 0.
    pub threshold: f64,
}

impl DriftConfig {
    /// The brief's constants with `threshold` ([`RELIABILITY_THRESHOLD`] or
    /// [`LATENCY_THRESHOLD`]).
    pub fn with_threshold(threshold: f64) -> DriftConfig {
        DriftConfig {
            fast: 0.50,
            slow: 0.05,
            baseline: 8,
            streak: 3,
            threshold,
        }
    }
}

/// What one drift observation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DriftEvent {
    /// Still collecting the baseline.
    Baseline,
    /// Gap within the threshold, or a streak not yet long enough.
    Quiet,
    /// A regime change is confirmed: the caller discounts the cell's old
    /// evidence by [`CONFIRM_DISCOUNT`], applies the new outcome normally;
    /// the detector has already rebased.
    Confirmed,
}

/// One fast/slow detector per (binding, archetype, dimension).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    config: DriftConfig,
    fast: f64,
    slow: f64,
    seen: u32,
    run: u32,
    run_sign: f64,
    observations: u64,
    confirmations: u64,
    trace: Vec<(u64, f64, f64)>,
}

impl Drift {
    /// A detector with `config`. Errors: [`DynamicsError::BadConfig`] for
    /// steps outside (0, 1], a non-positive or non-finite threshold, or a streak of 0.
    pub fn new(config: DriftConfig) -> Result<Drift, DynamicsError> {
        let step_ok = |s: f64| s > 0.0 && s <= 1.0;
        if !step_ok(config.fast) || !step_ok(config.slow) {
            return Err(DynamicsError::BadConfig("steps must lie in (0, 1]"));
        }
        if !(config.threshold.is_finite() && config.threshold > 0.0) {
            return Err(DynamicsError::BadConfig("threshold must be finite and > 0"));
        }
        if config.streak == 0 {
            return Err(DynamicsError::BadConfig("streak must be >= 1"));
        }
        Ok(Drift {
            config,
            fast: 0.0,
            slow: 0.0,
            seen: 0,
            run: 0,
            run_sign: 0.0,
            observations: 0,
            confirmations: 0,
            trace: Vec::new(),
        })
    }

    /// Feeds one input `x` (finite; 1 − ok, or ln seconds). The first input
    /// after creation or a rebase seeds both estimates.
    /// Errors: [`DynamicsError::NonFinite`] (the detector is unchanged).
    pub fn observe(&mut self, x: f64) -> Result<DriftEvent, DynamicsError> {
        if !x.is_finite() {
            return Err(DynamicsError::NonFinite(x));
        }
        self.observations += 1;
        if self.observations == 1 {
            self.fast = x;
            self.slow = x;
        } else {
            self.fast += self.config.fast * (x - self.fast);
            self.slow += self.config.slow * (x - self.slow);
        }
        self.seen = self.seen.saturating_add(1);
        if self.seen < self.config.baseline {
            return Ok(DriftEvent::Baseline);
        }
        let gap = self.fast - self.slow;
        if gap.abs() > self.config.threshold {
            let sign = gap.signum();
            self.run = if sign == self.run_sign {
                self.run + 1
            } else {
                1
            };
            self.run_sign = sign;
        } else {
            self.run = 0;
            self.run_sign = 0.0;
        }
        if self.run >= self.config.streak {
            self.confirmations += 1;
            if self.trace.len() == TRACE_LEN {
                self.trace.remove(0);
            }
            self.trace.push((self.observations, self.fast, self.slow));
            self.slow = self.fast;
            self.seen = 0;
            self.run = 0;
            self.run_sign = 0.0;
            return Ok(DriftEvent::Confirmed);
        }
        Ok(DriftEvent::Quiet)
    }

    /// Inputs fed so far.
    pub fn observations(&self) -> u64 {
        self.observations
    }

    /// Confirmations so far.
    pub fn confirmations(&self) -> u64 {
        self.confirmations
    }

    /// The last (at most [`TRACE_LEN`]) confirmations: (observation index, fast, slow).
    pub fn trace(&self) -> &[(u64, f64, f64)] {
        &self.trace
    }

    /// Current (fast, slow) estimates.
    pub fn estimates(&self) -> (f64, f64) {
        (self.fast, self.slow)
    }
}

/// One confirmed drift, as kept in a [`DriftBank`]'s bounded trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftRecord {
    /// Time of the confirming observation (seconds, the caller's clock).
    pub t_s: f64,
    /// The cell whose old evidence was discounted (the binding prefix).
    pub cell: Address,
    /// Option (archetype).
    pub option: String,
    /// Dimension (`reliability` or `latency`).
    pub dimension: String,
    /// Fast estimate at confirmation.
    pub fast: f64,
    /// Slow estimate at confirmation (before the rebase).
    pub slow: f64,
}

/// Detectors per (binding cell, option, dimension), wired to a field: each
/// outcome feeds its detector, and a confirmation discounts that cell's old
/// own evidence by [`CONFIRM_DISCOUNT`] before the new outcome is applied.
/// Only the `reliability` and `latency` dimensions are tracked.
/// Source: `ROUTING.md` §3 Evidence dynamics (b).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftBank {
    reliability: DriftConfig,
    latency: DriftConfig,
    #[serde(with = "bank_list")]
    detectors: BTreeMap<(Address, String, String), Drift>,
    observations: u64,
    confirmations: u64,
    trace: VecDeque<DriftRecord>,
}

impl Default for DriftBank {
    fn default() -> Self {
        DriftBank {
            reliability: DriftConfig::with_threshold(RELIABILITY_THRESHOLD),
            latency: DriftConfig::with_threshold(LATENCY_THRESHOLD),
            detectors: BTreeMap::new(),
            observations: 0,
            confirmations: 0,
            trace: VecDeque::new(),
        }
    }
}

impl DriftBank {
    /// A bank with the given detector constants for `reliability` and
    /// `latency`. Errors: [`DynamicsError::BadConfig`] as [`Drift::new`].
    pub fn new(reliability: DriftConfig, latency: DriftConfig) -> Result<DriftBank, DynamicsError> {
        Drift::new(reliability)?;
        Drift::new(latency)?;
        Ok(DriftBank {
            reliability,
            latency,
            detectors: BTreeMap::new(),
            observations: 0,
            confirmations: 0,
            trace: VecDeque::new(),
        })
    }

    /// Folds one outcome `x` (variance `variance`) of `option` in
    /// `dimension` observed at `leaf` into `field`, through the detector of
    /// (`cell`, option, dimension); `cell` is the prefix of `leaf` that holds
    /// the long-lived evidence (the binding). On confirmation the cell's own
    /// evidence is discounted by [`CONFIRM_DISCOUNT`] first, then `x` is
    /// observed normally; the detector has rebased. Untracked dimensions are
    /// observed without a detector (`Quiet`).
    ///
    /// Errors: [`DynamicsError::NonFinite`] and the field's errors; on error
    /// neither the field nor the bank changed.
    #[allow(clippy::too_many_arguments)]
    pub fn fold(
        &mut self,
        field: &mut Field,
        cell: &Address,
        leaf: &Address,
        option: &str,
        dimension: &str,
        x: f64,
        variance: f64,
        t_s: f64,
    ) -> Result<DriftEvent, DynamicsError> {
        if !x.is_finite() {
            return Err(DynamicsError::NonFinite(x));
        }
        if !(variance.is_finite() && variance > 0.0) {
            return Err(DynamicsError::Field(FieldError::BadVariance(variance)));
        }
        // Validate the addresses and names before touching the detector.
        field.posterior(leaf, option, dimension)?;
        field.posterior(cell, option, dimension)?;
        let config = match dimension {
            "reliability" => self.reliability,
            "latency" => self.latency,
            _ => {
                field.observe(leaf, option, dimension, x, variance)?;
                return Ok(DriftEvent::Quiet);
            }
        };
        let key = (cell.clone(), option.to_string(), dimension.to_string());
        let detector = match self.detectors.get_mut(&key) {
            Some(d) => d,
            None => self.detectors.entry(key).or_insert(Drift::new(config)?),
        };
        let (_, slow0) = detector.estimates();
        let event = detector.observe(x)?;
        self.observations += 1;
        if event == DriftEvent::Confirmed {
            field.discount(cell, option, dimension, CONFIRM_DISCOUNT)?;
            self.confirmations += 1;
            let (fast, _) = detector.estimates();
            if self.trace.len() == TRACE_LEN {
                self.trace.pop_front();
            }
            self.trace.push_back(DriftRecord {
                t_s,
                cell: cell.clone(),
                option: option.to_string(),
                dimension: dimension.to_string(),
                fast,
                slow: if detector.observations() == 1 {
                    x
                } else {
                    slow0 + config.slow * (x - slow0)
                },
            });
        }
        field.observe(leaf, option, dimension, x, variance)?;
        Ok(event)
    }

    /// Outcomes fed to detectors so far.
    pub fn observations(&self) -> u64 {
        self.observations
    }

    /// Confirmed drifts so far.
    pub fn confirmations(&self) -> u64 {
        self.confirmations
    }

    /// The last (at most [`TRACE_LEN`]) confirmations, oldest first.
    pub fn trace(&self) -> impl Iterator<Item = &DriftRecord> {
        self.trace.iter()
    }

    /// Detectors held.
    pub fn len(&self) -> usize {
        self.detectors.len()
    }

    /// Whether no detector exists yet.
    pub fn is_empty(&self) -> bool {
        self.detectors.is_empty()
    }
}

/// Serializes the detector map as a list (JSON maps need string keys).
mod bank_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Drift;
    use crate::field::Address;

    type Bank = BTreeMap<(Address, String, String), Drift>;

    pub fn serialize<S: Serializer>(bank: &Bank, s: S) -> Result<S::Ok, S::Error> {
        let list: Vec<(&Address, &String, &String, &Drift)> =
            bank.iter().map(|((a, o, d), v)| (a, o, d, v)).collect();
        list.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bank, D::Error> {
        let list: Vec<(Address, String, String, Drift)> = Vec::deserialize(d)?;
        Ok(list
            .into_iter()
            .map(|(a, o, d, v)| ((a, o, d), v))
            .collect())
    }
}
