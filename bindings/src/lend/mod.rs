//! The reserved cores lent at the idle scheduling class, and the guard that
//! takes them back from other processes.
//!
//! `docs/decisions/0009-reserve-lent-at-idle-class.md`. Where the plan lends
//! the reserve ([`fleet::plan::Plan::reserve_lent`]), every cycle thread
//! runs at `SCHED_IDLE`: each of the host's own (normal-class) threads
//! preempts it the moment it wakes, wherever it lands, so the fleet uses
//! the reserved core only while the host leaves it idle. The cost is that
//! any other process's busy thread preempts it too; the guard
//! (`work-fleet-lend-guard`) watches for that and returns every cycle
//! thread to the normal class while it lasts:
//!
//! - every [`GUARD_PERIOD`] it reads each cycle thread's time spent
//!   runnable and waiting on a run queue (the second field of
//!   `/proc/self/task/TID/schedstat`), its CPU clock, and whether the
//!   thread is inside a poll of one of its units;
//! - a thread that waited on a run queue for at least [`STARVED_WAIT_SHARE`]
//!   of the time between two checks was starved. Where the kernel keeps no
//!   schedstat, the older rule stands: a thread found inside the *same*
//!   poll at two checks whose CPU clock advanced by less than
//!   [`STARVED_CPU_SHARE`] of the time between them. That rule misses a
//!   thread that still gets a fifth of a core or whose polls are shorter
//!   than a period: a nice-19 busy loop (weight 15 against the idle
//!   class's 3) left a lent cycle thread a sixth of a core and the guard
//!   took 0.65 s to see it, an idle-class one half a core and the guard
//!   never saw it, while the cycle's makespan grew 37× and 5×;
//! - and the starvation is one the fleet is owed a remedy for: other
//!   processes used at least [`OWN_WORK_SLACK_CPUS`] of the fleet's CPUs
//!   over a span of the last 100 ms ([`others`]: a lower bound from the
//!   kernel's busy time ([`busy`]) less the process's own; where it cannot
//!   be read, the whole process used less than its CPUs less that slack
//!   since the last check), or the host's own threads (the process less
//!   the cycle threads) used more than the reserve plus that slack. A host
//!   within its reserve that keeps the lent core busy is what lending
//!   yields to: no promotion;
//! - then every cycle thread goes back to the normal class for a hold
//!   ([`FIRST_HOLD`], doubled, up to [`MAX_HOLD`], each time starvation
//!   returns within a hold of the last demotion), and past it for as long
//!   as other processes still use that slack of the fleet's CPUs, then to
//!   the idle class again. While promoted, each cycle thread is pinned to
//!   a CPU of its own ([`spread`]; decision 0027): left to the kernel, two
//!   of them stacked on one CPU beside a busy neighbour.
//!
//! Under the older rule, a unit that blocks in a system call inside its
//! poll also reads as starved, and the guard then promotes for nothing but
//! a hold (counted). A blocked thread is not on a run queue, so the
//! schedstat rule does not mistake it (decision 0022).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod busy;
mod others;

/// The guard thread's name.
pub(crate) const GUARD_THREAD_NAME: &str = "work-fleet-lend-guard";

/// How often the guard checks the cycle threads.
pub(crate) const GUARD_PERIOD: Duration = Duration::from_millis(10);

/// A thread that waited on a run queue for at least this share of the wall
/// time between two checks is starved (a cycle thread parks when it has no
/// work, so a wait on a run queue is work held back).
pub(crate) const STARVED_WAIT_SHARE: f64 = 0.3;

/// Without schedstat: a thread inside one poll that got less than this
/// share of the wall time between two checks is starved.
pub(crate) const STARVED_CPU_SHARE: f64 = 0.2;

/// Slack, cores, in telling who starved the cycle threads (see
/// [`owed`]).
pub(crate) const OWN_WORK_SLACK_CPUS: f64 = 0.5;

/// The first hold at the normal class after starvation.
pub(crate) const FIRST_HOLD: Duration = Duration::from_secs(1);

/// The longest hold (starvation that keeps coming back doubles it).
pub(crate) const MAX_HOLD: Duration = Duration::from_secs(16);

/// One cycle thread as the guard sees it.
#[derive(Debug, Default)]
pub(crate) struct CycleSlot {
    /// The thread's kernel id (0 until it starts).
    tid: AtomicI32,
    /// Its CPU-time clock (`pthread_getcpuclockid`).
    clock: AtomicI32,
    published: AtomicBool,
    /// Polls begun and ended: inside a poll while they differ.
    begun: AtomicU64,
    ended: AtomicU64,
}

