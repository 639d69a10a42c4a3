//! Other processes' CPU on the fleet's CPUs, over a trailing window: what
//! tells the lend guard that a starved cycle thread was starved by another
//! process (decision 0022) and not by the host's own threads or by the
//! fleet's own work leaving a core idle.
//!
//! The kernel's per-CPU busy time over the CPUs of the process's affinity
//! mask ([`super::busy`]), less the process's own CPU time, is the CPU the
//! rest of the host used there. Each CPU's counter may run ahead of the
//! truth by up to its clock's slack (a truncated tick, or a task's runtime
//! not yet charged), so the figure is a lower bound: that slack per CPU
//! less than the busy time counted. Every span of the last [`WINDOW`]
//! checks that ends now and is at least [`MIN_SPAN`] intervals long is a
//! bound of its own, and the busiest is the verdict. It never blames a
//! neighbour that did not run, and a neighbour that began inside the window
//! shows once its own span outweighs the slack, not the quiet part before
//! it (the first cycles beside a neighbour are where a late guard shows).

use std::collections::VecDeque;
use std::time::Instant;

/// Checks in the trailing window (100 ms at the guard's 10 ms period).
pub(crate) const WINDOW: usize = 10;

/// The shortest span judged, in check intervals (20 ms at the guard's
/// period): over one interval the counters' truncation outweighs what
/// they count.
pub(crate) const MIN_SPAN: usize = 2;

/// One check's reading.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    busy_ns: u64,
    process_ns: u64,
}

/// The trailing window of readings.
#[derive(Debug)]
pub(crate) struct Others {
    /// What each CPU's counter may run ahead of the truth, ns.
    slack_ns: f64,
    /// The CPUs counted.
    cpus: u64,
    readings: VecDeque<Reading>,
}

impl Others {
    /// A window over `cpus` CPUs whose busy counters may each run ahead
    /// of the truth by `slack_ns` ([`super::busy::BusyClock::slack_ns`]).
    pub(crate) fn new(slack_ns: f64, cpus: usize) -> Others {
        Others {
            slack_ns: slack_ns.max(0.0),
            cpus: cpus as u64,
            readings: VecDeque::with_capacity(WINDOW + 1),
        }
    }

    /// Records a check at `at` (`busy_ns` of the mask's CPUs, the
    /// process's CPU time `process_ns`) and returns a lower bound on the
    /// cores the rest of the host used on those CPUs over the busiest span
    /// that ends now (see the module docs; never below 0), or `None` at the
    /// first check. A counter that went back starts the window again.
    pub(crate) fn record(&mut self, at: Instant, busy_ns: u64, process_ns: u64) -> Option<f64> {
        if let Some(last) = self.readings.back() {
            if busy_ns < last.busy_ns || process_ns < last.process_ns || at < last.at {
                self.readings.clear();
            }
        }
        self.readings.push_back(Reading {
            at,
            busy_ns,
            process_ns,
        });
        while self.readings.len() > WINDOW + 1 {
            self.readings.pop_front();
        }
        if self.readings.len() < 2 {
            return None;
        }
        let last = *self.readings.back()?;
        // Every span that ends now and is at least MIN_SPAN intervals long
        // (or the whole window while it is shorter) is a lower bound of its
        // own; the busiest is the verdict.
        let n = self.readings.len();
        let starts = n - MIN_SPAN.min(n - 1);
        self.readings
            .iter()
            .take(starts)
            .filter_map(|&first| self.bound(first, last))
            .reduce(f64::max)
    }

    /// The lower bound over `first..=last`: busy time less the slack of
    /// each CPU, less the process's time, over the wall time; never below 0.
    fn bound(&self, first: Reading, last: Reading) -> Option<f64> {
        let wall = last.at.saturating_duration_since(first.at).as_nanos() as f64;
        if wall <= 0.0 {
            return None;
        }
        let counted = (last.busy_ns - first.busy_ns) as f64;
        let busy = (counted - self.slack_ns * self.cpus as f64).max(0.0);
        let process = (last.process_ns - first.process_ns) as f64;
        Some(((busy - process) / wall).max(0.0))
    }
}

