//! Re-detection while the process runs: the quota watcher.
//!
//! Source: `DESIGN.md` §3 "Quota detection": the quota is re-detected while
//! the process runs; a change re-derives the budget (a logged posture event)
//! and pins are re-keyed only at an epoch boundary. The watcher is pure: the
//! caller detects (every [`QuotaWatcher::period`], on a thread it owns) and
//! hands it the report; the watcher says whether the effective quota moved.

use super::QuotaReport;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often to re-detect by default.
pub const DEFAULT_WATCH_PERIOD: Duration = Duration::from_secs(1);

/// The effective quota moved between two detections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaChange {
    /// The effective cores before (`QuotaReport::effective_cpus`).
    pub from_cpus: f64,
    /// The effective cores now.
    pub to_cpus: f64,
    /// The detection that saw the change.
    pub report: QuotaReport,
}

/// Compares each re-detection with the last effective quota.
#[derive(Debug, Clone)]
pub struct QuotaWatcher {
    period: Duration,
    current: f64,
}

impl QuotaWatcher {
    /// A watcher starting from `initial` (the boot detection), re-detecting
    /// every `period` (a zero period is raised to 1 ms).
    pub fn new(initial: &QuotaReport, period: Duration) -> Self {
        QuotaWatcher {
            period: period.max(Duration::from_millis(1)),
            current: initial.effective_cpus(),
        }
    }

    /// How often the caller should re-detect.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The effective cores last seen, cores.
    pub fn current_cpus(&self) -> f64 {
        self.current
    }

    /// Takes a fresh detection: `Some(change)` when its effective quota
    /// differs from the last one (which it then becomes), `None` when it is
    /// the same. A non-finite or non-positive effective quota is ignored
    /// (`None`): detection never reports one, and a bad reading must not
    /// re-plan a running fleet.
    pub fn observe(&mut self, report: QuotaReport) -> Option<QuotaChange> {
        let sane = |c: f64| c.is_finite() && c > 0.0;
        let to = report.effective_cpus();
        if report.exact_cpus.is_some_and(|q| !sane(q))
            || !sane(to)
            || (to - self.current).abs() < 1e-9
        {
            return None;
        }
        let from = std::mem::replace(&mut self.current, to);
        Some(QuotaChange {
            from_cpus: from,
            to_cpus: to,
            report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::QuotaSource;

    fn report(quota: Option<f64>) -> QuotaReport {
        QuotaReport {
            exact_cpus: quota,
            affinity_cpus: 16,
            source: QuotaSource::CgroupV2,
            reason: String::new(),
            cgroup_dir: None,
            limiting_dir: None,
            affinity_list: (0..16).collect(),
        }
    }

    #[test]
    fn a_change_is_reported_once_and_bad_readings_are_ignored() {
        let mut w = QuotaWatcher::new(&report(Some(8.0)), Duration::ZERO);
        assert_eq!(w.period(), Duration::from_millis(1));
        assert_eq!(w.observe(report(Some(8.0))), None);
        let c = w.observe(report(Some(6.0))).expect("a change");
        assert_eq!((c.from_cpus, c.to_cpus), (8.0, 6.0));
        assert_eq!(w.observe(report(Some(6.0))), None, "reported once");
        for bad in [f64::NAN, 0.0, -1.0] {
            assert_eq!(w.observe(report(Some(bad))), None, "{bad}");
        }
        assert_eq!(w.current_cpus(), 6.0);
        // No limit any more: the affinity mask decides.
        assert_eq!(w.observe(report(None)).map(|c| c.to_cpus), Some(16.0));
    }
}
