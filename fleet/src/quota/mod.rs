//! Quota detection: how many cores this process may use.
//!
//! Source: `DESIGN.md` §3 "Quota detection"; seed 000 §5 (fractional policy).
//! Effective budget = min(CPUs in the affinity mask, cgroup quota). The quota
//! comes from whichever hierarchy holds the cpu controller (v1 when a v1
//! hierarchy lists `cpu`, else v2), walking from the process's cgroup up to
//! the mount point and taking the tightest ancestor. Everything is read under
//! a filesystem root, so a captured tree diagnoses offline exactly like the
//! live system. Malformed files give [`QuotaSource::Unknown`] with a reason,
//! never a panic and never a boot failure by itself.
//!
//! Detection publishes the exact value (8.5 stays 8.5) and rounds *up* for
//! threads that must be schedulable ([`QuotaReport::schedulable_cpus`]); the
//! budget rounds *down* (⌊Q⌋).

mod limits;
mod procfs;
mod stat;
mod watch;

pub use limits::{parse_cpu_max, read_limit, tightest, CgroupVersion};
pub use procfs::{
    cgroup_dir, cpus_allowed_list, parse_cpu_list, parse_mountinfo, parse_proc_cgroup,
    under_mount_root, under_root, CgroupLine, CgroupMount, CpuListError,
};
pub use stat::{read_local_throttled_us, CpuStat, CpuStatError, ThrottleReading, ThrottleSampler};
pub use watch::{QuotaChange, QuotaWatcher, DEFAULT_WATCH_PERIOD};

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the effective quota came from.
///
/// "No limit" ([`QuotaSource::Affinity`]: the hierarchy was read and no level
/// limits the CPU) and "quota unknown" ([`QuotaSource::Unknown`]: the limit
/// could not be determined) are distinct results (`DESIGN.md` §3 "Quota
/// detection"); both fall back to the affinity mask, but only the second
/// says the fleet may be planning for more cores than it has.
///
/// Serialized as its [`QuotaSource::name`] (`"unknown"` for every unknown
/// reason: the reason travels in the report's `reason` sentence);
/// deserializing `"unknown"` gives an empty reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum QuotaSource {
    /// A cgroup v2 `cpu.max` limit.
    CgroupV2,
    /// A cgroup v1 `cpu.cfs_quota_us` limit.
    CgroupV1,
    /// No cgroup limit: the hierarchy was read and no level limits the CPU;
    /// the affinity mask decides.
    Affinity,
    /// The quota is unknown; the affinity mask decides for now. Causes:
    /// unreadable or malformed cgroup files, the process's cgroup outside
    /// the mount's root, a cgroup directory that does not exist, a v2
    /// cgroup listed with no cgroup2 mount visible.
    Unknown {
        /// Why the quota could not be determined (what to check).
        reason: String,
    },
}

impl QuotaSource {
    /// The snake_case name (`cgroup_v2`, `cgroup_v1`, `affinity`, `unknown`).
    pub const fn name(&self) -> &'static str {
        match self {
            QuotaSource::CgroupV2 => "cgroup_v2",
            QuotaSource::CgroupV1 => "cgroup_v1",
            QuotaSource::Affinity => "affinity",
            QuotaSource::Unknown { .. } => "unknown",
        }
    }

    /// Whether the quota is unknown (as opposed to known, limited or not).
    pub const fn is_unknown(&self) -> bool {
        matches!(self, QuotaSource::Unknown { .. })
    }
}

impl From<QuotaSource> for String {
    fn from(s: QuotaSource) -> String {
        s.name().to_string()
    }
}

impl TryFrom<String> for QuotaSource {
    type Error = String;

    /// Errors: a name that is not one of [`QuotaSource::name`]'s.
    fn try_from(name: String) -> Result<Self, String> {
        match name.as_str() {
            "cgroup_v2" => Ok(QuotaSource::CgroupV2),
            "cgroup_v1" => Ok(QuotaSource::CgroupV1),
            "affinity" => Ok(QuotaSource::Affinity),
            "unknown" => Ok(QuotaSource::Unknown {
                reason: String::new(),
            }),
            other => Err(format!(
                "unknown quota source {other:?}: expected cgroup_v2, cgroup_v1, affinity or unknown"
            )),
        }
    }
}

