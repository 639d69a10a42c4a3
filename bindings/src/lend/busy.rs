//! The busy time of the fleet's CPUs, from the most exact counter the
//! kernel offers, and how far each CPU's count may run ahead of the truth
//! (what the lend guard's lower bound subtracts: [`super::others`]).
//!
//! - **cgroup v1's root `cpuacct.usage_percpu`**: every task's runtime on
//!   each CPU, in ns, charged as the scheduler updates the running task
//!   (at each switch and each scheduler tick). A running task's time since
//!   its last update is not yet counted, so a count read at a span's start
//!   may be short by up to one kernel tick per CPU (`1 / CONFIG_HZ`: 4 ms
//!   at 250 Hz), which then lands inside the span: that is the slack. The
//!   tick is read from the kernel's own config (`/proc/config.gz`, else
//!   `/boot/config-RELEASE`); where neither says, 10 ms (100 Hz, the
//!   lowest Linux builds with). A kernel built with `NO_HZ_FULL` may stop
//!   the tick under a lone task, so there this counter is not used. The
//!   root's count covers every task the cgroup namespace sees: inside a
//!   container it misses the host's others, which only lowers the bound.
//! - **`/proc/stat`'s `cpuN` lines** otherwise (user, nice, system, irq
//!   and softirq, in clock ticks, `USER_HZ`): sampled at the kernel's tick
//!   and truncated to 10 ms at the usual 100 Hz; the slack is one tick.
//!
//! By the bound's arithmetic, two busy loops that take 1.6 of a 2-CPU
//! host's cores clear half a core over a span of about 12 ms with the
//! first (250 Hz) and 30 ms with the second. Measured, the first cycle
//! beside two nice-19 loops that start with it ran at 63–66 ms with the
//! first and 70–85 ms with the second (decision 0027).

use std::path::{Path, PathBuf};

/// Where the root `cpuacct` hierarchy of cgroup v1 is mounted on the
/// usual hosts (the second is how older systemd named the joint mount).
const CPUACCT_ROOTS: [&str; 2] = ["/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"];

/// The kernel tick assumed where the kernel's config does not say, Hz
/// (the lowest `CONFIG_HZ` Linux offers: the largest slack).
const FALLBACK_HZ: u64 = 100;

/// A source of the mask's busy time.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BusyClock {
    /// The root `cpuacct.usage_percpu` at this path; each CPU's count may
    /// be short by up to `tick_ns` at a span's start.
    Cpuacct { path: PathBuf, tick_ns: u64 },
    /// `/proc/stat`, in ticks of `1 / ticks_per_s` s.
    ProcStat { ticks_per_s: u64 },
}

impl BusyClock {
    /// The most exact source that covers every CPU of `cpus` on this host:
    /// the root `cpuacct` where it is mounted, readable and the kernel
    /// keeps its tick, else `/proc/stat`.
    pub(crate) fn detect(cpus: &[usize]) -> BusyClock {
        let config = kernel_config();
        let hz = config.as_deref().and_then(config_hz);
        let tickless = config.as_deref().is_some_and(full_tickless);
        let cpuacct = CPUACCT_ROOTS
            .iter()
            .map(|root| Path::new(root).join("cpuacct.usage_percpu"))
            .find(|path| read_usage_percpu(path, cpus).is_some());
        match cpuacct {
            Some(path) if !tickless => BusyClock::Cpuacct {
                path,
                tick_ns: 1_000_000_000 / hz.unwrap_or(FALLBACK_HZ).max(1),
            },
            _ => BusyClock::ProcStat {
                ticks_per_s: ticks_per_s(),
            },
        }
    }

    /// What each CPU's count may run ahead of the truth over a span, ns.
    pub(crate) fn slack_ns(&self) -> f64 {
        match self {
            BusyClock::Cpuacct { tick_ns, .. } => *tick_ns as f64,
            BusyClock::ProcStat { ticks_per_s } => 1e9 / (*ticks_per_s).max(1) as f64,
        }
    }

    /// The busy time of `cpus` now, ns; `None` where the source cannot be
    /// read or lacks one of them.
    pub(crate) fn read(&self, cpus: &[usize]) -> Option<u64> {
        match self {
            BusyClock::Cpuacct { path, .. } => read_usage_percpu(path, cpus),
            BusyClock::ProcStat { ticks_per_s } => {
                let ticks = busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?, cpus)?;
                ticks.checked_mul(1_000_000_000 / (*ticks_per_s).max(1))
            }
        }
    }

    /// A short name for logs and reports: `cpuacct` or `proc_stat`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            BusyClock::Cpuacct { .. } => "cpuacct",
            BusyClock::ProcStat { .. } => "proc_stat",
        }
    }
}

