//! The connection cap that follows the memory left: under a memory limit,
//! routerd accepts no more connections than fit in what its other state
//! leaves (docs/router.md "The small box", "Cheaper connections").
//!
//! A connection's memory is its buffers and task, about 26 KB while it
//! holds a long poll ([`CONNECTION_BYTES`], `ci/conn-census.py`), so the
//! configured cap (4,096 by default: about 104 MiB) can take more of a
//! small box than the observed targets leave, and the kernel kills the
//! process instead of the connections waiting. Here the cap is:
//!
//! > the configured cap, or the connections that fit between the memory
//! > the rest of the process holds and [`HIGH_WATER`] of the limit,
//! > whichever is fewer, and never fewer than [`MIN_CONNECTIONS`].
//!
//! What "the rest" holds is the process's anonymous memory (`RssAnon`)
//! less its open connections at [`CONNECTION_BYTES`] each. The rule
//! ([`cap`]) is pure; [`follow`] samples the process every [`SAMPLE`] and
//! sets the listener's cap ([`super::listener::CapHandle`]). Connections past a
//! lowered cap are not cut: each closes after its next answer
//! ([`super::serve`]), and new ones wait in the kernel's backlog
//! meanwhile. It bounds what connections take of what the state leaves;
//! it does not bound the state, and in the small box's fleet at 10,000
//! sources the state's growth still ended in a kill (docs/router.md
//! "Cheaper connections").

use std::path::Path;
use std::time::Duration;

use super::listener::CapHandle;

/// Bytes one open connection is counted at: routerd's resident memory per
/// connection holding a long poll (`ci/conn-census.py`, 2026-12-07).
pub const CONNECTION_BYTES: u64 = 26 * 1024;

/// Fewest connections the cap falls to: routerd keeps serving however
/// full it is.
pub const MIN_CONNECTIONS: usize = 64;

/// The share of the memory limit the process's memory may reach with its
/// connections; the rest is the allocator's and the page cache's slack.
pub const HIGH_WATER: f64 = 0.9;

/// How often the process's memory is sampled.
pub const SAMPLE: Duration = Duration::from_millis(250);

/// The connection cap for a process holding `anon` bytes of anonymous
/// memory with `open` connections open, under a memory limit of `limit`
/// bytes, when `max` connections are configured (module docs). Always in
/// `MIN_CONNECTIONS.min(max)..=max`.
pub fn cap(limit: u64, anon: u64, open: usize, max: usize) -> usize {
    let rest = anon.saturating_sub(open as u64 * CONNECTION_BYTES);
    let high = (limit as f64 * HIGH_WATER) as u64;
    let fit = high.saturating_sub(rest) / CONNECTION_BYTES;
    let fit = usize::try_from(fit).unwrap_or(usize::MAX);
    fit.clamp(MIN_CONNECTIONS.min(max), max)
}

/// The memory limit of the control group this process runs in, bytes:
/// cgroup v2's `memory.max`, or v1's `memory.limit_in_bytes` in the
/// `memory` hierarchy. `None` without a group, without a limit ("max", or
/// v1's page-rounded `i64::MAX`), or when a file cannot be read.
pub fn group_memory_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    limit_from(&own, Path::new("/sys/fs/cgroup"))
}

/// [`group_memory_limit`] for the `/proc/self/cgroup` text `own` under
/// the hierarchy root `root`.
fn limit_from(own: &str, root: &Path) -> Option<u64> {
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        let file = if controllers.split(',').any(|c| c == "memory") {
            root.join("memory").join(rel).join("memory.limit_in_bytes")
        } else if controllers.is_empty() {
            root.join(rel).join("memory.max")
        } else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(&file) {
            return parse_limit(&text);
        }
    }
    None
}

/// A limit file's value: `None` for "max" or anything at or above 2^62
/// bytes (v1 writes its "unlimited" as `i64::MAX` rounded to a page).
fn parse_limit(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    (v < 1 << 62).then_some(v)
}

/// The process's anonymous memory, bytes: `RssAnon` of
/// `/proc/self/status`. `None` where that file or line is absent.
pub fn anonymous_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    rss_anon(&status)
}

