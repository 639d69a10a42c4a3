//! Other processes' CPU on the fleet's CPUs, over a trailing window: what
//! tells the lend guard that a starved cycle thread was starved by another
//! process (decision 0022) and not by the host's own threads or by the
//! fleet's own work leaving a core idle.
//!
//! The kernel's per-CPU busy time (`/proc/stat`'s `cpuN` lines: user, nice,
//! system, irq and softirq, in clock ticks, `USER_HZ`) over the CPUs of the
//! process's affinity mask, less the process's own CPU time, is the CPU the
//! rest of the host used there. Ticks are 10 ms at the usual 100 Hz, and
//! each CPU's counter is truncated to a whole tick, so the figure is a
//! lower bound: one tick per CPU less than the busy ticks counted, over the
//! last [`WINDOW`] checks or as many as there are. It never blames a
//! neighbour that did not run, and it sees two busy ones within 20–30 ms
//! of the guard's start, before the first window would have filled (the
//! first cycles of a run are where a late guard shows).

use std::collections::VecDeque;
use std::time::Instant;

/// Checks in the trailing window (100 ms at the guard's 10 ms period).
pub(crate) const WINDOW: usize = 10;

/// The shortest span judged, in check intervals (20 ms at the guard's
/// period): over one interval the counters' truncation outweighs what
/// they count.
pub(crate) const MIN_SPAN: usize = 2;

/// The busy clock ticks of the `cpuN` lines of `/proc/stat` text whose N is
/// in `cpus` (user + nice + system + irq + softirq; idle, iowait, steal and
/// the guests' time are not the host's processes running). `None` when a
/// CPU of `cpus` has no well-formed line.
pub(crate) fn busy_ticks(stat: &str, cpus: &[usize]) -> Option<u64> {
    let mut total = 0u64;
    let mut found = 0usize;
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let Some(Ok(n)) = fields.next().map(str::parse::<usize>) else {
            continue; // the aggregate "cpu" line
        };
        if !cpus.contains(&n) {
            continue;
        }
        let v: Vec<u64> = fields.map(str::parse).collect::<Result<_, _>>().ok()?;
        // user nice system idle iowait irq softirq [steal guest guest_nice]
        if v.len() < 7 {
            return None;
        }
        total = total.checked_add(v[0] + v[1] + v[2] + v[5] + v[6])?;
        found += 1;
    }
    (found == cpus.len() && found > 0).then_some(total)
}

/// One check's reading.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    busy_ticks: u64,
    process_ns: u64,
}

/// The trailing window of readings.
#[derive(Debug)]
pub(crate) struct Others {
    ns_per_tick: f64,
    /// The CPUs counted (each counter's truncation is one tick).
    cpus: u64,
    readings: VecDeque<Reading>,
}

impl Others {
    /// A window over `cpus` CPUs for a clock of `ticks_per_s` (`USER_HZ`).
    pub(crate) fn new(ticks_per_s: u64, cpus: usize) -> Others {
        Others {
            ns_per_tick: 1e9 / ticks_per_s.max(1) as f64,
            cpus: cpus as u64,
            readings: VecDeque::with_capacity(WINDOW + 1),
        }
    }

    /// Records a check at `at` (`busy_ticks` of the mask's CPUs, the
    /// process's CPU time `process_ns`) and returns a lower bound on the
    /// cores the rest of the host used on those CPUs over the window so far
    /// (busy ticks less one per CPU, less the process's time, over the
    /// wall time; never below 0), or `None` at the first check. A counter
    /// that went back starts the window again.
    pub(crate) fn record(&mut self, at: Instant, busy_ticks: u64, process_ns: u64) -> Option<f64> {
        if let Some(last) = self.readings.back() {
            if busy_ticks < last.busy_ticks || process_ns < last.process_ns || at < last.at {
                self.readings.clear();
            }
        }
        self.readings.push_back(Reading {
            at,
            busy_ticks,
            process_ns,
        });
        while self.readings.len() > WINDOW + 1 {
            self.readings.pop_front();
        }
        if self.readings.len() < 2 {
            return None;
        }
        let last = *self.readings.back()?;
        // Every span that ends now is a lower bound of its own; the busiest
        // is the verdict. A neighbour that began inside the window shows in
        // the spans since it began before it outweighs the quiet part.
        let spans = self.readings.iter().rev().skip(MIN_SPAN).copied();
        let mut best: Option<f64> = None;
        for first in spans.chain(self.first_only()) {
            if let Some(cores) = self.bound(first, last) {
                best = Some(best.map_or(cores, |b: f64| b.max(cores)));
            }
        }
        best
    }

    /// The oldest reading when the window is still shorter than
    /// [`MIN_SPAN`] intervals (the guard's first checks): the only span.
    fn first_only(&self) -> Option<Reading> {
        (self.readings.len() <= MIN_SPAN)
            .then(|| self.readings.front().copied())
            .flatten()
    }

