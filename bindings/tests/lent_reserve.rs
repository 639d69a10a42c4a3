//! The serial tier with its reserved core lent at the idle class
//! (`docs/decisions/0009-reserve-lent-at-idle-class.md`): the cycle threads
//! run at `SCHED_IDLE`, units still run and resolve, and when normal-class
//! threads keep every CPU busy (another process's, or the host's own past
//! its reserve) the guard takes the cycle threads back to the normal class,
//! so a unit completes instead of starving.

use crate::common::*;
use fleet::plan::{Binding, Plan, Profile};
use fleet::quota::{QuotaReport, QuotaSource};
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
use fleet_bindings::{boot, unit_body, BootOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn lent_plan() -> Plan {
    let cpus = 2;
    let detection = QuotaReport {
        exact_cpus: None,
        affinity_cpus: cpus,
        source: QuotaSource::Affinity,
        reason: String::new(),
        cgroup_dir: None,
        limiting_dir: None,
        affinity_list: vec![0, 1],
    };
    let plan = plan(2.0, Profile::Auto).lend_reserve(&detection);
    assert_eq!(plan.binding, Binding::Serial);
    assert!(plan.reserve_lent);
    plan
}

/// Kernel ids and policies of this process's threads whose name starts
/// with `prefix`.
fn policies(prefix: &str) -> Vec<(String, i32)> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| {
            let e = e.ok()?;
            let name = std::fs::read_to_string(e.path().join("comm")).ok()?;
            let name = name.trim_end().to_string();
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            // SAFETY: a plain query on a thread id of this process.
            let policy = unsafe { libc::sched_getscheduler(tid) };
            name.starts_with(prefix).then_some((name, policy))
        })
        .collect()
}

/// Whether this process may take a thread back from the idle class (root
/// with `CAP_SYS_NICE`, or `RLIMIT_NICE` ≥ 20): tried on a thread of its own.
fn can_renice() -> bool {
    std::thread::spawn(|| {
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: plain system calls on the calling thread.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) == 0
                && libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) == 0
        }
    })
    .join()
    .unwrap_or(false)
}

