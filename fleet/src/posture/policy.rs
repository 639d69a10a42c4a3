//! The posture policy: six typed keys, a partial patch, one validation.
//!
//! Source: `DESIGN.md` §3 "Posture"; seed 000 §6 (the runtime retune channel).

use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

/// The six posture keys. `Default` is the design's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PosturePolicy {
    /// Throttle events that enter the cordon within the enter window (≥ 1; default 2).
    pub cordon_enter_events: u32,
    /// Rolling window for the event count, ms (> 0; default 1000).
    pub cordon_enter_window_ms: u64,
    /// Throttled-time duty that enters the cordon, percent of wall time,
    /// in (0, 100] (default 2.0).
    pub cordon_duty_percent: f64,
    /// Trailing window for the duty, ms (> 0; default 5000).
    pub cordon_duty_window_ms: u64,
    /// Clean time (no throttling) that exits the cordon, ms (> 0; default 10000).
    pub cordon_exit_clean_ms: u64,
    /// Sims in flight allowed while cordoned, seats (≥ 1 when set; unset =
    /// half the sim slot cap, at least 1).
    pub cordon_sim_intake_floor: Option<u32>,
}

impl Default for PosturePolicy {
    fn default() -> Self {
        PosturePolicy {
            cordon_enter_events: 2,
            cordon_enter_window_ms: 1000,
            cordon_duty_percent: 2.0,
            cordon_duty_window_ms: 5000,
            cordon_exit_clean_ms: 10_000,
            cordon_sim_intake_floor: None,
        }
    }
}

/// A rejected posture value. Each key has its own variant; nothing is clamped.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PostureRetuneError {
    /// A patch must change at least one key.
    #[error("empty posture patch: set at least one of the six cordon_* keys")]
    EmptyPatch,
    /// `cordon_enter_events` must be ≥ 1.
    #[error("cordon_enter_events = {value} is invalid: it must be at least 1")]
    EnterEventsBelowOne {
        /// The rejected value.
        value: u32,
    },
    /// `cordon_enter_window_ms` must be > 0.
    #[error("cordon_enter_window_ms = 0 is invalid: the window must be longer than 0 ms")]
    EnterWindowZero,
    /// `cordon_duty_percent` must be in (0, 100].
    #[error("cordon_duty_percent = {value} is invalid: it must be above 0 and at most 100")]
    DutyPercentOutOfRange {
        /// The rejected value.
        value: f64,
    },
    /// `cordon_duty_window_ms` must be > 0.
    #[error("cordon_duty_window_ms = 0 is invalid: the window must be longer than 0 ms")]
    DutyWindowZero,
    /// `cordon_exit_clean_ms` must be > 0.
    #[error("cordon_exit_clean_ms = 0 is invalid: the clean window must be longer than 0 ms")]
    ExitCleanZero,
    /// `cordon_sim_intake_floor` must be ≥ 1 when set.
    #[error(
        "cordon_sim_intake_floor = 0 is invalid: set at least 1, or null for half the sim slot cap"
    )]
    SimIntakeFloorZero,
}

impl PosturePolicy {
    /// Check every key. Errors: the first invalid key's own variant.
    pub fn validate(&self) -> Result<(), PostureRetuneError> {
        if self.cordon_enter_events < 1 {
            return Err(PostureRetuneError::EnterEventsBelowOne {
                value: self.cordon_enter_events,
            });
        }
        if self.cordon_enter_window_ms == 0 {
            return Err(PostureRetuneError::EnterWindowZero);
        }
        let d = self.cordon_duty_percent;
        if !(d > 0.0 && d <= 100.0) {
            return Err(PostureRetuneError::DutyPercentOutOfRange { value: d });
        }
        if self.cordon_duty_window_ms == 0 {
            return Err(PostureRetuneError::DutyWindowZero);
        }
        if self.cordon_exit_clean_ms == 0 {
            return Err(PostureRetuneError::ExitCleanZero);
        }
        if self.cordon_sim_intake_floor == Some(0) {
            return Err(PostureRetuneError::SimIntakeFloorZero);
        }
        Ok(())
    }

