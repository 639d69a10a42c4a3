//! Core pinning: the process affinity mask, the seat → CPU mapping, and the
//! rule that decides whether seats are pinned at all.
//!
//! Source: `DESIGN.md` §4 (pinned binding: "optional core pinning where cores
//! allow"). The mask is captured once at boot, before any thread is pinned
//! (pinning a thread narrows only that thread, but a later read from a pinned
//! thread would see its narrowed mask). Seat `k` goes to the `k`-th allowed
//! CPU, modulo the mask's size: CPU ids are whatever the mask lists (`0-1,4`
//! → `[0, 1, 4]`), never assumed to be `0..n`.

use std::fmt;

/// Whether seat threads are pinned to CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PinCores {
    /// Pin unless the mask is unrestricted and the quota is below the host's
    /// CPU count (a quota of time spread over every CPU: pinning would crowd
    /// the first few). See [`decide`].
    #[default]
    Auto,
    /// Always pin.
    On,
    /// Never pin.
    Off,
}

/// A CPU list could not be read or parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AffinityError {
    /// A malformed `Cpus_allowed_list` value.
    #[error("malformed CPU list {text:?}: {why}; expected ranges like `0-3,8`")]
    Malformed {
        /// The value as read.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// `/proc/self/status` could not be read or has no `Cpus_allowed_list`.
    #[error(
        "cannot read the affinity mask from /proc/self/status: {0}; run boot with PinCores::Off"
    )]
    Unreadable(String),
}

/// The process's allowed CPUs, ascending, without duplicates; never empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityMask {
    cpus: Vec<usize>,
}

impl AffinityMask {
    /// A mask from CPU ids (sorted and deduplicated).
    ///
    /// Errors: [`AffinityError::Malformed`] when `cpus` is empty.
    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Result<Self, AffinityError> {
        let mut cpus: Vec<usize> = cpus.into_iter().collect();
        cpus.sort_unstable();
        cpus.dedup();
        if cpus.is_empty() {
            return Err(AffinityError::Malformed {
                text: String::new(),
                why: "no CPU listed".into(),
            });
        }
        Ok(AffinityMask { cpus })
    }

    /// Parses a kernel CPU list (`Cpus_allowed_list` / cpuset format:
    /// `0-1,4`, `2,4`, `7`) with [`fleet::quota::parse_cpu_list`].
    ///
    /// Errors: [`AffinityError::Malformed`] naming what was wrong (an empty
    /// list included).
    pub fn parse(text: &str) -> Result<Self, AffinityError> {
        let cpus = fleet::quota::parse_cpu_list(text).map_err(|e| AffinityError::Malformed {
            text: text.to_string(),
            why: e.detail,
        })?;
        Self::from_cpus(cpus).map_err(|_| AffinityError::Malformed {
            text: text.to_string(),
            why: "no CPU listed".into(),
        })
    }

    /// Reads `Cpus_allowed_list` from a `/proc/<pid>/status` text.
    ///
    /// Errors: [`AffinityError::Unreadable`] if the line is absent, or the
    /// parse error.
    pub fn from_status(status: &str) -> Result<Self, AffinityError> {
        let line = fleet::quota::cpus_allowed_list(status)
            .ok_or_else(|| AffinityError::Unreadable("no Cpus_allowed_list line".into()))?;
        Self::parse(line)
    }

    /// Captures this process's mask from `/proc/self/status`. Call once at
    /// boot, before pinning any thread.
    ///
    /// Errors: [`AffinityError`] when the file is unreadable or malformed.
    pub fn capture() -> Result<Self, AffinityError> {
        let status = std::fs::read_to_string("/proc/self/status")
            .map_err(|e| AffinityError::Unreadable(e.to_string()))?;
        Self::from_status(&status)
    }

    /// The allowed CPU ids, ascending.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Number of allowed CPUs (≥ 1).
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Always `false` (a mask lists at least one CPU); for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// The CPU for seat `k`: the `k`-th allowed CPU, modulo the count.
    pub fn cpu_for_seat(&self, k: usize) -> usize {
        self.cpus[k % self.cpus.len()]
    }

