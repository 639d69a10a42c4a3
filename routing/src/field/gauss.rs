//! Gaussian beliefs in natural parameters (precision, information).

use serde::{Deserialize, Serialize};

/// A Gaussian factor in natural parameters: precision `1/variance` (≥ 0) and
/// information `mean/variance`. Precision 0 is the flat (no-evidence) factor.
/// Source: `ROUTING.md` §3 Field.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Natural {
    /// Precision, 1/variance (units: 1/value²), ≥ 0.
    pub precision: f64,
    /// Information, mean·precision (units: 1/value).
    pub information: f64,
}

impl Natural {
    /// The flat factor (no evidence).
    pub const ZERO: Natural = Natural {
        precision: 0.0,
        information: 0.0,
    };

    /// A Gaussian with `mean` and `variance` (> 0) as natural parameters.
    pub fn from_moments(mean: f64, variance: f64) -> Natural {
        Natural {
            precision: 1.0 / variance,
            information: mean / variance,
        }
    }

    /// Mean `information/precision`; NaN when the precision is 0.
    pub fn mean(&self) -> f64 {
        self.information / self.precision
    }

    /// Variance `1/precision`; +∞ when the precision is 0.
    pub fn variance(&self) -> f64 {
        1.0 / self.precision
    }

    /// Product of two factors (sum of natural parameters).
    pub fn product(self, o: Natural) -> Natural {
        Natural {
            precision: self.precision + o.precision,
            information: self.information + o.information,
        }
    }

    /// Quotient of two factors (difference of natural parameters), the cavity.
    pub fn quotient(self, o: Natural) -> Natural {
        Natural {
            precision: self.precision - o.precision,
            information: self.information - o.information,
        }
    }

    /// Both parameters multiplied by `factor`.
    pub fn scale(self, factor: f64) -> Natural {
        Natural {
            precision: self.precision * factor,
            information: self.information * factor,
        }
    }

    /// Passes a factor on `θ(child)` through `θ(child) = θ(parent) + δ`,
    /// δ ~ N(`residual`, `variance`), giving the factor on `θ(parent)`
    /// (upward message). A flat factor stays flat.
    pub fn through_up(self, residual: f64, variance: f64) -> Natural {
        if self.precision == 0.0 {
            return Natural {
                precision: 0.0,
                information: 0.0,
            };
        }
        let d = 1.0 + self.precision * variance;
        Natural {
            precision: self.precision / d,
            information: (self.information - self.precision * residual) / d,
        }
    }

    /// Passes a proper belief on `θ(parent)` down to `θ(child) = θ(parent) + δ`,
    /// δ ~ N(`residual`, `variance`) (downward prior for the child).
    pub fn through_down(self, residual: f64, variance: f64) -> Natural {
        let mean = self.mean() + residual;
        let var = self.variance() + variance;
        Natural::from_moments(mean, var)
    }
}
