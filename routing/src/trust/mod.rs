//! Pairwise device trust updates and trust states.
//!
//! w = 2^(−|Δt|/48 h); agree: τ ← τ + 0.02·τ_other·w; disagree: τ ← τ −
//! 0.04·τ_other·w·(1 − v); both sides from pre-update values; clamp to [0, 1],
//! non-finite → 0.5. Source: `ROUTING.md` §3 Trust.

use serde::{Deserialize, Serialize};

/// Starting trust of a new device.
pub const INITIAL: f64 = 0.5;
/// Freshness half-life in hours.
pub const HALF_LIFE_H: f64 = 48.0;
/// Gain per agreement (times the other's trust and freshness).
pub const AGREE_GAIN: f64 = 0.02;
/// Loss per disagreement (times the other's trust, freshness and 1 − volatility).
pub const DISAGREE_LOSS: f64 = 0.04;
/// τ_hi: trusted at or above.
pub const TRUSTED_AT: f64 = 0.8;
/// Limited below.
pub const LIMITED_BELOW: f64 = 0.3;

/// Freshness weight 2^(−|Δt|/48 h) for `dt_hours` apart; non-finite → 0.
pub fn freshness(dt_hours: f64) -> f64 {
    let w = (-(dt_hours.abs()) / HALF_LIFE_H).exp2();
    if w.is_finite() {
        w
    } else {
        0.0
    }
}

fn clamp(t: f64) -> f64 {
    if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        INITIAL
    }
}

/// Updates two devices' trust `(a, b)` (each in [0, 1]; out-of-range is
/// clamped, non-finite read as 0.5) after comparing their observations of
/// one target made `dt_hours` apart: `agree` = same content hash;
/// `volatility` ∈ [0, 1] of the source (clamped; non-finite read as 0) damps
/// disagreement. Both updates use the pre-update values. Returns the new
/// `(a, b)`, each in [0, 1].
pub fn pairwise(a: f64, b: f64, agree: bool, dt_hours: f64, volatility: f64) -> (f64, f64) {
    let (a, b) = (clamp(a), clamp(b));
    let w = freshness(dt_hours);
    let v = if volatility.is_finite() {
        volatility.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let step = |other: f64| {
        if agree {
            AGREE_GAIN * other * w
        } else {
            -DISAGREE_LOSS * other * w * (1.0 - v)
        }
    };
    (clamp(a + step(b)), clamp(b + step(a)))
}

/// A device's trust state. Source: `ROUTING.md` §3 Trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// τ ≥ 0.8.
    Trusted,
    /// 0.3 ≤ τ < 0.8.
    Normal,
    /// τ < 0.3.
    Limited,
    /// Set by the operator; sticky.
    Suspended,
    /// Set by the operator; sticky.
    Revoked,
}

impl State {
    /// The state for trust `tau` given the `previous` state: suspended and
    /// revoked are sticky (only the operator sets or lifts them); otherwise
    /// from τ (non-finite read as 0.5).
    pub fn classify(previous: State, tau: f64) -> State {
        match previous {
            State::Suspended | State::Revoked => previous,
            _ => {
                let t = clamp(tau);
                if t >= TRUSTED_AT {
                    State::Trusted
                } else if t < LIMITED_BELOW {
                    State::Limited
                } else {
                    State::Normal
                }
            }
        }
    }
}

mod cap;
mod churn;
mod cluster;
mod origin;

pub use cap::treated_as_limited;
pub use churn::{Churn, CHURN_CHANGES, CHURN_COOLDOWN_H, CHURN_WINDOW_H};
pub use cluster::{AdapterKey, Clusters, Restoration};
pub use origin::{independent, network_of, Origin, Relation, BURST_HOLD_S, BURST_S};
