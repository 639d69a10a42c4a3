//! Saturation: a replay whose late-cycle backlog keeps growing.
//!
//! Cycles arrive on an open-loop schedule (one every interval) and run one
//! after another, so a cycle that overruns its slot delays the next one's
//! start. A healthy host absorbs an overrun within a few cycles; a host that
//! cannot keep up falls further behind every cycle and its tail latency then
//! measures the backlog, not the work. The detector reads each cycle's start
//! lateness (actual start − intended start) and calls the run saturated when
//! the run ends inside a streak of late cycles (each started more than one
//! interval late) that is at least [`MIN_STREAK`] cycles long and over which
//! the lateness grew by at least one interval. The figures say when the
//! streak began and how late the last cycle was.

use serde::Serialize;

/// The shortest streak of late cycles that can count as saturation.
pub const MIN_STREAK: u32 = 5;

/// A saturated run's figures (all ms since the run began, or ms late).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Saturation {
    /// The first cycle of the final late streak (corpus index).
    pub since_cycle: u32,
    /// That cycle's intended start, ms since the run began.
    pub since_ms: f64,
    /// How late the last cycle started, ms.
    pub last_late_ms: f64,
    /// The backlog at the end: the last cycle's lateness over the interval,
    /// in cycles.
    pub backlog_cycles: f64,
    /// Cycles in the final late streak.
    pub streak_cycles: u32,
}

/// Feeds on each cycle's start lateness; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct SaturationDetector {
    interval_us: u64,
    /// The current late streak: (first cycle, its intended start µs, its
    /// lateness µs, length).
    streak: Option<(u32, u64, u64, u32)>,
    last_late_us: u64,
    peak_late_us: u64,
}

impl SaturationDetector {
    /// A detector for cycles arriving every `interval_us` µs (at least 1).
    pub fn new(interval_us: u64) -> Self {
        SaturationDetector {
            interval_us: interval_us.max(1),
            ..Default::default()
        }
    }

    /// One cycle started `start_us` µs after the run began, intended at
    /// `intended_us`.
    pub fn cycle(&mut self, cycle: u32, intended_us: u64, start_us: u64) {
        let late = start_us.saturating_sub(intended_us);
        self.last_late_us = late;
        self.peak_late_us = self.peak_late_us.max(late);
        if late > self.interval_us {
            match &mut self.streak {
                Some((_, _, _, n)) => *n += 1,
                None => self.streak = Some((cycle, intended_us, late, 1)),
            }
        } else {
            self.streak = None;
        }
    }

    /// The most any cycle started late, ms.
    pub fn peak_late_ms(&self) -> f64 {
        self.peak_late_us as f64 / 1e3
    }

    /// Whether the run, as fed so far, is saturated.
    pub fn verdict(&self) -> Option<Saturation> {
        let (since_cycle, since_us, first_late, n) = self.streak?;
        let grew = self.last_late_us >= first_late.saturating_add(self.interval_us);
        (n >= MIN_STREAK && grew).then(|| Saturation {
            since_cycle,
            since_ms: since_us as f64 / 1e3,
            last_late_ms: self.last_late_us as f64 / 1e3,
            backlog_cycles: self.last_late_us as f64 / self.interval_us as f64,
            streak_cycles: n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds cycles every 100 µs whose runs take `run_us(i)` each, back to
    /// back as the replay runs them.
    fn feed(n: u32, run_us: impl Fn(u32) -> u64) -> SaturationDetector {
        let mut d = SaturationDetector::new(100);
        let mut free_at = 0u64;
        for i in 0..n {
            let intended = u64::from(i) * 100;
            let start = intended.max(free_at);
            d.cycle(i, intended, start);
            free_at = start + run_us(i);
        }
        d
    }

    #[test]
    fn cycles_that_fit_their_slot_are_not_saturated() {
        assert_eq!(feed(200, |_| 90).verdict(), None);
    }

    #[test]
    fn a_burst_of_overruns_that_is_absorbed_is_not_saturated() {
        // Five cycles of 250 µs, then short ones: the backlog drains.
        let d = feed(200, |i| if (50..55).contains(&i) { 250 } else { 40 });
        assert_eq!(d.verdict(), None);
        assert!(d.peak_late_ms() > 0.1);
    }

    #[test]
    fn a_backlog_that_keeps_growing_is_saturated_from_where_it_began() {
        // From cycle 100 on every cycle takes 150 µs: +50 µs per cycle.
        let d = feed(200, |i| if i >= 100 { 150 } else { 50 });
        let s = d.verdict().expect("saturated");
        // Cycle 100 runs long, 101 starts 50 µs late, 102 100 µs late: the
        // first cycle more than one interval late is 103.
        assert_eq!(s.since_cycle, 103);
        assert_eq!(s.streak_cycles, 97);
        assert!((s.last_late_ms - 4.95).abs() < 1e-9, "{s:?}");
        assert!((s.backlog_cycles - 49.5).abs() < 1e-9);
    }

    #[test]
    fn a_constant_lateness_above_one_interval_is_not_growing() {
        // One long stall, then cycles exactly as long as their slot: the
        // lateness stays put (late, but not falling further behind).
        let d = feed(100, |i| if i == 10 { 500 } else { 100 });
        assert_eq!(d.verdict(), None);
    }

    #[test]
    fn a_short_late_streak_at_the_end_is_not_enough() {
        let d = feed(100, |i| if i >= 96 { 300 } else { 50 });
        assert_eq!(d.verdict(), None);
    }
}
