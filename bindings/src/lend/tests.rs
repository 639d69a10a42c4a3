//! Unit tests of the lend guard's pure rules.
use super::*;

fn seen(begun: u64, ended: u64, cpu_ms: u64, at: Instant) -> Seen {
    Seen {
        begun,
        ended,
        cpu_ns: cpu_ms * 1_000_000,
        wait_ns: None,
        at,
    }
}

/// A check with schedstat: `wait_ms` of run-queue wait so far.
fn waited(wait_ms: u64, at: Instant) -> Seen {
    Seen {
        begun: 0,
        ended: 0,
        cpu_ns: 0,
        wait_ns: Some(wait_ms * 1_000_000),
        at,
    }
}

#[test]
fn with_schedstat_starvation_is_run_queue_wait_over_its_share() {
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(10);
    // 3 ms waiting in 10 ms: at the share, starved.
    assert!(starved(waited(7, t0), waited(10, t1)));
    // Half a core left by an idle-class busy loop (the CPU-share rule's
    // blind spot): starved.
    assert!(starved(waited(0, t0), waited(5, t1)));
    // Just under the share: not starved, wherever its polls stand.
    assert!(!starved(waited(0, t0), waited(2, t1)));
    // Parked (no wait grows): not starved.
    assert!(!starved(waited(40, t0), waited(40, t1)));
    // A counter that went back (a reused thread id) is no wait.
    assert!(!starved(waited(40, t0), waited(1, t1)));
    // No time between the checks: nothing to judge.
    assert!(!starved(waited(0, t0), waited(9, t0)));
    // One check without schedstat: the CPU-share rule judges the pair.
    let mut a = seen(5, 4, 0, t0);
    a.wait_ns = Some(0);
    assert!(starved(a, seen(5, 4, 1, t1)));
    assert!(!starved(a, seen(5, 5, 1, t1)));
}

#[test]
fn a_schedstat_line_gives_its_wait_and_anything_else_none() {
    assert_eq!(
        run_queue_wait_ns("190219543 15305845 311\n"),
        Some(15_305_845)
    );
    assert_eq!(run_queue_wait_ns("0 0 1"), Some(0));
    assert_eq!(run_queue_wait_ns(""), None);
    assert_eq!(run_queue_wait_ns("1 2"), None);
    assert_eq!(run_queue_wait_ns("1 2 3 4"), None);
    assert_eq!(run_queue_wait_ns("1 x 3"), None);
    assert_eq!(run_queue_wait_ns("1 -2 3"), None);
}

#[test]
fn starvation_is_one_poll_spanning_two_checks_with_little_cpu() {
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(10);
    // Inside the same poll, 1 ms of CPU in 10 ms: starved.
    assert!(starved(seen(5, 4, 0, t0), seen(5, 4, 1, t1)));
    // Exactly the share is not below it.
    assert!(!starved(seen(5, 4, 0, t0), seen(5, 4, 2, t1)));
    // Running flat out inside one long poll: not starved.
    assert!(!starved(seen(5, 4, 0, t0), seen(5, 4, 10, t1)));
    // Idle between polls (waiting for work or for I/O): not starved.
    assert!(!starved(seen(5, 5, 0, t0), seen(5, 5, 0, t1)));
    // A different poll at the second check: progress was made.
    assert!(!starved(seen(5, 4, 0, t0), seen(7, 6, 0, t1)));
    assert!(!starved(seen(5, 4, 0, t0), seen(6, 5, 0, t1)));
    // No time between the checks: nothing to judge.
    assert!(!starved(seen(5, 4, 0, t0), seen(5, 4, 0, t0)));
}

#[test]
fn starvation_is_owed_a_remedy_when_another_process_or_an_overrun_host_caused_it() {
    let ms = 1_000_000;
    let two = Shares {
        cpus: 2.0,
        reserve: 1.0,
    };
    use Neighbours::{Filling, Measured, Unknown};
    // 10 ms on 2 CPUs, (process, cycle threads) CPU in ms.
    // The host used its reserve core, the fleet the other: lending
    // yielding to the host, not owed, whatever is known of others.
    for n in [Measured(0.0), Filling, Unknown] {
        assert!(!owed(20 * ms, 10 * ms, 10 * ms, n, two), "{n:?}");
        // The host at reserve + slack exactly: not owed.
        assert!(!owed(20 * ms, 5 * ms, 10 * ms, n, two), "{n:?}");
        // The host's own threads took both cores: owed (the fleet
        // keeps C).
        assert!(owed(20 * ms, 2 * ms, 10 * ms, n, two), "{n:?}");
        // No time between the checks: nothing to judge.
        assert!(!owed(0, 0, 0, n, two), "{n:?}");
    }
    // The fleet used one core and nobody else ran (the fleet had less
    // work, or the host's own burst held a cycle thread back within
    // its reserve): measured, not owed; unknown, owed.
    assert!(!owed(10 * ms, 5 * ms, 10 * ms, Measured(0.2), two));
    assert!(!owed(10 * ms, 5 * ms, 10 * ms, Filling, two));
    assert!(owed(10 * ms, 5 * ms, 10 * ms, Unknown, two));
    assert!(owed(0, 0, 10 * ms, Unknown, two));
    // At the slack's edge (1.5 cores used, 1 of them the fleet's).
    assert!(!owed(15 * ms, 10 * ms, 10 * ms, Unknown, two));
    // Others used half a core or more: owed, even with the process busy.
    assert!(owed(20 * ms, 15 * ms, 10 * ms, Measured(0.5), two));
    assert!(owed(5 * ms, 5 * ms, 10 * ms, Measured(1.9), two));
    assert!(!owed(5 * ms, 5 * ms, 10 * ms, Measured(0.49), two));
}

