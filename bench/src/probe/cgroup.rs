//! A real child cgroup with a CPU quota for a run: create it, move this
//! process in, change the quota mid-run, read real throttle counts, and move
//! back and remove it — on success, on error (Drop) and on Ctrl-C.
//!
//! cgroup v2 (`cpu.max`) is used where the unified hierarchy has the `cpu`
//! controller; otherwise cgroup v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`).
//! `DESIGN.md` §6 "run inside a real cgroup".

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fleet::quota::CpuStat;

/// Why a cgroup could not be made or driven. Each names the path it tried.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No hierarchy with a usable `cpu` controller.
    #[error("no cgroup with a cpu controller: tried {tried}; run as root on a host with cgroup v1 `cpu` or v2 with `cpu` enabled in cgroup.subtree_control")]
    NoController {
        /// The paths looked at.
        tried: String,
    },
    /// A file could not be read or written.
    #[error("cgroup file {path}: {source} (are you root, and is the controller writable?)")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A quota below what the kernel accepts.
    #[error(
        "cgroup quota {cores} cores is invalid: give a positive number of cores (at least 0.01)"
    )]
    BadQuota {
        /// The requested cores.
        cores: f64,
    },
    /// `cpu.stat` could not be read or parsed.
    #[error(transparent)]
    Stat(#[from] fleet::quota::CpuStatError),
}

/// Which cgroup version the child lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupVersion {
    /// Unified hierarchy, `cpu.max`.
    V2,
    /// Per-controller hierarchy, `cpu.cfs_quota_us`.
    V1,
}

/// Paths to clean up on Ctrl-C: (child dir, original cgroup.procs).
static LIVE: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A child cgroup this process runs in until it is dropped.
#[derive(Debug)]
pub struct ChildCgroup {
    dir: PathBuf,
    parent_procs: PathBuf,
    version: CgroupVersion,
    period_us: u64,
    removed: bool,
}

impl ChildCgroup {
    /// Creates `fleet-lab-<pid>` under the live `cpu` hierarchy with a quota
    /// of `cores` and moves this whole process (every thread) into it.
    pub fn enter(cores: f64) -> Result<Self, CgroupError> {
        Self::enter_at(Path::new("/sys/fs/cgroup"), cores)
    }

    /// As [`ChildCgroup::enter`], with the cgroup mount root given.
    pub fn enter_at(mount_root: &Path, cores: f64) -> Result<Self, CgroupError> {
        if !(cores.is_finite() && cores >= 0.01) {
            return Err(CgroupError::BadQuota { cores });
        }
        let (base, version) = find_cpu_hierarchy(mount_root)?;
        sweep_stale(&base, mount_root);
        let pid = std::process::id();
        let dir = base.join(format!("fleet-lab-{pid}"));
        if !dir.exists() {
            fs::create_dir(&dir).map_err(io(&dir))?;
        }
        let mut cg = ChildCgroup {
            parent_procs: base.join("cgroup.procs"),
            dir,
            version,
            period_us: 100_000,
            removed: false,
        };
        install_ctrlc_cleanup();
        LIVE.lock()
            .unwrap()
            .push((cg.dir.clone(), cg.parent_procs.clone()));
        cg.set_quota(cores)?;
        let procs = cg.dir.join("cgroup.procs");
        fs::write(&procs, pid.to_string()).map_err(io(&procs))?;
        Ok(cg)
    }

    /// The child cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cgroup version in use.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// Sets the quota to `cores` (period 100 ms) on the live cgroup.
    pub fn set_quota(&mut self, cores: f64) -> Result<(), CgroupError> {
        if !(cores.is_finite() && cores >= 0.01) {
            return Err(CgroupError::BadQuota { cores });
        }
        let quota = (cores * self.period_us as f64).round() as u64;
        match self.version {
            CgroupVersion::V2 => {
                let p = self.dir.join("cpu.max");
                fs::write(&p, format!("{quota} {}", self.period_us)).map_err(io(&p))
            }
            CgroupVersion::V1 => {
                let period = self.dir.join("cpu.cfs_period_us");
                fs::write(&period, self.period_us.to_string()).map_err(io(&period))?;
                let p = self.dir.join("cpu.cfs_quota_us");
                fs::write(&p, quota.to_string()).map_err(io(&p))
            }
        }
    }

    /// Reads the cumulative throttle counters (`cpu.stat`).
    pub fn counters(&self) -> Result<CpuStat, CgroupError> {
        Ok(CpuStat::read(&self.dir)?)
    }

    /// Moves the process back to the parent cgroup and removes the child.
    pub fn leave(mut self) -> Result<(), CgroupError> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<(), CgroupError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        LIVE.lock().unwrap().retain(|(d, _)| d != &self.dir);
        remove_child(&self.dir, &self.parent_procs)
    }
}