    /// The mask lists at least every CPU the host has online.
    pub fn is_unrestricted(&self, host_cpus: usize) -> bool {
        self.cpus.len() >= host_cpus
    }
}

impl fmt::Display for AffinityMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<String> = self.cpus.iter().map(|c| c.to_string()).collect();
        write!(f, "[{}]", ids.join(", "))
    }
}

/// CPUs the host has online (`sysconf(_SC_NPROCESSORS_ONLN)`; ignores the
/// affinity mask and the cgroup quota, which is the point). At least 1.
pub fn host_cpu_count() -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

/// Why seats are or are not pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PinDecision {
    /// Pin seat `k` to `mask.cpu_for_seat(k)`.
    Pin(PinReason),
    /// Leave seats to the scheduler.
    NoPin(PinReason),
}

/// The rule a [`PinDecision`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PinReason {
    /// `PinCores::On`.
    Forced,
    /// `PinCores::Off`.
    Disabled,
    /// `Auto`, and the mask is a strict subset of the host: the cpuset is ours.
    RestrictedMask,
    /// `Auto`, unrestricted mask, and the quota covers every host CPU: not
    /// pinned. An unrestricted mask says nothing about who else runs on
    /// the host, and a pinned thread cannot move off a CPU another process
    /// keeps busy (measured: a serial cycle thread pinned to CPU 0 beside
    /// another process's thread on CPU 0 fell 30× behind; unpinned, the
    /// kernel moved it). Decision 0004.
    WholeHost,
    /// `Auto`, unrestricted mask, quota below the host's CPU count.
    QuotaBelowHost,
    /// `Auto`, and the plan is oversubscribed (a forced pinned profile on a
    /// host below the pinned floor): with more busy seats than CPUs, fixed
    /// pins can stack two running walks on one CPU while another idles.
    Oversubscribed,
}

impl PinDecision {
    /// Whether seats are pinned.
    pub const fn pins(self) -> bool {
        matches!(self, PinDecision::Pin(_))
    }
}

/// The pinning rule (a pure function; tested as a table).
///
/// `quota_cpus` is the effective CPU budget in cores (may be fractional);
/// `oversubscribed` is the plan's mark.
pub fn decide(
    pin: PinCores,
    mask: &AffinityMask,
    host_cpus: usize,
    quota_cpus: f64,
    oversubscribed: bool,
) -> PinDecision {
    match pin {
        PinCores::On => PinDecision::Pin(PinReason::Forced),
        PinCores::Off => PinDecision::NoPin(PinReason::Disabled),
        PinCores::Auto if oversubscribed => PinDecision::NoPin(PinReason::Oversubscribed),
        PinCores::Auto if !mask.is_unrestricted(host_cpus) => {
            PinDecision::Pin(PinReason::RestrictedMask)
        }
        PinCores::Auto if quota_cpus < host_cpus as f64 => {
            PinDecision::NoPin(PinReason::QuotaBelowHost)
        }
        PinCores::Auto => PinDecision::NoPin(PinReason::WholeHost),
    }
}

/// Pins the calling thread to `cpu`; returns whether the kernel accepted it.
pub fn pin_current_thread(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// Sets thread `tid`'s affinity (0: the calling thread) to exactly `cpus`;
/// returns whether the kernel accepted it (an empty list, a CPU past the
/// kernel's set size or outside the cgroup's cpuset is refused).
pub(crate) fn set_thread_affinity(tid: libc::pid_t, cpus: &[usize]) -> bool {
    // SAFETY: an all-zero `cpu_set_t` is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if c >= size * 8 {
            return false;
        }
        // SAFETY: `c` is within the set's bits.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: a plain system call with a valid set of `size` bytes.
    !cpus.is_empty() && unsafe { libc::sched_setaffinity(tid, size, &set) } == 0
}

