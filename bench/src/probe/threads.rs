//! Thread census of this process from `/proc/self/task`, sampled while a
//! run lasts: threads at start, peak, threads created during the run, and
//! peak runnable threads (state `R`). The lab's own threads (named
//! [`LAB_THREAD_PREFIX`]…: this sampler, the co-tenant, the sim I/O timer)
//! are never counted as runnable: they are not the contender's.
//!
//! Threads that are born and die between two samples are invisible to
//! sampling; runners that spawn threads themselves also report their own
//! spawn counts, and the report takes the larger figure.
//!
//! The same sampler reads the process's resident set size about once a
//! second ([`RSS_EVERY`]), so a long run shows whether memory creeps.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::rss::RssSeries;

/// The name prefix of the lab's own threads.
pub const LAB_THREAD_PREFIX: &str = "lab-";

/// How often the monitor reads the resident set size.
pub const RSS_EVERY: Duration = Duration::from_secs(1);

/// This process's resident set size, KiB, from `/proc/self/statm`; `None`
/// where it cannot be read.
pub fn rss_kib() -> Option<u64> {
    let statm = fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf with a valid name has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page)
        .ok()
        .map(|p| pages.saturating_mul(p) / 1024)
}

/// One read of `/proc/self/task`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSnapshot {
    /// Thread ids present.
    pub tids: BTreeSet<u32>,
    /// How many were runnable (`R`) at the read, the lab's own threads
    /// left out.
    pub runnable: u32,
}

/// Reads the thread ids and the runnable count of this process.
pub fn snapshot() -> TaskSnapshot {
    let mut snap = TaskSnapshot::default();
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return snap;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        snap.tids.insert(tid);
        if let Ok(stat) = fs::read_to_string(entry.path().join("stat")) {
            if task_state(&stat) == Some('R') && !is_lab_thread(&stat) {
                snap.runnable += 1;
            }
        }
    }
    snap
}

/// The names (`comm`) of this process's threads, sorted (duplicates kept).
pub fn thread_names() -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc/self/task") {
        for entry in dir.flatten() {
            if let Ok(comm) = fs::read_to_string(entry.path().join("comm")) {
                names.push(comm.trim_end().to_string());
            }
        }
    }
    names.sort();
    names
}

/// Whether a `stat` line is one of the lab's own threads (its command
/// starts with [`LAB_THREAD_PREFIX`]).
pub fn is_lab_thread(stat: &str) -> bool {
    stat.find('(')
        .is_some_and(|open| stat[open + 1..].starts_with(LAB_THREAD_PREFIX))
}

/// The state letter of a `/proc/<pid>/task/<tid>/stat` line (the field after
/// the parenthesised command, which may itself contain spaces and parens).
pub fn task_state(stat: &str) -> Option<char> {
    let close = stat.rfind(')')?;
    stat[close + 1..].split_whitespace().next()?.chars().next()
}

/// CPU time of the calling thread, seconds.
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Figures from a sampled run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadFigures {
    /// Threads when sampling began.
    pub at_start: u32,
    /// Most threads seen at once.
    pub peak: u32,
    /// Distinct thread ids seen that were not there at the start.
    pub created_during_run: u32,
    /// Most runnable threads seen at once (the lab's own threads excluded).
    pub peak_runnable: u32,
    /// Samples taken.
    pub samples: u64,
    /// CPU time the sampler itself used, seconds (subtract it from the
    /// process's CPU to get the workload's).
    pub own_cpu_seconds: f64,
    /// Resident set size samples: (seconds since sampling began, KiB), the
    /// first at the start, then every [`RSS_EVERY`], the last at the end;
    /// bounded (see [`RssSeries`]), so a long run's sampling does not grow.
    pub rss: RssSeries,
    /// Timer slack (ns) → threads seen with it, the lab's own threads left
    /// out; each thread read once, when first seen (at the start or later).
    pub timer_slack_ns: BTreeMap<u64, u32>,
}