/// The result of detection. Never an error: problems are in `reason`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaReport {
    /// The cgroup quota in cores, exact (e.g. 8.5); `None` when no level of
    /// the hierarchy limits the CPU or the files could not be read.
    pub exact_cpus: Option<f64>,
    /// CPUs in the affinity mask (`Cpus_allowed_list`).
    pub affinity_cpus: u32,
    /// Where the limit came from.
    pub source: QuotaSource,
    /// A sentence saying what was read and why this source won.
    pub reason: String,
    /// The process's cgroup directory in the cpu hierarchy (under the
    /// detection root), where `cpu.stat` is sampled; `None` if not found.
    pub cgroup_dir: Option<PathBuf>,
    /// The directory whose limit is the tightest, when one limits.
    pub limiting_dir: Option<PathBuf>,
    /// The CPU indices of the affinity mask (for core pinning).
    pub affinity_list: Vec<usize>,
}

impl QuotaReport {
    /// Effective cores: min(affinity, exact quota), fractional allowed.
    pub fn effective_cpus(&self) -> f64 {
        let aff = self.affinity_cpus as f64;
        match self.exact_cpus {
            Some(q) if aff > 0.0 => q.min(aff),
            Some(q) => q,
            None => aff,
        }
    }

    /// The cgroup whose `cpu.stat` counts this process's throttling: the
    /// limiting directory when a level limits (a leaf with no limit of its
    /// own under a limited parent reports no throttle events itself), else
    /// the process's own cgroup directory; `None` when neither was found.
    pub fn throttle_dir(&self) -> Option<&Path> {
        self.limiting_dir.as_deref().or(self.cgroup_dir.as_deref())
    }

    /// Whether the process's cgroup can never throttle it: the quota is
    /// known, and either no level limits the CPU or the limit is at least
    /// the CPUs of the affinity mask (running every allowed CPU flat out
    /// stays within it). An unknown quota cannot be ruled out: `false`.
    /// Where this holds, the serial tier may lend its reserved cores at the
    /// idle class (`docs/decisions/0009-reserve-lent-at-idle-class.md`).
    pub fn cannot_throttle(&self) -> bool {
        match (&self.source, self.exact_cpus) {
            (QuotaSource::Unknown { .. }, _) => false,
            (_, None) => true,
            (_, Some(q)) => self.affinity_cpus > 0 && q >= f64::from(self.affinity_cpus),
        }
    }

    /// Effective cores rounded up: the threads that must be schedulable.
    pub fn schedulable_cpus(&self) -> u32 {
        self.effective_cpus().ceil() as u32
    }
}

/// Detect on the live system (`/`).
pub fn detect_live() -> QuotaReport {
    detect(Path::new("/"))
}

