//! Metered pools and their price tick.
//!
//! λ ← min(max(0, λ + α(usage − cap)), λ_max), usage summed in sorted order.
//! Source: `ROUTING.md` §3 Prices.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Errors of pool configuration. Source: `ROUTING.md` §3 Prices.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PriceError {
    /// Capacity must be finite and ≥ 0.
    #[error("capacity must be finite and >= 0, got {0}")]
    BadCapacity(f64),
    /// α must be finite and > 0.
    #[error("step alpha must be finite and > 0, got {0}")]
    BadAlpha(f64),
    /// λ_max must be finite and ≥ 0.
    #[error("lambda_max must be finite and >= 0, got {0}")]
    BadLambdaMax(f64),
}

/// One metered pool: capacity per window, step α, ceiling λ_max and price λ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    cap: f64,
    alpha: f64,
    lambda_max: f64,
    lambda: f64,
}

/// Default step α (price per unit of excess usage). Source: `ROUTING.md` §3 Prices.
pub const DEFAULT_ALPHA: f64 = 0.1;
/// Default price ceiling λ_max. Source: `ROUTING.md` §3 Prices.
pub const DEFAULT_LAMBDA_MAX: f64 = 1e6;

impl Pool {
    /// A pool with capacity `cap` (usage units per window, finite, ≥ 0), step
    /// `alpha` (finite, > 0), ceiling `lambda_max` (finite, ≥ 0); price starts at 0.
    /// Errors: [`PriceError`].
    pub fn new(cap: f64, alpha: f64, lambda_max: f64) -> Result<Pool, PriceError> {
        if !(cap.is_finite() && cap >= 0.0) {
            return Err(PriceError::BadCapacity(cap));
        }
        if !(alpha.is_finite() && alpha > 0.0) {
            return Err(PriceError::BadAlpha(alpha));
        }
        if !(lambda_max.is_finite() && lambda_max >= 0.0) {
            return Err(PriceError::BadLambdaMax(lambda_max));
        }
        Ok(Pool {
            cap,
            alpha,
            lambda_max,
            lambda: 0.0,
        })
    }

    /// A pool with capacity `cap` and the default α and λ_max. Errors: [`PriceError`].
    pub fn with_cap(cap: f64) -> Result<Pool, PriceError> {
        Pool::new(cap, DEFAULT_ALPHA, DEFAULT_LAMBDA_MAX)
    }

    /// The capacity per window (usage units).
    pub fn cap(&self) -> f64 {
        self.cap
    }

    /// Changes the capacity (finite, ≥ 0), keeping the current price.
    /// Errors: [`PriceError::BadCapacity`] (nothing changed).
    pub fn set_cap(&mut self, cap: f64) -> Result<(), PriceError> {
        if !(cap.is_finite() && cap >= 0.0) {
            return Err(PriceError::BadCapacity(cap));
        }
        self.cap = cap;
        Ok(())
    }

    /// The current price λ (cost units per usage unit), in [0, λ_max].
    pub fn price(&self) -> f64 {
        self.lambda
    }

    /// One window's tick with the charges `usages` of that window (an empty
    /// slice is an idle window, usage 0). Charges are summed in sorted order,
    /// so the result does not depend on their arrival order. If the sum is
    /// not finite the price is held. Returns the new price.
    pub fn tick(&mut self, usages: &[f64]) -> f64 {
        let mut sorted = usages.to_vec();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let usage: f64 = sorted.iter().sum();
        if usage.is_finite() {
            let next = self.lambda + self.alpha * (usage - self.cap);
            self.lambda = next.max(0.0).min(self.lambda_max);
        }
        self.lambda
    }
}