impl CycleSlot {
    /// On the cycle thread itself, first thing: publish its id and CPU
    /// clock and enter the idle class.
    pub(crate) fn enter(&self) {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self is this thread; `clock` is a valid out-pointer.
        let ok = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0;
        // SAFETY: gettid has no preconditions.
        self.tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
        self.clock.store(clock, Ordering::Relaxed);
        self.published.store(ok, Ordering::Release);
        set_class(0, true);
    }

    /// Runs `fut`, counting each of its polls (the guard's "inside a poll").
    pub(crate) async fn counted<F: std::future::Future>(self: Arc<Self>, fut: F) -> F::Output {
        /// Ends the poll even when it unwinds.
        struct Ended<'a>(&'a AtomicU64);
        impl Drop for Ended<'_> {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| {
            self.begun.fetch_add(1, Ordering::Relaxed);
            let _ended = Ended(&self.ended);
            fut.as_mut().poll(cx)
        })
        .await
    }

    /// The thread's time spent runnable and waiting on a run queue, ns
    /// (`None` until it starts, or where the kernel keeps no schedstat).
    fn wait_ns(&self) -> Option<u64> {
        if !self.published.load(Ordering::Acquire) {
            return None;
        }
        let tid = self.tid.load(Ordering::Relaxed);
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        run_queue_wait_ns(&text)
    }

    fn cpu_ns(&self) -> Option<u64> {
        if !self.published.load(Ordering::Acquire) {
            return None;
        }
        clock_ns(self.clock.load(Ordering::Relaxed))
    }
}

/// The run-queue wait of a `schedstat` line (`on-CPU ns`, `waiting ns`,
/// `timeslices`), ns; `None` for anything else.
fn run_queue_wait_ns(text: &str) -> Option<u64> {
    let mut fields = text.split_ascii_whitespace();
    let _on_cpu: u64 = fields.next()?.parse().ok()?;
    let waiting = fields.next()?.parse().ok()?;
    let _slices: u64 = fields.next()?.parse().ok()?;
    fields.next().is_none().then_some(waiting)
}

