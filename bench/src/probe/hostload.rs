//! Measures the CPU other processes used on this process's CPUs while a run
//! lasted: the busy time of the CPUs in the affinity mask (`/proc/stat`)
//! minus this process's own CPU time (`/proc/self/stat`), over the run's
//! wall time.
//!
//! The 1-minute load average cannot tell the lab's own earlier runs (back
//! to back in `compare` and `parity`) from other work, so the busy-host
//! warning is decided from this figure instead.

use std::time::Instant;

/// A `/proc` file could not be read or did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostLoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: &'static str,
        /// The OS error.
        reason: String,
    },
    /// The text is not in the kernel's format.
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: &'static str,
        /// What was wrong.
        reason: String,
    },
}

fn format(path: &'static str, reason: impl Into<String>) -> HostLoadError {
    HostLoadError::Format {
        path,
        reason: reason.into(),
    }
}

/// Busy clock ticks (user, nice, system, irq, softirq, steal: everything
/// but idle and iowait) summed over the `cpuN` lines of `/proc/stat` whose
/// N is in `cpus`. Errors: a listed CPU has no line, or a field is not a
/// number.
pub fn busy_ticks(proc_stat: &str, cpus: &[usize]) -> Result<u64, HostLoadError> {
    const PATH: &str = "/proc/stat";
    let mut total = 0u64;
    let mut found = 0usize;
    for line in proc_stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(n) = name.strip_prefix("cpu").filter(|n| !n.is_empty()) else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            return Err(format(PATH, format!("{name:?} is not a cpu line")));
        };
        if !cpus.contains(&n) {
            continue;
        }
        let values = fields
            .map(|f| {
                f.parse::<u64>()
                    .map_err(|_| format(PATH, format!("{name}: {f:?} is not a tick count")))
            })
            .collect::<Result<Vec<u64>, _>>()?;
        if values.len() < 4 {
            return Err(format(PATH, format!("{name}: fewer than 4 fields")));
        }
        // user nice system idle iowait irq softirq steal (guest is in user).
        let busy: u64 = values
            .iter()
            .take(8)
            .enumerate()
            .filter(|(i, _)| *i != 3 && *i != 4)
            .map(|(_, v)| *v)
            .fold(0u64, |a, v| a.saturating_add(v));
        total = total.saturating_add(busy);
        found += 1;
    }
    if found < cpus.len() {
        return Err(format(
            PATH,
            format!("{} of {} CPUs have no line", cpus.len() - found, cpus.len()),
        ));
    }
    Ok(total)
}

/// This process's CPU time in clock ticks (utime + stime, every thread)
/// from the text of `/proc/self/stat`. The command name may hold spaces and
/// parentheses, so fields are counted after its last `)`.
pub fn own_ticks(self_stat: &str) -> Result<u64, HostLoadError> {
    const PATH: &str = "/proc/self/stat";
    let rest = self_stat
        .rfind(')')
        .map(|i| &self_stat[i + 1..])
        .ok_or_else(|| format(PATH, "no command name"))?;
    // After the name: state (field 3) … utime is field 14, stime field 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize, what: &str| -> Result<u64, HostLoadError> {
        fields
            .get(i)
            .ok_or_else(|| format(PATH, format!("no {what} field")))?
            .parse()
            .map_err(|_| format(PATH, format!("{what} is not a tick count")))
    };
    Ok(tick(11, "utime")?.saturating_add(tick(12, "stime")?))
}

/// Cores other processes kept busy on average: (host busy − own) ticks over
/// `hz` ticks a second and `wall_s` seconds; never below 0 (tick rounding
/// can make own exceed busy on an idle host).
pub fn other_cpus(busy_delta: u64, own_delta: u64, hz: f64, wall_s: f64) -> f64 {
    if !(hz > 0.0 && wall_s > 0.0) {
        return 0.0;
    }
    (busy_delta.saturating_sub(own_delta) as f64 / hz / wall_s).max(0.0)
}

/// The busy-host warning for run `label`, or `None` when other processes
/// kept less than a quarter of `cpus` (at least 1) busy.
pub fn busy_warning(label: &str, other: f64, cpus: usize) -> Option<String> {
    let threshold = cpus.max(1) as f64 * 0.25;
    (other >= threshold).then(|| {
        format!(
            "the host was busy during the {label} run: other processes kept {other:.1} of its {cpus} CPUs busy on average; its latency figures include their contention"
        )
    })
}

/// The CPUs in this process's affinity mask (empty where it cannot be
/// read).
pub fn affinity_cpus() -> Vec<usize> {
    fleet_bindings::AffinityMask::capture()
        .map(|m| m.cpus().to_vec())
        .unwrap_or_default()
}

