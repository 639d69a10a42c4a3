//! Churn cooldown: a target whose content changes too often stops producing trust events.

use serde::{Deserialize, Serialize};

/// Content changes within [`CHURN_WINDOW_H`] that start a cooldown.
pub const CHURN_CHANGES: usize = 6;
/// Window over which changes are counted, hours.
pub const CHURN_WINDOW_H: f64 = 24.0;
/// Cooldown length, hours: no re-observation, no trust events.
pub const CHURN_COOLDOWN_H: f64 = 24.0;

/// Per-target churn state. Times are hours on any fixed origin (an argument, never a clock).
/// Source: `ROUTING.md` §3 Trust.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Churn {
    changes: Vec<f64>,
    cooling_until: Option<f64>,
}

impl Churn {
    /// Records a content change at `t_h` (non-finite times are ignored) and
    /// returns whether the target is cooling down at `t_h` afterwards.
    pub fn record_change(&mut self, t_h: f64) -> bool {
        if t_h.is_finite() {
            self.changes
                .retain(|c| t_h - c < CHURN_WINDOW_H && *c <= t_h);
            self.changes.push(t_h);
            if self.changes.len() >= CHURN_CHANGES {
                self.cooling_until = Some(t_h + CHURN_COOLDOWN_H);
                self.changes.clear();
            }
        }
        self.cooling(t_h)
    }

    /// Whether the target is cooling down at `t_h` (no re-observation, no trust events).
    pub fn cooling(&self, t_h: f64) -> bool {
        matches!(self.cooling_until, Some(u) if t_h < u)
    }
}
