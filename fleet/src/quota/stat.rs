//! `cpu.stat` parsing and the throttle sampler.
//!
//! Source: `DESIGN.md` §3 "Quota detection": v1 reports `nr_periods`,
//! `nr_throttled` and `throttled_time` (ns); v2 reports `nr_periods`,
//! `nr_throttled` and `throttled_usec` (µs). Both are normalised to µs.
//!
//! Throttling is counted where the limit is: a leaf with no limit of its
//! own inside a limited parent reports 0 throttle events while the parent
//! counts them all, so the sampler reads the limiting ancestor's
//! `cpu.stat` ([`ThrottleSampler::for_report`]). Where the v2 leaf has a
//! `cpu.stat.local` (its own `throttled_usec`, whichever ancestor limited
//! it), that time is read too and preferred for the throttled duty.

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
    /// Time this process's own cgroup was throttled since the previous
    /// sample, µs, from the v2 leaf's `cpu.stat.local`; `None` where that
    /// file is absent (v1, older kernels).
    pub local_throttled_us: Option<u64>,
}

/// Reads `throttled_usec` from `dir/cpu.stat.local`: `Ok(None)` when the
/// file does not exist. Errors: unreadable, or no numeric `throttled_usec`.
pub fn read_local_throttled_us(dir: &Path) -> Result<Option<u64>, CpuStatError> {
    let path = dir.join("cpu.stat.local");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(CpuStatError::Read { path, source }),
    };
    let value = text.lines().find_map(|line| {
        let mut it = line.split_whitespace();
        (it.next() == Some("throttled_usec")).then(|| it.next().map(str::parse::<u64>))
    });
    match value {
        Some(Some(Ok(us))) => Ok(Some(us)),
        _ => Err(CpuStatError::Malformed {
            path,
            detail: "no numeric throttled_usec line".into(),
        }),
    }
}

/// Samples `cpu.stat` deltas of one cgroup directory (the limiting one),
/// and the leaf's `cpu.stat.local` where present. Not thread-safe by
/// itself (`&mut self`); the posture feeder owns it.
#[derive(Debug)]
pub struct ThrottleSampler {
    dir: PathBuf,
    last: CpuStat,
    /// The leaf whose `cpu.stat.local` is read, and its last value (µs).
    local: Option<(PathBuf, u64)>,
}

impl ThrottleSampler {
    /// Start sampling `dir` (a cgroup directory holding `cpu.stat`); reads
    /// the baseline now. Errors: [`CpuStatError`] when it cannot be read.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, CpuStatError> {
        let dir = dir.into();
        let last = CpuStat::read(&dir)?;
        Ok(ThrottleSampler {
            dir,
            last,
            local: None,
        })
    }

    /// Start sampling the cgroup that actually limits this process:
    /// `report`'s limiting directory when a level limits, else its own
    /// cgroup directory, plus the leaf's v2 `cpu.stat.local` where present.
    /// Errors: [`CpuStatError`] when `cpu.stat` cannot be read, or when the
    /// report names no cgroup directory (quota unknown, no cgroup).
    pub fn for_report(report: &super::QuotaReport) -> Result<Self, CpuStatError> {
        let Some(dir) = report.throttle_dir() else {
            return Err(CpuStatError::Read {
                path: PathBuf::from("cpu.stat"),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("no cgroup directory was detected ({})", report.reason),
                ),
            });
        };
        let mut sampler = Self::new(dir)?;
        if let Some(leaf) = &report.cgroup_dir {
            if let Some(us) = read_local_throttled_us(leaf)? {
                sampler.local = Some((leaf.clone(), us));
            }
        }
        Ok(sampler)
    }

    /// The sampled directory (the limiting cgroup under `for_report`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The leaf whose `cpu.stat.local` is sampled, when one is.
    pub fn local_dir(&self) -> Option<&Path> {
        self.local.as_ref().map(|(d, _)| d.as_path())
    }

    /// The deltas since the previous sample (or the baseline).
    pub fn sample(&mut self) -> Result<ThrottleReading, CpuStatError> {
        let local_throttled_us = match self.local.as_mut() {
            Some((dir, last)) => match read_local_throttled_us(dir)? {
                Some(now) => {
                    let delta = now.checked_sub(*last).unwrap_or(now);
                    *last = now;
                    Some(delta)
                }
                None => None,
            },
            None => None,
        };
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
            local_throttled_us,
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