    /// The lower bound over `first..=last`: busy ticks less one per CPU,
    /// less the process's time, over the wall time; never below 0.
    fn bound(&self, first: Reading, last: Reading) -> Option<f64> {
        let wall = last.at.saturating_duration_since(first.at).as_nanos() as f64;
        if wall <= 0.0 {
            return None;
        }
        let ticks = (last.busy_ticks - first.busy_ticks).saturating_sub(self.cpus);
        let busy = ticks as f64 * self.ns_per_tick;
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

/// `USER_HZ`, the unit of `/proc/stat`'s times (100 where unknown).
pub(crate) fn ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// The busy ticks of `cpus` now; `None` where `/proc/stat` is unreadable
/// or lacks one of them.
pub(crate) fn read_busy_ticks(cpus: &[usize]) -> Option<u64> {
    busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const STAT: &str = "cpu  900 10 300 5000 7 1 2 3 0 0\n\
cpu0 400 5 100 2500 3 1 1 2 0 0\n\
cpu1 500 5 200 2500 4 0 1 1 0 0\n\
intr 12345 0 0\n\
ctxt 99\n";

    #[test]
    fn busy_ticks_sum_the_masks_cpus_and_refuse_a_missing_one() {
        // cpu0: 400 + 5 + 100 + 1 + 1; cpu1: 500 + 5 + 200 + 0 + 1.
        assert_eq!(busy_ticks(STAT, &[0]), Some(507));
        assert_eq!(busy_ticks(STAT, &[1]), Some(706));
        assert_eq!(busy_ticks(STAT, &[0, 1]), Some(1213));
        assert_eq!(busy_ticks(STAT, &[0, 2]), None);
        assert_eq!(busy_ticks(STAT, &[]), None);
        assert_eq!(busy_ticks("", &[0]), None);
        // A short or garbled line is no reading.
        assert_eq!(busy_ticks("cpu0 1 2 3 4 5 6\n", &[0]), None);
        assert_eq!(busy_ticks("cpu0 1 2 x 4 5 6 7\n", &[0]), None);
        // Exactly seven fields (an old kernel) is enough.
        assert_eq!(
            busy_ticks("cpu0 1 2 3 4 5 6 7\n", &[0]),
            Some(1 + 2 + 3 + 6 + 7)
        );
    }

    #[test]
    fn the_window_gives_a_lower_bound_on_other_processes_cores() {
        let t0 = Instant::now();
        let step = Duration::from_millis(10);
        let at = |i: u64| t0 + step * i as u32;
        let n = WINDOW as u64;
        // Each 10 ms: 2 ticks busy on the mask (two cores), 5 ms of it the
        // process's: the rest of the host used 1.5 cores.
        let mut w = Others::new(100, 2);
        assert_eq!(w.record(at(0), 0, 0), None, "one check is no span");
        // After one check the bound is (2 − 2) ticks: nothing known yet.
        assert_eq!(w.record(at(1), 2, 5_000_000), Some(0.0));
        // After two: (4 − 2) ticks = 20 ms, less 10 ms of the process's,
        // over 20 ms: half a core.
        let two = w.record(at(2), 4, 10_000_000).unwrap();
        assert!((two - 0.5).abs() < 1e-9, "{two}");
        for i in 3..=n {
            w.record(at(i), 2 * i, 5_000_000 * i);
        }
        // Full: (20 − 2) ticks = 180 ms, less 50 ms, over 100 ms.
        let full = w
            .record(at(n + 1), 2 * (n + 1), 5_000_000 * (n + 1))
            .unwrap();
        assert!((full - 1.3).abs() < 1e-9, "{full}");
        // The window slides: only the last WINDOW checks count.
        let later = w.record(at(n + 2), 2 * (n + 2) + 10, 0);
        assert!(later.is_none(), "the process's clock went back: restarted");
        // The process used it all: nobody else, never below zero, however
        // the ticks were truncated.
        let mut w = Others::new(100, 2);
        for i in 0..=n {
            let got = w.record(at(i), 2 * i + i % 2, 20_000_000 * i);
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
        let mut w = Others::new(100, 2);
        for i in 0..=n {
            let got = w.record(at(i), i, 10_000_000 * i);
            assert!(got.is_none_or(|c| c == 0.0), "{i}: {got:?}");
        }
        // Then a neighbour takes both cores: 2 ticks a check, none of them
        // the process's.
        let (ticks, process) = (n, 10_000_000 * n);
        let one = w.record(at(n + 1), ticks + 2, process).unwrap();
        assert_eq!(one, 0.0, "one interval is under the shortest span");
        let two = w.record(at(n + 2), ticks + 4, process).unwrap();
        // Over its own two intervals: (4 − 2) ticks over 20 ms, one core.
        // The whole window (the last 10 intervals) says (12 − 2) ticks less
        // 80 ms of the process's over 100 ms: 0.2 core, under the slack.
        assert!((two - 1.0).abs() < 1e-9, "{two}");
        let three = w.record(at(n + 3), ticks + 6, process).unwrap();
        assert!((three - 4.0 / 3.0).abs() < 1e-9, "{three}");
        // It is still a lower bound: spans that reach back into the quiet
        // part are diluted, never raised.
        assert!(three < 2.0);
    }

    #[test]
    fn the_affinity_mask_and_the_tick_rate_are_read() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(ticks_per_s() > 0);
        // Every allowed CPU has a line on Linux.
        assert!(read_busy_ticks(&cpus).is_some());
    }
}