fn read(path: &'static str) -> Result<String, HostLoadError> {
    std::fs::read_to_string(path).map_err(|e| HostLoadError::Read {
        path,
        reason: e.to_string(),
    })
}

/// A reading taken when a run starts.
#[derive(Debug, Clone)]
pub struct HostLoad {
    cpus: Vec<usize>,
    busy: u64,
    own: u64,
    at: Instant,
}

impl HostLoad {
    /// Reads the busy ticks of the affinity CPUs and this process's ticks.
    pub fn start() -> Result<HostLoad, HostLoadError> {
        let cpus = affinity_cpus();
        Ok(HostLoad {
            busy: busy_ticks(&read("/proc/stat")?, &cpus)?,
            own: own_ticks(&read("/proc/self/stat")?)?,
            cpus,
            at: Instant::now(),
        })
    }

    /// Cores other processes kept busy on average since [`HostLoad::start`].
    pub fn other_cpus_since(&self) -> Result<f64, HostLoadError> {
        let busy = busy_ticks(&read("/proc/stat")?, &self.cpus)?;
        let own = own_ticks(&read("/proc/self/stat")?)?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok(other_cpus(
            busy.saturating_sub(self.busy),
            own.saturating_sub(self.own),
            hz,
            self.at.elapsed().as_secs_f64(),
        ))
    }

    /// The CPUs measured (the affinity mask).
    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  900 0 300 5000 50 0 10 0 0 0\n\
cpu0 100 0 50 2000 20 0 5 0 0 0\n\
cpu1 200 10 60 1000 30 5 5 7 0 0\n\
cpu2 600 0 190 2000 0 0 0 0 0 0\n\
intr 12345 0 0\n\
ctxt 99\n";

    #[test]
    fn busy_ticks_sum_the_affinity_cpus_without_idle_and_iowait() {
        assert_eq!(busy_ticks(STAT, &[0]).unwrap(), 100 + 50 + 5);
        assert_eq!(busy_ticks(STAT, &[1]).unwrap(), 200 + 10 + 60 + 5 + 5 + 7);
        assert_eq!(busy_ticks(STAT, &[0, 1]).unwrap(), 155 + 287);
        let e = busy_ticks(STAT, &[0, 7]).unwrap_err().to_string();
        assert!(e.contains("1 of 2 CPUs have no line"), "{e}");
        let e = busy_ticks("cpu0 1 x 3 4\n", &[0]).unwrap_err().to_string();
        assert!(e.contains("\"x\" is not a tick count"), "{e}");
        assert!(busy_ticks("cpu0 1 2\n", &[0]).is_err());
        assert!(busy_ticks("cpuX 1 2 3 4\n", &[0]).is_err());
    }

    #[test]
    fn own_ticks_read_utime_and_stime_after_the_last_parenthesis() {
        let line = "4242 (fleet lab) (x)) R 1 2 3 4 5 6 7 8 9 10 321 123 0 0 20 0 9 0";
        assert_eq!(own_ticks(line).unwrap(), 444);
        assert!(own_ticks("4242 fleet R 1").is_err());
        assert!(own_ticks("4242 (a) R 1 2").is_err());
        assert!(own_ticks("4242 (a) R 1 2 3 4 5 6 7 8 9 10 u 1").is_err());
    }

    #[test]
    fn the_process_own_cpu_is_not_counted_as_other_load() {
        // Two CPUs fully busy for 2 s at 100 ticks/s: 400 busy ticks. When
        // all of them are this process's, others used nothing.
        assert_eq!(other_cpus(400, 400, 100.0, 2.0), 0.0);
        // Half of them ours: others kept one core busy.
        assert_eq!(other_cpus(400, 200, 100.0, 2.0), 1.0);
        // Rounding can make own exceed busy: never negative.
        assert_eq!(other_cpus(10, 12, 100.0, 2.0), 0.0);
        assert_eq!(other_cpus(10, 0, 100.0, 0.0), 0.0);
    }

    #[test]
    fn the_warning_names_the_run_and_fires_only_above_a_quarter_of_the_cpus() {
        assert_eq!(busy_warning("fleet pinned", 0.4, 2), None);
        let w = busy_warning("fleet pinned", 0.5, 2).unwrap();
        assert!(w.contains("during the fleet pinned run"), "{w}");
        assert!(w.contains("0.5 of its 2 CPUs"), "{w}");
        assert!(busy_warning("x", 0.25, 0).is_some());
        assert!(busy_warning("x", 0.2, 0).is_none());
    }
}