/// This process's allowed CPUs (its affinity mask); empty where it cannot
/// be read.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    crate::affinity::AffinityMask::capture()
        .map(|m| m.cpus().to_vec())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// One `/proc/stat` tick at 100 Hz, ns: the slack of its counters.
    const TICK: u64 = 10_000_000;

    #[test]
    fn the_window_gives_a_lower_bound_on_other_processes_cores() {
        let t0 = Instant::now();
        let step = Duration::from_millis(10);
        let at = |i: u64| t0 + step * i as u32;
        let n = WINDOW as u64;
        // Each 10 ms: 2 ticks busy on the mask (two cores), 5 ms of it the
        // process's: the rest of the host used 1.5 cores.
        let mut w = Others::new(TICK as f64, 2);
        assert_eq!(w.record(at(0), 0, 0), None, "one check is no span");
        // After one check the bound is (2 − 2) ticks: nothing known yet.
        assert_eq!(w.record(at(1), 2 * TICK, 5_000_000), Some(0.0));
        // After two: (4 − 2) ticks = 20 ms, less 10 ms of the process's,
        // over 20 ms: half a core.
        let two = w.record(at(2), 4 * TICK, 10_000_000).unwrap();
        assert!((two - 0.5).abs() < 1e-9, "{two}");
        for i in 3..=n {
            w.record(at(i), (2 * i) * TICK, 5_000_000 * i);
        }
        // Full: (20 − 2) ticks = 180 ms, less 50 ms, over 100 ms.
        let full = w
            .record(at(n + 1), (2 * (n + 1)) * TICK, 5_000_000 * (n + 1))
            .unwrap();
        assert!((full - 1.3).abs() < 1e-9, "{full}");
        // The window slides: only the last WINDOW checks count.
        let later = w.record(at(n + 2), (2 * (n + 2) + 10) * TICK, 0);
        assert!(later.is_none(), "the process's clock went back: restarted");
        // The process used it all: nobody else, never below zero, however
        // the ticks were truncated.
        let mut w = Others::new(TICK as f64, 2);
        for i in 0..=n {
            let got = w.record(at(i), (2 * i + i % 2) * TICK, 20_000_000 * i);
            assert!(got.is_none_or(|c| c == 0.0), "{i}: {got:?}");
        }
    }

    #[test]
    fn a_neighbour_that_starts_inside_the_window_shows_in_its_own_span() {
        let t0 = Instant::now();
        let step = Duration::from_millis(10);
        let at = |i: u64| t0 + step * i as u32;
        let n = WINDOW as u64;
        // A full window of a quiet host: the process alone, one tick a
        // check, its own time.
        let mut w = Others::new(TICK as f64, 2);
        for i in 0..=n {
            let got = w.record(at(i), i * TICK, 10_000_000 * i);
            assert!(got.is_none_or(|c| c == 0.0), "{i}: {got:?}");
        }
        // Then a neighbour takes both cores: 2 ticks a check, none of them
        // the process's.
        let (ticks, process) = (n, 10_000_000 * n);
        let one = w.record(at(n + 1), (ticks + 2) * TICK, process).unwrap();
        assert_eq!(one, 0.0, "one interval is under the shortest span");
        let two = w.record(at(n + 2), (ticks + 4) * TICK, process).unwrap();
        // Over its own two intervals: (4 − 2) ticks over 20 ms, one core.
        // The whole window (the last 10 intervals) says (12 − 2) ticks less
        // 80 ms of the process's over 100 ms: 0.2 core, under the slack.
        assert!((two - 1.0).abs() < 1e-9, "{two}");
        let three = w.record(at(n + 3), (ticks + 6) * TICK, process).unwrap();
        assert!((three - 4.0 / 3.0).abs() < 1e-9, "{three}");
        // It is still a lower bound: spans that reach back into the quiet
        // part are diluted, never raised.
        assert!(three < 2.0);
    }
}
