//! Evidence dynamics: clock aging of stored evidence and the fast/slow drift detector.
//!
//! Aging: precision and information scale by 2^(−Δt/48 h), so an unobserved
//! cell returns to its prior, never beyond. Drift: fast ← fast + 0.50(x −
//! fast), slow ← slow + 0.05(x − slow); after ≥ 8 baseline observations, 3
//! consecutive gaps (fast − slow) of one sign beyond the threshold confirm a
//! regime change. Source: `ROUTING.md` §3 Evidence dynamics.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Half-life of stored evidence, in hours.
pub const AGING_HALF_LIFE_H: f64 = 48.0;
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
}

/// The aging factor 2^(−|Δt|/48 h) ∈ (0, 1] for `dt_hours` elapsed (a
/// backwards clock ages as much as a forward one, never rejuvenates), to be
/// passed to `Field::discount`. Errors: [`DynamicsError::BadDuration`].
pub fn aging_factor(dt_hours: f64) -> Result<f64, DynamicsError> {
    if !dt_hours.is_finite() {
        return Err(DynamicsError::BadDuration(dt_hours));
    }
    Ok((-(dt_hours.abs()) / AGING_HALF_LIFE_H).exp2())
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