/// Reads clock `id`, ns; `None` when the call fails (a thread's CPU clock
/// whose thread ended).
fn clock_ns(id: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; a stale clock id makes the call
    // fail, not misbehave.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Sets thread `tid`'s class (0: the calling thread): idle or normal.
/// Returns whether the kernel took it.
fn set_class(tid: libc::pid_t, idle: bool) -> bool {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain system call on a thread id with a valid parameter.
    unsafe { libc::sched_setscheduler(tid, policy, &param) == 0 }
}

/// Whether this process may take a thread back from the idle class (an
/// unprivileged one may not: it needs `CAP_SYS_NICE` or `RLIMIT_NICE` ≥ 20).
/// Tried on a short-lived thread of its own.
pub(crate) fn class_is_reversible() -> bool {
    std::thread::Builder::new()
        .name("work-fleet-lend-probe".into())
        .spawn(|| set_class(0, true) && set_class(0, false))
        .ok()
        .and_then(|t| t.join().ok())
        .unwrap_or(false)
}

/// What the guard did, shared with the fleet's status.
#[derive(Debug, Default)]
pub(crate) struct LendStats {
    pub(crate) promotions: AtomicU64,
    pub(crate) promoted: AtomicBool,
}

/// The running guard.
pub(crate) struct Guard {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Guard {
    /// Starts the guard over `slots` (every cycle thread, each published),
    /// on `cpus` CPUs (the lent plan's ⌊Q⌋, which covers every CPU the
    /// process may use) of which `reserve` are the host's own.
    pub(crate) fn start(
        slots: Vec<Arc<CycleSlot>>,
        stats: Arc<LendStats>,
        cpus: u32,
        reserve: u32,
    ) -> std::io::Result<Guard> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let shares = Shares {
            cpus: f64::from(cpus),
            reserve: f64::from(reserve),
        };
        let thread = std::thread::Builder::new()
            .name(GUARD_THREAD_NAME.into())
            .spawn(move || guard_loop(&slots, &stats, &flag, shares))?;
        Ok(Guard { stop, thread })
    }

    /// Stops the guard and waits for it (at most one period).
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

/// One check's view of one thread.
#[derive(Clone, Copy)]
struct Seen {
    begun: u64,
    ended: u64,
    cpu_ns: u64,
    /// Run-queue wait, ns, where schedstat is kept.
    wait_ns: Option<u64>,
    at: Instant,
}

/// Whether the thread was starved between two checks: it waited on a run
/// queue for at least [`STARVED_WAIT_SHARE`] of the time between them, or,
/// where either check has no schedstat, it was inside the same poll at
/// both and got less than [`STARVED_CPU_SHARE`] of that time.
fn starved(prev: Seen, now: Seen) -> bool {
    let wall = now.at.saturating_duration_since(prev.at).as_nanos() as f64;
    if wall <= 0.0 {
        return false;
    }
    if let (Some(a), Some(b)) = (prev.wait_ns, now.wait_ns) {
        return b.saturating_sub(a) as f64 >= STARVED_WAIT_SHARE * wall;
    }
    let same_poll = prev.begun == now.begun && prev.ended == now.ended && now.begun != now.ended;
    let cpu = now.cpu_ns.saturating_sub(prev.cpu_ns) as f64;
    same_poll && cpu < STARVED_CPU_SHARE * wall
}

/// The CPUs the guard judges against.
#[derive(Debug, Clone, Copy)]
struct Shares {
    /// Every CPU the process may use.
    cpus: f64,
    /// The host's own (the reserve lent to the fleet).
    reserve: f64,
}

/// What the guard knows of other processes' CPU on the fleet's CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Neighbours {
    /// Cores they used over the trailing window ([`others`]).
    Measured(f64),
    /// The guard's first check: not known, so not blamed.
    Filling,
    /// `/proc/stat` cannot be read: judged by the process's own CPU alone.
    Unknown,
}

/// Whether starvation between two checks `wall_ns` apart is owed a remedy:
/// other processes used at least `slack` cores of the fleet's CPUs over the
/// trailing window (where `/proc/stat` cannot be read: the process used
/// fewer than `cpus − slack` cores, which also holds when the fleet merely
/// had less work), or its threads other than the cycle threads used more
/// than `reserve + slack` (the host's own work went past its reserve into
/// the fleet's cores). CPU figures are the deltas over the same time, ns.
fn owed(process_ns: u64, cycle_ns: u64, wall_ns: u64, n: Neighbours, s: Shares) -> bool {
    if wall_ns == 0 {
        return false;
    }
    let wall = wall_ns as f64;
    let process = process_ns as f64;
    let host = process_ns.saturating_sub(cycle_ns) as f64;
    let others = match n {
        Neighbours::Measured(cores) => cores >= OWN_WORK_SLACK_CPUS,
        Neighbours::Filling => false,
        Neighbours::Unknown => process < (s.cpus - OWN_WORK_SLACK_CPUS) * wall,
    };
    others || host > (s.reserve + OWN_WORK_SLACK_CPUS) * wall
}

/// Whether a promotion `held` long with hold `hold` ends now: the hold has
/// passed and other processes no longer use [`OWN_WORK_SLACK_CPUS`] of the
/// fleet's CPUs (while they do, lending again would only starve the cycle
/// threads once more until the guard saw it: a stall of a check or two at
/// every hold's end). Where their CPU is not measured, the hold alone.
fn hold_over(held: Duration, hold: Duration, n: Neighbours) -> bool {
    held >= hold && !matches!(n, Neighbours::Measured(c) if c >= OWN_WORK_SLACK_CPUS)
}

/// The process's CPU time, ns (all its threads).
fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}

/// The hold after a promotion at `now`: doubled when starvation came back
/// within the last hold of the previous demotion.
fn next_hold(hold: Duration, demoted_at: Option<Instant>, now: Instant) -> Duration {
    match demoted_at {
        Some(d) if now.saturating_duration_since(d) < hold => (hold * 2).min(MAX_HOLD),
        _ => FIRST_HOLD,
    }
}

fn set_all(slots: &[Arc<CycleSlot>], idle: bool) {
    for s in slots {
        if s.published.load(Ordering::Acquire) {
            set_class(s.tid.load(Ordering::Relaxed), idle);
        }
    }
}