/// Thread `tid`'s affinity (0: the calling thread), sorted; `None` where
/// the kernel refuses to say.
pub(crate) fn thread_affinity(tid: libc::pid_t) -> Option<Vec<usize>> {
    // SAFETY: an all-zero `cpu_set_t` is a valid out-buffer.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a plain system call into a buffer of `size` bytes.
    if unsafe { libc::sched_getaffinity(tid, size, &mut set) } != 0 {
        return None;
    }
    // SAFETY: CPU_ISSET reads a bit of a valid set.
    Some(
        (0..size * 8)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_map_seats_to_the_listed_cpus() {
        let cases: [(&str, &[usize], &[usize]); 4] = [
            ("2,4", &[2, 4], &[2, 4, 2, 4, 2]),
            ("0-1,4", &[0, 1, 4], &[0, 1, 4, 0, 1]),
            ("0-7", &[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3, 4]),
            (" 5 ", &[5], &[5, 5, 5, 5, 5]),
        ];
        for (text, cpus, seats) in cases {
            let m = AffinityMask::parse(text).unwrap();
            assert_eq!(m.cpus(), cpus, "{text}");
            let got: Vec<usize> = (0..seats.len()).map(|k| m.cpu_for_seat(k)).collect();
            assert_eq!(got, seats, "{text}");
        }
    }

    #[test]
    fn malformed_lists_are_typed_errors() {
        for text in ["", "a", "3-1", "1-", ",", "0-99999999"] {
            assert!(
                matches!(
                    AffinityMask::parse(text),
                    Err(AffinityError::Malformed { .. })
                ),
                "{text:?}"
            );
        }
        assert!(matches!(
            AffinityMask::from_status("Name: x\n"),
            Err(AffinityError::Unreadable(_))
        ));
    }

    #[test]
    fn reads_the_status_line() {
        let status =
            "Name:\tfoo\nCpus_allowed:\t13\nCpus_allowed_list:\t0,2-3\nMems_allowed_list:\t0\n";
        assert_eq!(
            AffinityMask::from_status(status).unwrap().cpus(),
            &[0, 2, 3]
        );
    }

    #[test]
    fn the_live_mask_is_readable_and_inside_the_host() {
        let m = AffinityMask::capture().unwrap();
        assert!(m.len() <= host_cpu_count().max(*m.cpus().last().unwrap() + 1));
    }

    /// Every (setting, mask shape, quota) row of the pinning rule.
    #[test]
    fn the_pinning_rule_as_a_table() {
        use PinDecision::*;
        use PinReason::*;
        let unrestricted = AffinityMask::parse("0-7").unwrap();
        let cpuset = AffinityMask::parse("0-1,4").unwrap();
        let rows: [(PinCores, &AffinityMask, f64, PinDecision); 12] = [
            // (setting, mask, quota, decision) for a plan that is not oversubscribed.
            (PinCores::On, &unrestricted, 2.0, Pin(Forced)),
            (PinCores::On, &cpuset, 2.0, Pin(Forced)),
            (PinCores::On, &unrestricted, 8.0, Pin(Forced)),
            (PinCores::Off, &unrestricted, 8.0, NoPin(Disabled)),
            (PinCores::Off, &cpuset, 3.0, NoPin(Disabled)),
            (PinCores::Off, &unrestricted, 2.0, NoPin(Disabled)),
            (PinCores::Auto, &cpuset, 3.0, Pin(RestrictedMask)),
            (PinCores::Auto, &cpuset, 1.5, Pin(RestrictedMask)),
            (PinCores::Auto, &unrestricted, 2.0, NoPin(QuotaBelowHost)),
            (PinCores::Auto, &unrestricted, 7.5, NoPin(QuotaBelowHost)),
            (PinCores::Auto, &unrestricted, 8.0, NoPin(WholeHost)),
            (PinCores::Auto, &unrestricted, 16.0, NoPin(WholeHost)),
        ];
        for (pin, mask, quota, want) in rows {
            assert_eq!(
                decide(pin, mask, 8, quota, false),
                want,
                "{pin:?} {mask} q={quota}"
            );
            // An oversubscribed plan is never auto-pinned; explicit settings win.
            let over = match pin {
                PinCores::Auto => NoPin(Oversubscribed),
                _ => want,
            };
            assert_eq!(
                decide(pin, mask, 8, quota, true),
                over,
                "{pin:?} {mask} q={quota} oversubscribed"
            );
        }
    }
}