/// The timer slack of thread `tid` of this process in ns, or `None` for
/// one of the lab's own threads or where it cannot be read
/// (`/proc/TID/timerslack_ns`, Linux 4.6 and later; reading another
/// thread's needs `CAP_SYS_NICE`).
pub fn timer_slack_ns(tid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    if is_lab_thread(&stat) {
        return None;
    }
    fs::read_to_string(format!("/proc/{tid}/timerslack_ns"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A background sampler of `/proc/self/task` (its own thread is excluded
/// from every figure).
pub struct ThreadMonitor {
    stop: Arc<AtomicBool>,
    join: Option<JoinHandle<ThreadFigures>>,
}

impl ThreadMonitor {
    /// Starts sampling every `period` (1 ms is a good default).
    pub fn start(period: Duration) -> std::io::Result<Self> {
        let start = snapshot();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let join = std::thread::Builder::new()
            .name("lab-threadmon".into())
            .spawn(move || {
                let me = unsafe { libc::gettid() } as u32;
                let mut seen: BTreeSet<u32> = start.tids.clone();
                let mut figures = ThreadFigures {
                    at_start: start.tids.len() as u32,
                    ..Default::default()
                };
                for tid in start.tids.iter().filter(|t| **t != me) {
                    if let Some(ns) = timer_slack_ns(*tid) {
                        *figures.timer_slack_ns.entry(ns).or_default() += 1;
                    }
                }
                let began = Instant::now();
                let mut next_rss = began;
                loop {
                    let now = Instant::now();
                    let stopping = flag.load(Ordering::Relaxed);
                    if now >= next_rss || stopping {
                        if let Some(kib) = rss_kib() {
                            figures
                                .rss
                                .push(now.duration_since(began).as_secs_f64(), kib);
                        }
                        next_rss = now + RSS_EVERY;
                    }
                    let snap = snapshot();
                    let others = snap.tids.iter().filter(|t| **t != me).count() as u32;
                    figures.peak = figures.peak.max(others);
                    // The sampler itself (running while it reads) is a lab
                    // thread: not counted.
                    figures.peak_runnable = figures.peak_runnable.max(snap.runnable);
                    for tid in snap.tids {
                        if tid != me && seen.insert(tid) {
                            figures.created_during_run += 1;
                            if let Some(ns) = timer_slack_ns(tid) {
                                *figures.timer_slack_ns.entry(ns).or_default() += 1;
                            }
                        }
                    }
                    figures.samples += 1;
                    if stopping {
                        break;
                    }
                    std::thread::sleep(period);
                }
                figures.own_cpu_seconds = thread_cpu_seconds();
                figures
            })?;
        Ok(ThreadMonitor {
            stop,
            join: Some(join),
        })
    }

    /// Stops sampling and returns the figures.
    pub fn finish(mut self) -> ThreadFigures {
        self.stop.store(true, Ordering::Relaxed);
        self.join
            .take()
            .map(|j| j.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for ThreadMonitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_state_reads_past_a_command_with_parens_and_spaces() {
        assert_eq!(task_state("123 (work (x) y) R 1 2 3"), Some('R'));
        assert_eq!(task_state("123 (sleep) S 1"), Some('S'));
        assert_eq!(task_state("garbage"), None);
    }

    #[test]
    fn the_labs_own_threads_are_told_apart_by_name() {
        assert!(is_lab_thread("7 (lab-cotenant-pr) R 1"));
        assert!(is_lab_thread("7 (lab-sim-io) S 1"));
        assert!(!is_lab_thread("7 (work-fleet-serial) R 1"));
        assert!(!is_lab_thread("7 (fleet-lab) R 1"));
        assert!(!is_lab_thread("garbage"));
    }

    #[test]
    fn a_spinning_lab_thread_is_not_counted_as_runnable() {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let spinner = std::thread::Builder::new()
            .name("lab-spin-test".into())
            .spawn(move || while !flag.load(Ordering::Relaxed) {})
            .unwrap();
        // Let it reach the CPU, then read: it may be R, but never counted.
        std::thread::sleep(Duration::from_millis(20));
        let mut saw_running = false;
        for _ in 0..50 {
            let dir = fs::read_dir("/proc/self/task").unwrap();
            for e in dir.flatten() {
                if let Ok(stat) = fs::read_to_string(e.path().join("stat")) {
                    if is_lab_thread(&stat) && task_state(&stat) == Some('R') {
                        saw_running = true;
                    }
                }
            }
            // This test thread is running while it reads; nothing else of
            // the test's own is.
            assert!(snapshot().runnable <= 1 + other_test_threads());
        }
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(saw_running, "the spinner never showed as running");
    }

    /// Other tests of this binary may run concurrently (nextest runs one
    /// test per process; `cargo test` does not): count their threads.
    fn other_test_threads() -> u32 {
        snapshot().tids.len().saturating_sub(2) as u32
    }

    #[test]
    fn a_threads_timer_slack_is_read_and_the_labs_own_are_left_out() {
        let (tx, rx) = std::sync::mpsc::channel::<u32>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let spawn =
            |name: &str, tx: std::sync::mpsc::Sender<u32>, done: std::sync::mpsc::Receiver<()>| {
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || {
                        // SAFETY: PR_SET_TIMERSLACK changes only this thread's slack.
                        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 123_000u64, 0, 0, 0) };
                        tx.send(unsafe { libc::gettid() } as u32).unwrap();
                        let _ = done.recv();
                    })
                    .unwrap()
            };
        let worker = spawn("slack-worker", tx.clone(), done_rx);
        let tid = rx.recv().unwrap();
        match std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns")) {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                eprintln!("skip: reading another thread's timer slack needs CAP_SYS_NICE ({e})");
                assert_eq!(timer_slack_ns(tid), None, "unreadable is None");
            }
            _ => assert_eq!(timer_slack_ns(tid), Some(123_000)),
        }
        let (lab_done_tx, lab_done_rx) = std::sync::mpsc::channel::<()>();
        let lab = spawn(&format!("{LAB_THREAD_PREFIX}slack"), tx, lab_done_rx);
        let lab_tid = rx.recv().unwrap();
        assert_eq!(timer_slack_ns(lab_tid), None, "a lab thread is left out");
        assert_eq!(timer_slack_ns(u32::MAX), None, "no such thread");
        done_tx.send(()).unwrap();
        lab_done_tx.send(()).unwrap();
        worker.join().unwrap();
        lab.join().unwrap();
    }

    #[test]
    fn monitor_sees_threads_created_during_the_run() {
        let mon = ThreadMonitor::start(Duration::from_micros(200)).unwrap();
        let handles: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_millis(30))))
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let f = mon.finish();
        assert!(f.created_during_run >= 3, "{f:?}");
        assert!(f.peak >= f.at_start + 3, "{f:?}");
        assert!(f.samples > 0);
        // At least the first and the last read of the resident set.
        let samples = f.rss.samples();
        assert!(samples.len() >= 2, "{samples:?}");
        assert!(samples.iter().all(|(_, kib)| *kib > 0));
    }
}