/// Pins each published cycle thread that may run on more than one CPU to
/// one CPU of its own mask, the k-th such thread to its mask's k-th CPU
/// (round robin), and returns each slot's mask before, to give back with
/// [`gather`] (`None` where it was left as it was: unpublished, already on
/// one CPU by the plan, or its mask unreadable).
///
/// Unpinned, two promoted cycle threads stacked on one CPU for up to
/// 0.8 s while a busy neighbour held the other: a wake-up that finds no
/// idle CPU lands beside its waker, and the cycles ran at about 1.7× their
/// time (decision 0027).
fn spread(slots: &[Arc<CycleSlot>]) -> Vec<Option<Vec<usize>>> {
    let mut k = 0usize;
    slots
        .iter()
        .map(|s| {
            if !s.published.load(Ordering::Acquire) {
                return None;
            }
            let tid = s.tid.load(Ordering::Relaxed);
            let before = crate::affinity::thread_affinity(tid).filter(|m| m.len() > 1)?;
            let cpu = before[k % before.len()];
            k += 1;
            crate::affinity::set_thread_affinity(tid, &[cpu]).then_some(before)
        })
        .collect()
}

/// Gives each thread that [`spread`] pinned its mask from before.
fn gather(slots: &[Arc<CycleSlot>], before: Vec<Option<Vec<usize>>>) {
    for (s, mask) in slots.iter().zip(before) {
        if let Some(mask) = mask {
            crate::affinity::set_thread_affinity(s.tid.load(Ordering::Relaxed), &mask);
        }
    }
}

fn guard_loop(slots: &[Arc<CycleSlot>], stats: &LendStats, stop: &AtomicBool, shares: Shares) {
    let mut seen: Vec<Option<Seen>> = vec![None; slots.len()];
    let mut process = (process_cpu_ns(), Instant::now());
    let mut promoted_at: Option<Instant> = None;
    let mut demoted_at: Option<Instant> = None;
    let mut hold = FIRST_HOLD;
    let mut spread_masks: Vec<Option<Vec<usize>>> = Vec::new();
    let mask = others::allowed_cpus();
    let clock = busy::BusyClock::detect(&mask);
    tracing::debug!(
        clock = clock.name(),
        slack_ms = clock.slack_ns() / 1e6,
        "the lend guard reads other processes' CPU"
    );
    let mut window = others::Others::new(clock.slack_ns(), mask.len());
    while !stop.load(Ordering::Acquire) {
        std::thread::park_timeout(GUARD_PERIOD);
        let at = Instant::now();
        let now_cpu = process_cpu_ns();
        let neighbours = match clock.read(&mask) {
            Some(busy_ns) => window
                .record(at, busy_ns, now_cpu)
                .map_or(Neighbours::Filling, Neighbours::Measured),
            None => Neighbours::Unknown,
        };
        let process_ns = now_cpu.saturating_sub(process.0);
        let wall_ns = at.saturating_duration_since(process.1).as_nanos() as u64;
        process = (now_cpu, at);
        let mut cycle_ns = 0u64;
        let mut any_starved = false;
        for (slot, prev) in slots.iter().zip(seen.iter_mut()) {
            let Some(cpu_ns) = slot.cpu_ns() else {
                *prev = None;
                continue;
            };
            let now = Seen {
                begun: slot.begun.load(Ordering::Relaxed),
                ended: slot.ended.load(Ordering::Relaxed),
                cpu_ns,
                wait_ns: slot.wait_ns(),
                at,
            };
            if let Some(p) = *prev {
                any_starved |= starved(p, now);
                cycle_ns += now.cpu_ns.saturating_sub(p.cpu_ns);
            }
            *prev = Some(now);
        }
        let external = owed(process_ns, cycle_ns, wall_ns, neighbours, shares);
        match promoted_at {
            None if any_starved && external => {
                hold = next_hold(hold, demoted_at, at);
                set_all(slots, false);
                spread_masks = spread(slots);
                promoted_at = Some(at);
                stats.promotions.fetch_add(1, Ordering::Relaxed);
                stats.promoted.store(true, Ordering::Relaxed);
                fleet::telemetry::record_lent_promotion();
                tracing::info!(
                    hold_ms = hold.as_millis() as u64,
                    "lent cycle threads starved by other processes: back at the normal class for the hold"
                );
            }
            Some(p) if hold_over(at.saturating_duration_since(p), hold, neighbours) => {
                set_all(slots, true);
                gather(slots, std::mem::take(&mut spread_masks));
                promoted_at = None;
                demoted_at = Some(at);
                stats.promoted.store(false, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
