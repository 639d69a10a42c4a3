//! The host's state beside a comparison's figures: what decides how fast a
//! parked thread wakes (the cpuidle driver and governor), how time is read
//! (the clock source), whether the kernel collapses huge pages behind the
//! run (transparent huge pages), and how much of the CPU the host took
//! away while the comparison lasted (steal time, other processes' CPU).
//! A comparison's verdict moves with these (docs/lab.md, "The host's
//! state"), so `compare.json` keeps them beside the figures.
//!
//! Each fact is read from `/sys` or `/proc` and is `None` where that file
//! is missing or unreadable; nothing here fails a run.

use std::fs;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::hostload::HostLoad;

/// The host's state over one comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostState {
    /// The running kernel's release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// The first CPU's model name (`/proc/cpuinfo`).
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: usize,
    /// The cpuidle driver (`haltpoll`, `intel_idle`, `acpi_idle`, `none`).
    pub cpuidle_driver: Option<String>,
    /// The cpuidle governor (`menu`, `teo`, `haltpoll`, `ladder`).
    pub cpuidle_governor: Option<String>,
    /// The guest's halt-polling window, ns (`haltpoll.guest_halt_poll_ns`):
    /// how long an idle vCPU polls for work before it halts and the
    /// hypervisor must wake it; 0 is no polling. `None` where the haltpoll
    /// cpuidle driver is not the one in use: its parameter may be there
    /// (the driver built in) and still govern nothing, as under driver
    /// `none`, where an idle vCPU halts at once.
    #[serde(default)]
    pub halt_poll_ns: Option<u64>,
    /// The clock source (`tsc`, `kvm-clock`, `hpet`).
    pub clocksource: Option<String>,
    /// Transparent huge pages: the bracketed mode of
    /// `/sys/kernel/mm/transparent_hugepage/enabled` (`always`, `madvise`,
    /// `never`).
    pub transparent_hugepage: Option<String>,
    /// Cores' worth of steal time (the hypervisor running someone else on
    /// this VM's CPUs), averaged over the comparison's wall time.
    pub steal_cpus: Option<f64>,
    /// Cores other processes kept busy on this process's CPUs, averaged
    /// over the comparison ([`HostLoad`]).
    pub other_cpus: Option<f64>,
    /// The comparison's wall time, seconds.
    pub wall_s: f64,
    /// Where the comparison held the host awake (`compare --host-awake`):
    /// the period, µs, at which one thread per CPU in a separate process
    /// woke; `null` for the host as it was. Its CPU is in `other_cpus`.
    #[serde(default)]
    pub awake_wake_us: Option<u64>,
}

/// The bracketed choice of a sysfs mode file: `always [madvise] never` →
/// `madvise`; a file without brackets is taken whole (trimmed). `None` for
/// an empty text.
pub fn bracketed(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if a < b => Some(t[a + 1..b].to_string()),
        _ => Some(t.to_string()),
    }
}