/// The sum over `cpus` of a `cpuacct.usage_percpu` text (one count in ns
/// per CPU, CPU 0 first); `None` when a CPU of `cpus` is past its end, a
/// count does not parse, or `cpus` is empty.
pub(crate) fn usage_percpu(text: &str, cpus: &[usize]) -> Option<u64> {
    let counts: Vec<u64> = text
        .split_ascii_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if cpus.is_empty() {
        return None;
    }
    cpus.iter()
        .try_fold(0u64, |sum, &c| sum.checked_add(*counts.get(c)?))
}

fn read_usage_percpu(path: &Path, cpus: &[usize]) -> Option<u64> {
    usage_percpu(&std::fs::read_to_string(path).ok()?, cpus)
}

/// `CONFIG_HZ` from a kernel config text; `None` where it is absent or
/// not a positive number.
pub(crate) fn config_hz(config: &str) -> Option<u64> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz: &u64| hz > 0)
}

/// Whether a kernel config text builds the full tickless mode
/// (`CONFIG_NO_HZ_FULL=y`), under which a CPU's tick may stop.
pub(crate) fn full_tickless(config: &str) -> bool {
    config.lines().any(|l| l.trim() == "CONFIG_NO_HZ_FULL=y")
}

/// The running kernel's config: `/proc/config.gz` (gzip), else
/// `/boot/config-RELEASE`; `None` where neither is readable.
fn kernel_config() -> Option<String> {
    use std::io::Read;
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .is_ok()
        {
            return Some(text);
        }
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()
}

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

/// `USER_HZ`, the unit of `/proc/stat`'s times (100 where unknown).
fn ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn usage_percpu_sums_the_masks_cpus_and_refuses_what_it_cannot_read() {
        let text = "1000 2000 3000 \n";
        assert_eq!(usage_percpu(text, &[0]), Some(1000));
        assert_eq!(usage_percpu(text, &[0, 2]), Some(4000));
        assert_eq!(usage_percpu(text, &[3]), None, "past the last CPU");
        assert_eq!(usage_percpu(text, &[]), None);
        assert_eq!(usage_percpu("", &[0]), None);
        assert_eq!(usage_percpu("1000 x 3000", &[0]), None);
        assert_eq!(
            usage_percpu("18446744073709551615 1", &[0, 1]),
            None,
            "overflow"
        );
    }

    #[test]
    fn the_kernel_config_gives_its_tick_and_whether_it_may_stop() {
        let config = "# comment\nCONFIG_NO_HZ_IDLE=y\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n";
        assert_eq!(config_hz(config), Some(250));
        assert!(!full_tickless(config));
        assert!(full_tickless("CONFIG_NO_HZ_FULL=y\nCONFIG_HZ=1000\n"));
        assert_eq!(config_hz("CONFIG_HZ_100=y\n"), None);
        assert_eq!(config_hz("CONFIG_HZ=0\n"), None);
        assert_eq!(config_hz("CONFIG_HZ=fast\n"), None);
    }

    #[test]
    fn the_slack_is_one_tick_of_the_clock_read() {
        let cpuacct = BusyClock::Cpuacct {
            path: PathBuf::from("/nonexistent"),
            tick_ns: 4_000_000,
        };
        assert_eq!(cpuacct.slack_ns(), 4e6);
        assert_eq!(
            cpuacct.read(&[0]),
            None,
            "an unreadable source is no reading"
        );
        assert_eq!(BusyClock::ProcStat { ticks_per_s: 100 }.slack_ns(), 1e7);
    }

    #[test]
    fn this_host_has_a_clock_that_reads_and_moves_forward() {
        let cpus = super::super::others::allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(ticks_per_s() > 0);
        let clock = BusyClock::detect(&cpus);
        let first = clock
            .read(&cpus)
            .expect("every allowed CPU is counted on Linux");
        // Burn a little CPU so that some count moves (the counters are
        // monotonic; the test waits on the count, not on time).
        let mut later = first;
        let mut x = 0u64;
        while later == first {
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            later = clock.read(&cpus).unwrap();
        }
        assert!(
            later > first,
            "{} went back: {first} → {later}",
            clock.name()
        );
    }
}
