//! The router's clocks: the wall clock routerd serves on, and a manual
//! clock that only moves when the operator advances it (`routerd
//! --manual-clock START_S`, `POST /v1/clock`), so a test or a replay drives
//! time, and with it every tick, instead of waiting on the wall.
//!
//! Under the manual clock no background ticker runs: each advance moves
//! the clock and then runs exactly one tick at the new time, so what a
//! request sees depends on the advances made before it, never on how fast
//! the host ran.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::api::ApiError;

/// A clock: seconds on the router's time line.
pub type Clock = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The wall clock in Unix seconds.
pub fn wall_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    })
}

/// The longest single advance, seconds (one day).
pub const MAX_ADVANCE_S: f64 = 86_400.0;

/// A clock that moves only by [`ManualClock::advance`].
#[derive(Debug)]
pub struct ManualClock {
    /// The time, seconds, as `f64` bits.
    bits: AtomicU64,
}

/// The body of `POST /v1/clock`: exactly one of `advance_s` (seconds to
/// add, in `[0, 86400]`; 0 runs a tick without moving the clock) and
/// `to_s` (the time to move to, seconds: not before the clock's reading,
/// at most 86,400 s after it), and whether to run one tick at the new time
/// (`tick`, default true). A replay that stamps each request with its own
/// time moves the clock with `tick: false` before the request and ticks
/// only where its own schedule ticks.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvanceRequest {
    /// Seconds to add.
    #[serde(default)]
    pub advance_s: Option<f64>,
    /// The time to move to, seconds.
    #[serde(default)]
    pub to_s: Option<f64>,
    /// Whether a tick runs at the new time.
    #[serde(default = "tick_by_default")]
    pub tick: bool,
}

fn tick_by_default() -> bool {
    true
}

impl AdvanceRequest {
    /// Moves `clock` as asked and returns the new time. Errors
    /// ([`ApiError::BadValue`], nothing moved): neither or both of
    /// `advance_s` and `to_s`; a step out of range.
    pub fn apply(&self, clock: &ManualClock) -> Result<f64, ApiError> {
        match (self.advance_s, self.to_s) {
            (Some(s), None) => clock.advance(s),
            (None, Some(t)) => clock.move_to(t),
            _ => Err(ApiError::bad(
                "advance_s",
                "give exactly one of advance_s and to_s",
            )),
        }
    }
}

/// The answer of `POST /v1/clock`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ClockResponse {
    /// The clock after the advance, seconds.
    pub now_s: f64,
    /// Ticks run since routerd started.
    pub ticks: u64,
}

impl ManualClock {
    /// A clock reading `start_s`. Errors: `start_s` is not finite or negative.
    pub fn new(start_s: f64) -> Result<Arc<Self>, String> {
        if !(start_s.is_finite() && start_s >= 0.0) {
            return Err(format!("the manual clock's start {start_s} must be a finite, non-negative number of seconds"));
        }
        Ok(Arc::new(ManualClock {
            bits: AtomicU64::new(start_s.to_bits()),
        }))
    }

    /// The time now, seconds.
    pub fn now(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Acquire))
    }

    /// Moves the clock forward by `s` seconds and returns the new time.
    /// Errors ([`ApiError::BadValue`], nothing moved): `s` is not in
    /// `[0, MAX_ADVANCE_S]`.
    pub fn advance(&self, s: f64) -> Result<f64, ApiError> {
        if !(s.is_finite() && (0.0..=MAX_ADVANCE_S).contains(&s)) {
            return Err(ApiError::bad("advance_s", "must be in 0..=86400 seconds"));
        }
        let mut cur = self.bits.load(Ordering::Acquire);
        loop {
            let next = (f64::from_bits(cur) + s).to_bits();
            match self
                .bits
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(f64::from_bits(next)),
                Err(seen) => cur = seen,
            }
        }
    }

    /// Moves the clock to `t` seconds and returns it. Errors
    /// ([`ApiError::BadValue`], nothing moved): `t` is not finite, before
    /// the clock's reading, or more than [`MAX_ADVANCE_S`] after it.
    pub fn move_to(&self, t: f64) -> Result<f64, ApiError> {
        let cur = self.bits.load(Ordering::Acquire);
        let now = f64::from_bits(cur);
        if !(t.is_finite() && t >= now && t - now <= MAX_ADVANCE_S) {
            return Err(ApiError::bad(
                "to_s",
                format!("must be in [{now}, {now} + 86400] seconds: the clock never goes back"),
            ));
        }
        match self
            .bits
            .compare_exchange(cur, t.to_bits(), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(t),
            // Another step moved it meanwhile: judge `t` against that.
            Err(_) => self.move_to(t),
        }
    }

    /// This clock as the router's [`Clock`].
    pub fn clock(self: &Arc<Self>) -> Clock {
        let me = self.clone();
        Arc::new(move || me.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manual_clock_moves_only_when_advanced_and_refuses_bad_steps() {
        let m = ManualClock::new(100.0).unwrap();
        let c = m.clock();
        assert_eq!(c(), 100.0);
        assert_eq!(m.advance(0.25).unwrap(), 100.25);
        assert_eq!(m.advance(0.0).unwrap(), 100.25);
        assert_eq!(c(), 100.25);
        for bad in [-1.0, f64::NAN, f64::INFINITY, MAX_ADVANCE_S + 1.0] {
            let e = m.advance(bad).unwrap_err();
            assert_eq!(e.kind(), "bad_value", "{bad}");
            assert_eq!(c(), 100.25, "a refused step moves nothing");
        }
        assert!(ManualClock::new(-1.0).is_err() && ManualClock::new(f64::NAN).is_err());
    }

    #[test]
    fn a_step_moves_to_a_time_exactly_and_never_back() {
        let m = ManualClock::new(10.0).unwrap();
        let step = |body: &str| serde_json::from_str::<AdvanceRequest>(body).unwrap();
        // 0.1 + 0.2 by addition is not 0.3; moving to it is.
        assert_eq!(
            step(r#"{"to_s": 10.3, "tick": false}"#).apply(&m).unwrap(),
            10.3
        );
        assert_eq!(m.now(), 10.3);
        assert!(!step(r#"{"to_s": 11, "tick": false}"#).tick);
        assert!(step(r#"{"advance_s": 1}"#).tick, "a step ticks by default");
        for bad in [
            r#"{"to_s": 10.29}"#,
            r#"{"to_s": 86410.31}"#,
            r#"{}"#,
            r#"{"advance_s": 1, "to_s": 12}"#,
        ] {
            let e = step(bad).apply(&m).unwrap_err();
            assert_eq!(e.kind(), "bad_value", "{bad}");
            assert_eq!(m.now(), 10.3, "a refused step moves nothing: {bad}");
        }
        assert!(serde_json::from_str::<AdvanceRequest>(r#"{"to_s": 1, "ticks": 2}"#).is_err());
    }
}