#[test]
fn a_promotion_outlasts_its_hold_while_other_processes_stay_busy() {
    use Neighbours::{Filling, Measured, Unknown};
    let hold = FIRST_HOLD;
    let early = hold / 2;
    for n in [Measured(0.0), Measured(1.9), Filling, Unknown] {
        assert!(!hold_over(early, hold, n), "{n:?}");
    }
    // The hold has passed: over, unless others still use the slack.
    assert!(hold_over(hold, hold, Measured(0.49)));
    assert!(!hold_over(hold, hold, Measured(0.5)));
    assert!(!hold_over(hold * 10, hold, Measured(1.9)));
    // Not measured: the hold alone.
    assert!(hold_over(hold, hold, Filling));
    assert!(hold_over(hold, hold, Unknown));
}

#[test]
fn the_hold_doubles_while_starvation_keeps_returning_and_resets_after_calm() {
    let t = Instant::now();
    assert_eq!(next_hold(FIRST_HOLD, None, t), FIRST_HOLD);
    let back_soon = t + Duration::from_millis(20);
    assert_eq!(next_hold(FIRST_HOLD, Some(t), back_soon), FIRST_HOLD * 2);
    assert_eq!(next_hold(MAX_HOLD, Some(t), back_soon), MAX_HOLD);
    let calm = t + FIRST_HOLD * 3;
    assert_eq!(next_hold(FIRST_HOLD * 2, Some(t), calm), FIRST_HOLD);
}

#[test]
fn promoted_threads_spread_one_to_a_cpu_and_get_their_masks_back() {
    let mask = crate::lend::others::allowed_cpus();
    assert!(!mask.is_empty(), "the affinity mask is readable on Linux");
    // Three threads free on the whole mask, and one the plan pinned.
    let slots: Vec<Arc<CycleSlot>> = (0..4).map(|_| Arc::new(CycleSlot::default())).collect();
    let pinned_cpu = mask[mask.len() - 1];
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_rx = Arc::new(std::sync::Mutex::new(done_rx));
    let threads: Vec<_> = slots
        .iter()
        .enumerate()
        .map(|(i, slot)| {
            let (slot, tx, rx) = (slot.clone(), entered_tx.clone(), done_rx.clone());
            std::thread::spawn(move || {
                if i == 3 {
                    assert!(crate::affinity::set_thread_affinity(0, &[pinned_cpu]));
                }
                slot.enter();
                tx.send(()).unwrap();
                // Parked until the test ends (the channel closes).
                let _ = rx.lock().unwrap().recv();
            })
        })
        .collect();
    for _ in &slots {
        entered_rx.recv().unwrap();
    }
    let tids: Vec<libc::pid_t> = slots
        .iter()
        .map(|s| s.tid.load(Ordering::Relaxed))
        .collect();
    let affinity = |tid| crate::affinity::thread_affinity(tid).unwrap();
    // SAFETY: a plain system call on a live thread's id.
    let class = |tid| unsafe { libc::sched_getscheduler(tid) };
    assert!(tids.iter().all(|&t| class(t) == libc::SCHED_IDLE));

    set_all(&slots, false);
    let before = spread(&slots);
    for (i, &tid) in tids.iter().take(3).enumerate() {
        assert_eq!(affinity(tid), vec![mask[i % mask.len()]], "thread {i}");
        if mask.len() > 1 {
            assert_eq!(before[i].as_deref(), Some(&mask[..]), "thread {i}");
        }
        if class_is_reversible() {
            assert_eq!(class(tid), libc::SCHED_OTHER, "thread {i}");
        }
    }
    if mask.len() >= 2 {
        assert_ne!(
            affinity(tids[0]),
            affinity(tids[1]),
            "two threads, two CPUs"
        );
    }
    assert_eq!(affinity(tids[3]), vec![pinned_cpu], "the plan's pin stays");
    assert_eq!(before[3], None, "nothing to give back to the pinned one");

    set_all(&slots, true);
    gather(&slots, before);
    for (i, &tid) in tids.iter().enumerate() {
        let want = if i == 3 {
            vec![pinned_cpu]
        } else {
            mask.clone()
        };
        assert_eq!(affinity(tid), want, "thread {i}");
        assert_eq!(class(tid), libc::SCHED_IDLE, "thread {i}");
    }
    drop(done_tx);
    for t in threads {
        t.join().unwrap();
    }
}