/// The `RssAnon:` line of a `/proc/PID/status` text, in bytes.
fn rss_anon(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("RssAnon:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// Sets `handle`'s cap from the process's memory every [`SAMPLE`], under
/// a limit of `limit` bytes with `max` connections configured; logs when
/// the cap first falls below `max` and when it is back. Runs until the
/// process ends (spawn it).
pub async fn follow(handle: CapHandle, limit: u64, max: usize) {
    let mut every = tokio::time::interval(SAMPLE);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut below = false;
    loop {
        every.tick().await;
        let Some(anon) = anonymous_bytes() else {
            return;
        };
        let c = cap(limit, anon, handle.open(), max);
        handle.set_cap(c);
        if (c < max) != below {
            below = c < max;
            tracing::info!(
                cap = c,
                max,
                anonymous_mib = anon >> 20,
                limit_mib = limit >> 20,
                "connection cap {} the memory limit",
                if below {
                    "lowered for"
                } else {
                    "back, clear of"
                }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// With room to spare the configured cap stands; as the rest of the
    /// process grows the cap falls to what fits under the high water, and
    /// never below the floor; open connections are not counted as the
    /// rest.
    #[test]
    fn the_cap_is_what_fits_under_the_high_water() {
        let limit = 256 * MIB;
        assert_eq!(cap(limit, 50 * MIB, 0, 4096), 4096);
        // 200 MiB of state: 230.4 − 200 = 30.4 MiB left, 1,197 connections.
        assert_eq!(cap(limit, 200 * MIB, 0, 4096), 1197);
        // The same state with 1,000 connections open on top of it.
        let with_open = 200 * MIB + 1000 * CONNECTION_BYTES;
        assert_eq!(cap(limit, with_open, 1000, 4096), 1197);
        assert_eq!(cap(limit, 240 * MIB, 0, 4096), MIN_CONNECTIONS);
        assert_eq!(cap(limit, u64::MAX, 0, 4096), MIN_CONNECTIONS);
        // Never above the configured cap, and the floor is at most it.
        assert_eq!(cap(limit, 200 * MIB, 0, 100), 100);
        assert_eq!(cap(limit, 240 * MIB, 0, 10), 10);
        // More open connections than the process's memory: no underflow.
        assert_eq!(cap(limit, MIB, 4096, 4096), 4096);
    }

    /// The cap falls one connection for each CONNECTION_BYTES the rest
    /// grows by, through the whole range between the floor and the cap.
    #[test]
    fn the_cap_falls_one_connection_per_connections_worth_of_state() {
        let limit = 256 * MIB;
        let high = (limit as f64 * HIGH_WATER) as u64;
        let mut last = cap(limit, 0, 0, 100_000);
        for k in 1..=(high / CONNECTION_BYTES) {
            let now = cap(limit, k * CONNECTION_BYTES, 0, 100_000);
            assert!(
                now == last - 1 || now == MIN_CONNECTIONS,
                "{k}: {last} → {now}"
            );
            last = now;
        }
        assert_eq!(last, MIN_CONNECTIONS);
    }

    #[test]
    fn the_anonymous_memory_is_read_from_the_status_text() {
        let status =
            "Name:\trouterd\nVmRSS:\t  204800 kB\nRssAnon:\t  180224 kB\nRssFile:\t 24576 kB\n";
        assert_eq!(rss_anon(status), Some(180_224 * 1024));
        assert_eq!(rss_anon("Name:\trouterd\n"), None);
        assert_eq!(rss_anon("RssAnon:\t12 MB\n"), None);
        assert!(
            anonymous_bytes().is_some_and(|b| b > 0),
            "this process's own"
        );
    }

    #[test]
    fn limit_files_read_as_bytes_and_unlimited_as_none() {
        assert_eq!(parse_limit("268435456\n"), Some(256 * MIB));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit(""), None);
        assert_eq!(parse_limit("-1"), None);
    }

    /// The group's limit is found through the process's own cgroup lines,
    /// for v1's memory hierarchy and v2's unified one.
    #[test]
    fn the_groups_limit_is_found_for_v1_and_v2() {
        let root = std::env::temp_dir().join(format!("headroom-{}", std::process::id()));
        let v1 = root.join("memory/box");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "268435456\n").unwrap();
        let own_v1 = "12:cpu,cpuacct:/box\n5:memory:/box\n0::/\n";
        assert_eq!(limit_from(own_v1, &root), Some(256 * MIB));
        let v2 = root.join("unified");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        assert_eq!(limit_from("0::/unified\n", &root), None);
        std::fs::write(v2.join("memory.max"), "134217728\n").unwrap();
        assert_eq!(limit_from("0::/unified\n", &root), Some(128 * MIB));
        // No memory line, or a group whose file is missing: no limit.
        assert_eq!(limit_from("12:cpu:/box\n", &root), None);
        assert_eq!(limit_from("5:memory:/elsewhere\n", &root), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