fn read_text(root: &Path, rel: &str) -> Result<String, String> {
    let path = root.join(rel);
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn affinity(root: &Path) -> (u32, Vec<usize>, Option<String>) {
    let fallback = |why: String| {
        let n = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        (
            n,
            (0..n as usize).collect(),
            Some(format!("{why}; counted {n} CPUs from this process instead")),
        )
    };
    let text = match read_text(root, "proc/self/status") {
        Ok(t) => t,
        Err(e) => return fallback(e),
    };
    let Some(list) = cpus_allowed_list(&text) else {
        return fallback("no Cpus_allowed_list line in proc/self/status".into());
    };
    match parse_cpu_list(list) {
        Ok(cpus) if !cpus.is_empty() => (cpus.len() as u32, cpus, None),
        Ok(_) => fallback("Cpus_allowed_list is empty".into()),
        Err(e) => fallback(e.to_string()),
    }
}

/// Detect under a filesystem root: `root/proc/self/{cgroup,mountinfo,status}`
/// and the cgroup files under the mount points found there.
pub fn detect(root: &Path) -> QuotaReport {
    let (affinity_cpus, affinity_list, aff_note) = affinity(root);
    let mut report = QuotaReport {
        exact_cpus: None,
        affinity_cpus,
        source: QuotaSource::Affinity,
        reason: String::new(),
        cgroup_dir: None,
        limiting_dir: None,
        affinity_list,
    };
    match detect_cgroup(root) {
        Ok(found) => {
            report.cgroup_dir = found.dir;
            report.reason = found.reason;
            if let Some((cores, dir)) = found.limit {
                report.exact_cpus = Some(cores);
                report.limiting_dir = Some(dir);
                report.source = found.source;
                if (affinity_cpus as f64) < cores {
                    report.reason.push_str(&format!(
                        "; the affinity mask ({affinity_cpus} CPUs) is tighter"
                    ));
                }
            } else {
                report.source = QuotaSource::Affinity;
                report
                    .reason
                    .push_str(&format!("; the affinity mask gives {affinity_cpus} CPUs"));
            }
        }
        Err(why) => {
            report.reason =
                format!("quota unknown: {why}; using the affinity mask ({affinity_cpus} CPUs)");
            report.source = QuotaSource::Unknown { reason: why };
        }
    }
    if let Some(note) = aff_note {
        report.reason.push_str(&format!(" (affinity: {note})"));
    }
    report
}

struct Found {
    source: QuotaSource,
    dir: Option<PathBuf>,
    limit: Option<(f64, PathBuf)>,
    reason: String,
}

fn detect_cgroup(root: &Path) -> Result<Found, String> {
    let lines = parse_proc_cgroup(&read_text(root, "proc/self/cgroup")?)?;
    let mounts = parse_mountinfo(&read_text(root, "proc/self/mountinfo")?)?;
    let v1 = lines
        .iter()
        .find(|l| l.hierarchy != 0 && l.controllers.iter().any(|c| c == "cpu"));
    let (version, line, mount) = if let Some(line) = v1 {
        let mount = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "cpu"))
            .ok_or("the cpu controller is in a v1 hierarchy but no cgroup mount lists it")?;
        (CgroupVersion::V1, line, mount)
    } else if let Some(line) = lines.iter().find(|l| l.hierarchy == 0) {
        let Some(mount) = mounts.iter().find(|m| m.fstype == "cgroup2") else {
            return Err(format!(
                "a v2 cgroup ({}) is listed but no cgroup2 mount is visible, so its cpu.max cannot be read; mount cgroup2 (or run with a cgroup namespace that shows it)",
                line.path
            ));
        };
        (CgroupVersion::V2, line, mount)
    } else {
        return Ok(Found {
            source: QuotaSource::Affinity,
            dir: None,
            limit: None,
            reason: "no hierarchy holds the cpu controller".into(),
        });
    };
    if !procfs::under_mount_root(mount, &line.path) {
        return Err(format!(
            "the process's cgroup {} is not under the root {} of the {} mount at {}, so its limits cannot be read there",
            line.path,
            mount.root,
            mount.fstype,
            mount.mount_point.display()
        ));
    }
    let dir = cgroup_dir(root, mount, &line.path);
    if !dir.is_dir() {
        return Err(format!(
            "the process's cgroup directory {} does not exist under the {} mount",
            dir.display(),
            mount.fstype
        ));
    }
    let top = under_root(root, &mount.mount_point);
    let limit = tightest(&dir, &top, version)?;
    let (source, vname, file) = match version {
        CgroupVersion::V1 => (QuotaSource::CgroupV1, "cgroup v1", "cpu.cfs_quota_us"),
        CgroupVersion::V2 => (QuotaSource::CgroupV2, "cgroup v2", "cpu.max"),
    };
    let reason = match &limit {
        Some((cores, at)) => format!(
            "{vname} {file} at {} limits to {cores} cores (tightest from {})",
            at.display(),
            line.path
        ),
        None => format!(
            "{vname} cgroup {} sets no limit ({file} unset or max up to {})",
            line.path,
            top.display()
        ),
    };
    Ok(Found {
        source,
        dir: Some(dir),
        limit,
        reason,
    })
}