/// The first `model name` of a `/proc/cpuinfo` text.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// Steal ticks of the aggregate `cpu` line of a `/proc/stat` text (its 8th
/// value); `None` when the line or the field is missing or not a number.
pub fn steal_ticks(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// The haltpoll cpuidle driver's polling window (ns), a module parameter.
pub const HALT_POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// The cpuidle driver in use (`haltpoll`, `intel_idle`, `none`, ...).
pub const CPUIDLE_DRIVER: &str = "/sys/devices/system/cpu/cpuidle/current_driver";

/// The name of the cpuidle driver whose window [`HALT_POLL_NS`] is.
pub const HALTPOLL_DRIVER: &str = "haltpoll";

fn read(path: &str) -> Option<String> {
    fs::read_to_string(path).ok()
}

fn read_trim(path: &str) -> Option<String> {
    read(path)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The clock's ticks a second (`sysconf(_SC_CLK_TCK)`, 100 where unknown).
fn hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// A comparison's host state being measured: begun before its first run,
/// finished after its last.
pub struct HostWatch {
    began: Instant,
    steal: Option<u64>,
    load: Option<HostLoad>,
}

impl HostWatch {
    /// Starts measuring steal time and other processes' CPU now.
    pub fn begin() -> Self {
        HostWatch {
            began: Instant::now(),
            steal: read("/proc/stat").as_deref().and_then(steal_ticks),
            load: HostLoad::start().ok(),
        }
    }

    /// The host's state, with steal and other processes' CPU averaged
    /// since [`HostWatch::begin`].
    pub fn finish(self) -> HostState {
        let wall_s = self.began.elapsed().as_secs_f64();
        let steal_now = read("/proc/stat").as_deref().and_then(steal_ticks);
        let steal_cpus = match (self.steal, steal_now) {
            (Some(a), Some(b)) if wall_s > 0.0 => Some(b.saturating_sub(a) as f64 / hz() / wall_s),
            _ => None,
        };
        let driver = read_trim(CPUIDLE_DRIVER);
        HostState {
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            cpu_model: read("/proc/cpuinfo").as_deref().and_then(cpu_model),
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpuidle_driver: driver.clone(),
            cpuidle_governor: read_trim("/sys/devices/system/cpu/cpuidle/current_governor")
                .or_else(|| read_trim("/sys/devices/system/cpu/cpuidle/current_governor_ro")),
            halt_poll_ns: halt_poll_in_effect(
                driver.as_deref(),
                read_trim(HALT_POLL_NS).and_then(|v| v.parse().ok()),
            ),
            clocksource: read_trim(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            transparent_hugepage: read("/sys/kernel/mm/transparent_hugepage/enabled")
                .as_deref()
                .and_then(bracketed),
            steal_cpus,
            other_cpus: self.load.and_then(|l| l.other_cpus_since().ok()),
            wall_s,
            awake_wake_us: None,
        }
    }
}

impl HostState {
    /// One line per fact, for the comparison's printed summary ("-" where
    /// unknown).
    pub fn render(&self) -> String {
        let s = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let f = |v: Option<f64>| v.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
        let state = match self.awake_wake_us {
            Some(us) => format!(
                "held awake (a waker thread per CPU every {us} µs, in other processes' CPU)"
            ),
            None => "as it was (no waker)".into(),
        };
        format!(
            "Host: {} CPUs, {}; kernel {}\n  cpuidle driver {}, governor {}, halt polling {}; clock source {}; transparent huge pages {}\n  over the comparison ({:.0} s): steal {} cores, other processes {} cores; host {state}\n",
            self.cpus,
            s(&self.cpu_model),
            s(&self.kernel),
            s(&self.cpuidle_driver),
            s(&self.cpuidle_governor),
            halt_poll(self.cpuidle_driver.as_deref(), self.halt_poll_ns),
            s(&self.clocksource),
            s(&self.transparent_hugepage),
            self.wall_s,
            f(self.steal_cpus),
            f(self.other_cpus),
        )
    }
}

/// The halt-polling window as the summary prints it: `off (0 ns)`, `up
/// to N ns`, `not in effect` under another known cpuidle driver, or `-`
/// where unknown.
fn halt_poll(driver: Option<&str>, ns: Option<u64>) -> String {
    match (driver, ns) {
        (_, Some(0)) => "off (0 ns)".into(),
        (_, Some(n)) => format!("up to {n} ns"),
        (Some(d), None) if d != HALTPOLL_DRIVER => "not in effect".into(),
        _ => "-".into(),
    }
}

/// The window that governs this guest's idle: `window` where the cpuidle
/// driver in use is `haltpoll`, else `None` (the parameter of a driver not
/// in use governs nothing).
pub fn halt_poll_in_effect(driver: Option<&str>, window: Option<u64>) -> Option<u64> {
    match driver {
        Some(HALTPOLL_DRIVER) => window,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bracketed_mode_is_the_one_in_force() {
        assert_eq!(
            bracketed("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            bracketed("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(bracketed("haltpoll\n").as_deref(), Some("haltpoll"));
        assert_eq!(bracketed("  \n"), None);
        assert_eq!(bracketed("odd ] [ text").as_deref(), Some("odd ] [ text"));
    }

    #[test]
    fn the_first_model_name_is_taken() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(info).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn steal_is_the_eighth_value_of_the_cpu_line() {
        let stat = "cpu  8005 0 3152 236126 179 0 937 209 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(steal_ticks(stat), Some(209));
        assert_eq!(steal_ticks("cpu  1 2 3\n"), None, "a short line");
        assert_eq!(
            steal_ticks("cpu0 1 2 3 4 5 6 7 8\n"),
            None,
            "no aggregate line"
        );
        assert_eq!(steal_ticks("cpu  1 2 3 4 5 6 7 x 0\n"), None);
    }

    #[test]
    fn the_halt_polling_window_is_printed_in_words() {
        assert_eq!(halt_poll(Some("haltpoll"), Some(0)), "off (0 ns)");
        assert_eq!(
            halt_poll(Some("haltpoll"), Some(200_000)),
            "up to 200000 ns"
        );
        assert_eq!(halt_poll(Some("none"), None), "not in effect");
        assert_eq!(halt_poll(Some("haltpoll"), None), "-");
        assert_eq!(halt_poll(None, None), "-");
    }

    #[test]
    fn the_window_counts_only_under_the_haltpoll_driver() {
        for (driver, window, want) in [
            (Some("haltpoll"), Some(0), Some(0)),
            (Some("haltpoll"), Some(200_000), Some(200_000)),
            (Some("haltpoll"), None, None),
            (Some("none"), Some(200_000), None),
            (Some("intel_idle"), Some(200_000), None),
            (Some("acpi_idle"), Some(0), None),
            (None, Some(200_000), None),
            (None, None, None),
        ] {
            assert_eq!(
                halt_poll_in_effect(driver, window),
                want,
                "{driver:?} {window:?}"
            );
        }
    }

    #[test]
    fn a_report_without_the_halt_polling_window_still_reads() {
        let mut h = HostWatch::begin().finish();
        h.halt_poll_ns = None;
        let mut v = serde_json::to_value(&h).unwrap();
        v.as_object_mut().unwrap().remove("halt_poll_ns");
        let back: HostState = serde_json::from_value(v).unwrap();
        assert_eq!(back, h, "an older compare.json reads as unknown");
    }

    #[test]
    fn a_watch_reads_this_hosts_state() {
        let h = HostWatch::begin().finish();
        assert!(h.cpus >= 1);
        assert!(h.wall_s >= 0.0);
        // Every Linux host has /proc/stat; steal is 0 or more there.
        assert!(h.steal_cpus.is_some_and(|s| s >= 0.0), "{h:?}");
        let text = h.render();
        assert!(
            text.starts_with("Host: ") && text.contains("cpuidle driver"),
            "{text}"
        );
        // Where the haltpoll driver is in use, its window is read (its
        // value may be changed meanwhile by a comparison that sets it);
        // under any other driver it is not in effect and not recorded.
        let in_use = h.cpuidle_driver.as_deref() == Some(HALTPOLL_DRIVER);
        assert_eq!(
            h.halt_poll_ns.is_some(),
            in_use && std::path::Path::new(HALT_POLL_NS).exists(),
            "{h:?}"
        );
    }
}