    /// The sim intake cap while cordoned for a slot cap, seats: the floor
    /// when set, else half the cap; never above the cap, never below 1.
    pub fn cordoned_sim_cap(&self, sim_slot_cap: u32) -> u32 {
        let floor = self.cordon_sim_intake_floor.unwrap_or(sim_slot_cap / 2);
        floor.min(sim_slot_cap).max(1)
    }

    /// `(key, old, new)` for every key that differs between `self` and `new`.
    pub fn diff(&self, new: &PosturePolicy) -> Vec<(&'static str, String, String)> {
        let floor = |f: Option<u32>| f.map_or("unset".to_string(), |v| v.to_string());
        let pairs = [
            (
                "cordon_enter_events",
                self.cordon_enter_events.to_string(),
                new.cordon_enter_events.to_string(),
            ),
            (
                "cordon_enter_window_ms",
                self.cordon_enter_window_ms.to_string(),
                new.cordon_enter_window_ms.to_string(),
            ),
            (
                "cordon_duty_percent",
                self.cordon_duty_percent.to_string(),
                new.cordon_duty_percent.to_string(),
            ),
            (
                "cordon_duty_window_ms",
                self.cordon_duty_window_ms.to_string(),
                new.cordon_duty_window_ms.to_string(),
            ),
            (
                "cordon_exit_clean_ms",
                self.cordon_exit_clean_ms.to_string(),
                new.cordon_exit_clean_ms.to_string(),
            ),
            (
                "cordon_sim_intake_floor",
                floor(self.cordon_sim_intake_floor),
                floor(new.cordon_sim_intake_floor),
            ),
        ];
        pairs.into_iter().filter(|(_, a, b)| a != b).collect()
    }
}

fn double_option<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A partial retune: absent keys keep the live value. For the floor,
/// absent keeps it, `Some(None)` (JSON/TOML `null`) restores half the cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PosturePolicyPatch {
    /// New `cordon_enter_events`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon_enter_events: Option<u32>,
    /// New `cordon_enter_window_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon_enter_window_ms: Option<u64>,
    /// New `cordon_duty_percent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon_duty_percent: Option<f64>,
    /// New `cordon_duty_window_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon_duty_window_ms: Option<u64>,
    /// New `cordon_exit_clean_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon_exit_clean_ms: Option<u64>,
    /// New `cordon_sim_intake_floor` (`Some(None)` = unset).
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub cordon_sim_intake_floor: Option<Option<u32>>,
}

impl PosturePolicyPatch {
    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        *self == PosturePolicyPatch::default()
    }

    /// Validate the patch on its own (the keys it sets) and apply it over
    /// `base`. Errors: [`PostureRetuneError::EmptyPatch`] or the first
    /// invalid key's own variant.
    pub fn apply(&self, base: &PosturePolicy) -> Result<PosturePolicy, PostureRetuneError> {
        if self.is_empty() {
            return Err(PostureRetuneError::EmptyPatch);
        }
        let next = PosturePolicy {
            cordon_enter_events: self.cordon_enter_events.unwrap_or(base.cordon_enter_events),
            cordon_enter_window_ms: self
                .cordon_enter_window_ms
                .unwrap_or(base.cordon_enter_window_ms),
            cordon_duty_percent: self.cordon_duty_percent.unwrap_or(base.cordon_duty_percent),
            cordon_duty_window_ms: self
                .cordon_duty_window_ms
                .unwrap_or(base.cordon_duty_window_ms),
            cordon_exit_clean_ms: self
                .cordon_exit_clean_ms
                .unwrap_or(base.cordon_exit_clean_ms),
            cordon_sim_intake_floor: self
                .cordon_sim_intake_floor
                .unwrap_or(base.cordon_sim_intake_floor),
        };
        next.validate()?;
        Ok(next)
    }
}
