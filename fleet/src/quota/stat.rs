//! `cpu.stat` parsing and the throttle sampler.
//!
//! Source: `DESIGN.md` §3 "Quota detection": v1 reports `nr_periods`,
//! `nr_throttled` and `throttled_time` (ns); v2 reports `nr_periods`,
//! `nr_throttled` and `throttled_usec` (µs). Both are normalised to µs.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why `cpu.stat` could not be read or parsed.
#[derive(Debug, Error)]
pub enum CpuStatError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}; check the cgroup directory exists and is readable")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The content is not a cpu.stat of v1 or v2.
    #[error("{path} is malformed: {detail}")]
    Malformed {
        /// The file (or `<text>` when parsed from a string).
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
}

/// Cumulative throttle counters of one cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStat {
    /// Enforcement periods elapsed (0 when the cgroup has no quota).
    pub nr_periods: u64,
    /// Periods in which the cgroup was throttled (throttle events).
    pub nr_throttled: u64,
    /// Total time throttled, µs.
    pub throttled_us: u64,
}

impl CpuStat {
    /// Parse `cpu.stat` text of either version. Errors: a missing
    /// `nr_throttled` or throttled-time key, or a non-numeric value.
    pub fn parse(text: &str) -> Result<CpuStat, CpuStatError> {
        Self::parse_at(text, Path::new("<text>"))
    }

    fn parse_at(text: &str, path: &Path) -> Result<CpuStat, CpuStatError> {
        let bad = |detail: String| CpuStatError::Malformed {
            path: path.to_path_buf(),
            detail,
        };
        let (mut periods, mut throttled, mut time_us) = (None, None, None);
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(key), Some(val)) = (it.next(), it.next()) else {
                continue;
            };
            let num = || {
                val.parse::<u64>()
                    .map_err(|_| bad(format!("{key} = {val:?} is not a number")))
            };
            match key {
                "nr_periods" => periods = Some(num()?),
                "nr_throttled" => throttled = Some(num()?),
                "throttled_time" => time_us = Some(num()? / 1_000),
                "throttled_usec" => time_us = Some(num()?),
                _ => {}
            }
        }
        Ok(CpuStat {
            nr_periods: periods.unwrap_or(0),
            nr_throttled: throttled.ok_or_else(|| bad("no nr_throttled line".into()))?,
            throttled_us: time_us
                .ok_or_else(|| bad("no throttled_time or throttled_usec line".into()))?,
        })
    }

    /// Read and parse `dir/cpu.stat`.
    pub fn read(dir: &Path) -> Result<CpuStat, CpuStatError> {
        let path = dir.join("cpu.stat");
        let text = std::fs::read_to_string(&path).map_err(|source| CpuStatError::Read {
            path: path.clone(),
            source,
        })?;
        Self::parse_at(&text, &path)
    }
}

/// What happened between two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleReading {
    /// Periods elapsed since the previous sample.
    pub nr_periods: u64,
    /// Throttle events since the previous sample.
    pub nr_throttled: u64,
    /// Time throttled since the previous sample, µs.
    pub throttled_us: u64,
    /// The cumulative counters now.
    pub total: CpuStat,
    /// The counters went backwards (the cgroup was recreated); the deltas
    /// are measured from zero.
    pub reset: bool,
}

/// Samples `cpu.stat` deltas of one cgroup directory. Not thread-safe by
/// itself (`&mut self`); the posture feeder owns it.
#[derive(Debug)]
pub struct ThrottleSampler {
    dir: PathBuf,
    last: CpuStat,
}

impl ThrottleSampler {
    /// Start sampling `dir` (a cgroup directory holding `cpu.stat`); reads
    /// the baseline now. Errors: [`CpuStatError`] when it cannot be read.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, CpuStatError> {
        let dir = dir.into();
        let last = CpuStat::read(&dir)?;
        Ok(ThrottleSampler { dir, last })
    }

    /// The sampled directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The deltas since the previous sample (or the baseline).
    pub fn sample(&mut self) -> Result<ThrottleReading, CpuStatError> {
        let now = CpuStat::read(&self.dir)?;
        let reset = now.nr_throttled < self.last.nr_throttled
            || now.nr_periods < self.last.nr_periods
            || now.throttled_us < self.last.throttled_us;
        let base = if reset { CpuStat::default() } else { self.last };
        self.last = now;
        Ok(ThrottleReading {
            nr_periods: now.nr_periods - base.nr_periods,
            nr_throttled: now.nr_throttled - base.nr_throttled,
            throttled_us: now.throttled_us - base.throttled_us,
            total: now,
            reset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_versions() {
        let v1 =
            CpuStat::parse("nr_periods 23\nnr_throttled 20\nthrottled_time 2000000000\n").unwrap();
        assert_eq!(
            v1,
            CpuStat {
                nr_periods: 23,
                nr_throttled: 20,
                throttled_us: 2_000_000
            }
        );
        let v2 = CpuStat::parse("usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 7\nnr_throttled 2\nthrottled_usec 150\n")
            .unwrap();
        assert_eq!(
            v2,
            CpuStat {
                nr_periods: 7,
                nr_throttled: 2,
                throttled_us: 150
            }
        );
        for bad in [
            "",
            "garbage",
            "nr_throttled x\nthrottled_usec 1",
            "nr_throttled 1",
        ] {
            assert!(CpuStat::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sampler_reports_deltas_and_resets() {
        let dir = tempfile::tempdir().unwrap();
        let write = |p: u64, t: u64, us: u64| {
            std::fs::write(
                dir.path().join("cpu.stat"),
                format!("nr_periods {p}\nnr_throttled {t}\nthrottled_usec {us}\n"),
            )
            .unwrap()
        };
        write(10, 2, 100);
        let mut s = ThrottleSampler::new(dir.path()).unwrap();
        write(15, 5, 400);
        let r = s.sample().unwrap();
        assert_eq!(
            (r.nr_periods, r.nr_throttled, r.throttled_us, r.reset),
            (5, 3, 300, false)
        );
        write(1, 1, 10);
        let r = s.sample().unwrap();
        assert_eq!(
            (r.nr_periods, r.nr_throttled, r.throttled_us, r.reset),
            (1, 1, 10, true)
        );
    }
}