impl Drop for ChildCgroup {
    fn drop(&mut self) {
        if let Err(e) = self.cleanup() {
            eprintln!(
                "fleet-lab: could not remove cgroup {}: {e}",
                self.dir.display()
            );
        }
    }
}

fn remove_child(dir: &Path, parent_procs: &Path) -> Result<(), CgroupError> {
    let procs = dir.join("cgroup.procs");
    // Move every process still in the child back to the parent (v1 moves
    // all threads of a process when its pid is written to cgroup.procs).
    for _ in 0..50 {
        let members = fs::read_to_string(&procs).unwrap_or_default();
        let pids: Vec<&str> = members.split_whitespace().collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = fs::write(parent_procs, pid);
        }
        // Threads can still be listed in `tasks` for a moment.
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let mut last = None;
    for _ in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(CgroupError::Io {
        path: dir.to_path_buf(),
        source: last.expect("a failed attempt"),
    })
}

fn find_cpu_hierarchy(root: &Path) -> Result<(PathBuf, CgroupVersion), CgroupError> {
    let mut tried = Vec::new();
    for v2 in [root.to_path_buf(), root.join("unified")] {
        let ctl = v2.join("cgroup.subtree_control");
        tried.push(ctl.display().to_string());
        if let Ok(text) = fs::read_to_string(&ctl) {
            if text.split_whitespace().any(|c| c == "cpu") {
                return Ok((v2, CgroupVersion::V2));
            }
        }
    }
    for v1 in ["cpu", "cpu,cpuacct", "cpuacct,cpu"] {
        let dir = root.join(v1);
        let quota = dir.join("cpu.cfs_quota_us");
        tried.push(quota.display().to_string());
        if quota.exists() {
            return Ok((dir, CgroupVersion::V1));
        }
    }
    Err(CgroupError::NoController {
        tried: tried.join(", "),
    })
}

/// Removes the empty `fleet-lab-<pid>` cgroups of runs that are gone (a
/// run killed with SIGKILL cannot remove its own): a directory whose pid
/// has no `proc/<pid>` under `root` and that holds no process. Best effort:
/// anything else is left alone.
fn sweep_stale(base: &Path, root: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    let proc_root = if root == Path::new("/sys/fs/cgroup") {
        PathBuf::from("/proc")
    } else {
        root.join("proc")
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("fleet-lab-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || proc_root.join(pid.to_string()).exists() {
            continue;
        }
        let procs = fs::read_to_string(e.path().join("cgroup.procs")).unwrap_or_default();
        if procs.trim().is_empty() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

fn install_ctrlc_cleanup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            let live = LIVE.lock().map(|v| v.clone()).unwrap_or_default();
            for (dir, parent) in live {
                let _ = remove_child(&dir, &parent);
            }
            eprintln!("fleet-lab: interrupted or terminated; child cgroups removed");
            std::process::exit(130);
        });
    });
}

/// Whether this host lets us create a child cgroup with a CPU quota; the
/// error says which path was tried and why not.
pub fn probe_writable() -> Result<PathBuf, CgroupError> {
    let (base, _) = find_cpu_hierarchy(Path::new("/sys/fs/cgroup"))?;
    let probe = base.join(format!("fleet-lab-probe-{}", std::process::id()));
    fs::create_dir(&probe).map_err(io(&probe))?;
    let _ = fs::remove_dir(&probe);
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_root_without_a_cpu_controller_names_what_it_tried() {
        let dir = tempfile::tempdir().unwrap();
        let err = ChildCgroup::enter_at(dir.path(), 1.0).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("cpu.cfs_quota_us") && msg.contains("subtree_control"),
            "{msg}"
        );
    }

    #[test]
    fn stale_cgroups_of_runs_that_are_gone_are_swept_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("cg");
        let mk = |name: &str| {
            let d = base.join(name);
            fs::create_dir_all(&d).unwrap();
            d
        };
        let dead = mk("fleet-lab-4000001");
        let alive = mk("fleet-lab-4000002");
        fs::create_dir_all(root.path().join("proc/4000002")).unwrap();
        let own = mk(&format!("fleet-lab-{}", std::process::id()));
        let other = mk("someone-else-4000003");
        let busy = mk("fleet-lab-4000004");
        fs::write(busy.join("cgroup.procs"), "4242\n").unwrap();
        sweep_stale(&base, root.path());
        assert!(!dead.exists(), "a dead run's empty cgroup is removed");
        assert!(alive.exists() && own.exists() && other.exists() && busy.exists());
    }

    #[test]
    fn bad_quota_is_refused_before_touching_anything() {
        assert!(matches!(
            ChildCgroup::enter_at(Path::new("/nonexistent"), 0.0),
            Err(CgroupError::BadQuota { .. })
        ));
    }
}