/// Busy for `cpu` of this thread's CPU time (not wall time).
fn burn(cpu: Duration) -> u64 {
    let start = cpu_now();
    let mut acc = 0u64;
    while cpu_now() - start < cpu {
        for _ in 0..1_000 {
            acc = std::hint::black_box(acc.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    acc
}

fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn the_lent_cycle_threads_run_at_the_idle_class_and_units_resolve() {
    let plan = lent_plan();
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    if !can_renice() {
        // An unprivileged process may not take a thread back from the idle
        // class: the fleet runs the plan unlent.
        assert!(!fleet.plan().reserve_lent);
        assert!(fleet.lent_reserve().is_none());
        eprintln!("no CAP_SYS_NICE: checked only that the reserve stays unlent");
        return;
    }
    assert!(fleet.plan().reserve_lent);
    assert_eq!(
        fleet.lent_reserve().map(|l| (l.promotions, l.promoted)),
        Some((0, false))
    );
    let cycle = policies("work-fleet-seri");
    assert_eq!(cycle.len(), 2, "two cycle threads: {cycle:?}");
    assert!(
        cycle.iter().all(|(_, p)| *p == libc::SCHED_IDLE),
        "every cycle thread at the idle class: {cycle:?}"
    );
    // A thread takes its name once it runs: wait for the guard's.
    let t0 = Instant::now();
    let mut guard = policies("work-fleet-lend");
    while guard.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
        guard = policies("work-fleet-lend");
    }
    assert_eq!(guard.len(), 1, "one guard thread: {guard:?}");
    assert_eq!(guard[0].1, libc::SCHED_OTHER, "the guard is normal class");
    // Every fleet thread has its census row, the guard's included.
    let census: Vec<String> = fleet.census().into_iter().map(|r| r.thread_name).collect();
    for name in [
        "work-fleet-serial-0",
        "work-fleet-serial-1",
        "work-fleet-lend-guard",
    ] {
        assert!(census.iter().any(|t| t == name), "{name} in {census:?}");
    }
    let h = fleet.handle();
    let receipts: Vec<_> = (0..8u64)
        .map(|i| {
            h.submit(
                WorkerRole::Resolve,
                None,
                unit_body(move |_ctx| async move { Box::new(i * 2) as UnitValue }),
            )
            .unwrap()
        })
        .collect();
    for (i, r) in receipts.into_iter().enumerate() {
        assert_eq!(*wait(r).unwrap().downcast::<u64>().unwrap(), i as u64 * 2);
    }
    fleet.shutdown().expect("clean shutdown");
    assert!(policies("work-fleet-lend").is_empty(), "the guard ended");
}

/// Runs a starved unit: 100 ms of CPU submitted while `spin` keeps every
/// CPU busy (it returns once they are spinning); returns whether it
/// completed and the guard's figures.
fn starved_unit(
    spin: impl FnOnce(usize) -> Box<dyn FnOnce()>,
) -> (bool, fleet_bindings::LentReserve) {
    let plan = lent_plan();
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    assert!(fleet.plan().reserve_lent);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let stop = spin(cpus);
    // Let the spinners take the CPUs first.
    std::thread::sleep(Duration::from_millis(50));
    let r = fleet
        .handle()
        .submit(
            WorkerRole::Resolve,
            None,
            unit_body(
                |_ctx| async move { Box::new(burn(Duration::from_millis(100))) as UnitValue },
            ),
        )
        .unwrap();
    let done = wait(r);
    let lent = fleet.lent_reserve().expect("lent");
    stop();
    fleet.shutdown().expect("clean shutdown");
    (done.is_ok(), lent)
}

/// CPU time a process has had, clock ticks (`utime` in `/proc/PID/stat`).
fn utime_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1.to_string();
            after.split_whitespace().nth(11)?.parse().ok()
        })
        .unwrap_or(0)
}

/// Busy children (`sh` loops), killed on drop.
struct Children(Vec<std::process::Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Busy loops in other processes on every CPU starve an idle-class thread
/// (it gets a fraction of a percent). The guard must see the unit's cycle
/// thread inside one poll without CPU while the process runs less than its
/// CPUs, and return the cycle threads to the normal class: the unit's
/// 100 ms of CPU completes and a promotion is counted. Without the guard a
/// 20 ms unit took 6.9 s of wall time here.
#[test]
fn the_guard_takes_the_cycle_threads_back_from_another_process() {
    if !can_renice() {
        eprintln!("skipped: lending needs CAP_SYS_NICE (run as root)");
        return;
    }
    let (done, lent) = starved_unit(|cpus| {
        let children = Children(
            (0..cpus)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("sh")
                })
                .collect(),
        );
        // Each child has had CPU (it is spinning) before the unit comes.
        let t0 = Instant::now();
        while children.0.iter().any(|c| utime_ticks(c.id()) == 0)
            && t0.elapsed() < Duration::from_secs(5)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        Box::new(move || drop(children))
    });
    assert!(done, "the unit completed");
    assert!(lent.promotions >= 1, "the guard promoted: {lent:?}");
}

/// The host's own threads spinning on every CPU go past its one-core
/// reserve into the fleet's: the fleet is owed its core back, so the guard
/// promotes here too.
#[test]
fn the_guard_takes_the_cycle_threads_back_from_a_host_past_its_reserve() {
    if !can_renice() {
        eprintln!("skipped: lending needs CAP_SYS_NICE (run as root)");
        return;
    }
    let (done, lent) = starved_unit(|cpus| {
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..cpus)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        std::hint::black_box(burn(Duration::from_micros(200)));
                    }
                })
            })
            .collect();
        Box::new(move || {
            stop.store(true, Ordering::Relaxed);
            for s in spinners {
                s.join().unwrap();
            }
        })
    });
    assert!(done, "the unit completed");
    assert!(lent.promotions >= 1, "the guard promoted: {lent:?}");
}
