//! The thread shell over crossbeam: hand-back on refusal, close, the loud
//! hook, huge intervals, keyed mailboxes, and the posture-edge waker.

use fleet::admission::AdmissionError;
use fleet::guard::GuardSnapshot;
use fleet::pump::{FailureKind, HostLayout, HostPump, Placement, PumpConfig, SeatId};
use fleet::receipt::{receipt_pair, ReceiptSender, TerminalReason};
use fleet::shell::HostShell;
use fleet::sink::{KeyedMailboxes, PooledQueue};
use fleet::unit::UnitMeta;
use fleet::waker::PostureWaker;
use fleet::WorkerRole::{self, *};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CORDONED: GuardSnapshot = GuardSnapshot {
    cordoned: true,
    sim_intake_cap: 1,
    lane_dead: false,
};

fn layout(seats: Vec<(WorkerRole, u32)>, queue_capacity: u32) -> HostLayout {
    HostLayout {
        host: "shell-test".into(),
        seats,
        queue_capacity,
        walk_admission: 6,
        sim_slot_cap: 4,
    }
}

fn terminal(_: UnitMeta, tx: ReceiptSender, reason: TerminalReason) {
    tx.terminal(reason)
}

#[test]
fn a_refused_unit_comes_back_whole_and_close_resolves_the_rest() {
    let sink = PooledQueue::new(&[Resolve]);
    let seat_rx = sink.receiver(Resolve).unwrap();
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Resolve, 1)], 1), PumpConfig::default()),
        || GuardSnapshot::nominal(4),
        sink,
        terminal,
    );
    let host = std::thread::spawn(move || shell.run().map(|p| p.counts()));
    let mut receipts = Vec::new();
    for id in 0..2 {
        let (tx, rx) = receipt_pair();
        assert_eq!(
            handle.enqueue(UnitMeta::pooled(id, Resolve), tx).unwrap(),
            Placement::Queued
        );
        receipts.push(rx);
    }
    let (tx, _rx) = receipt_pair();
    let refused = handle
        .enqueue(UnitMeta::pooled(2, Resolve), tx)
        .unwrap_err();
    assert_eq!(
        refused.error,
        AdmissionError::QueueFull {
            role: Resolve,
            capacity: 1
        }
    );
    assert_eq!(refused.meta.id, 2);
    refused.payload.complete(Box::new(()));
    handle.close();
    // The granted unit finishes after the close: the drain counts it.
    let d = seat_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the first unit was granted");
    d.payload.complete(Box::new(d.meta.id));
    handle.seat_done(d.seat, d.meta.id);
    let counts = host.join().unwrap().expect("closed cleanly");
    assert_eq!(
        (counts.submitted, counts.in_flight, counts.resolved),
        (2, 0, 2),
        "{counts}"
    );
    assert!(receipts[0]
        .wait_timeout(Duration::from_secs(5))
        .unwrap()
        .is_ok());
    // The queued unit resolved terminally.
    assert_eq!(
        receipts[1]
            .wait_timeout(Duration::from_secs(5))
            .unwrap()
            .unwrap_err(),
        TerminalReason::HostClosed
    );
    let (tx, _rx) = receipt_pair();
    let late = handle
        .enqueue(UnitMeta::pooled(3, Resolve), tx)
        .unwrap_err();
    assert_eq!(late.error, AdmissionError::HostClosed);
}

#[test]
fn a_closed_shell_names_the_units_still_in_flight_at_its_drain_deadline() {
    let sink = PooledQueue::new(&[Resolve]);
    let _seat_rx = sink.receiver(Resolve).unwrap(); // the seat never reports
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Resolve, 2)], 4), PumpConfig::default()),
        || GuardSnapshot::nominal(4),
        sink,
        terminal,
    );
    let shell = shell.with_drain_deadline(Duration::from_millis(20));
    let host = std::thread::spawn(move || shell.run());
    for id in 0..2 {
        handle
            .enqueue(UnitMeta::pooled(id, Resolve), receipt_pair().0)
            .unwrap();
    }
    handle.seat_done(
        SeatId {
            role: Resolve,
            index: 0,
        },
        0,
    );
    handle.close();
    let pump = host.join().unwrap().expect("no loud failure");
    let counts = pump.counts();
    assert_eq!((counts.in_flight, counts.resolved), (1, 1), "{counts}");
    assert_eq!(
        pump.in_flight(),
        vec![(
            SeatId {
                role: Resolve,
                index: 1
            },
            1
        )]
    );
}

#[test]
fn a_stall_calls_the_loud_hook_naming_the_host() {
    let guard = Arc::new(Mutex::new(GuardSnapshot::nominal(4)));
    let g = guard.clone();
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    // A dispatcher fault: the idle verifier seat is never granted its unit.
    let config = PumpConfig {
        backstop_interval_ms: 5,
        stall_ticks: 3,
        withhold_grants: Some(Verifier),
        ..PumpConfig::default()
    };
    let sink = PooledQueue::new(&[Verifier]);
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Verifier, 1)], 1), config),
        move || *g.lock(),
        sink,
        terminal,
    );
    let shell = shell.with_loud_hook(move |f| *s.lock() = Some(f.clone()));
    let host = std::thread::spawn(move || shell.run());
    // One unit fills the queue beside the idle seat, one is held (the backstop ticks).
    assert_eq!(
        handle
            .enqueue(UnitMeta::pooled(0, Verifier), receipt_pair().0)
            .unwrap(),
        Placement::Queued
    );
    *guard.lock() = CORDONED;
    assert_eq!(
        handle
            .enqueue(UnitMeta::pooled(1, Verifier), receipt_pair().0)
            .unwrap(),
        Placement::Backlogged
    );
    *guard.lock() = GuardSnapshot::nominal(4);
    let failure = host.join().unwrap().expect_err("the stall fails loudly");
    assert!(matches!(failure.kind, FailureKind::Stalled { ticks: 3 }));
    assert_eq!(
        seen.lock().as_ref().map(|f| f.host.clone()),
        Some("shell-test".into())
    );
}

#[test]
fn a_long_unit_under_a_full_queue_does_not_call_the_loud_hook() {
    const K: u32 = 3;
    let guard = Arc::new(Mutex::new(GuardSnapshot::nominal(4)));
    let g = guard.clone();
    let loud = Arc::new(Mutex::new(None));
    let l = loud.clone();
    let steps = Arc::new(AtomicU64::new(0));
    let st = steps.clone();
    let config = PumpConfig {
        backstop_interval_ms: 2,
        stall_ticks: K,
        ..PumpConfig::default()
    };
    let sink = PooledQueue::new(&[Verifier]);
    let seat_rx = sink.receiver(Verifier).unwrap();
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Verifier, 1)], 1), config),
        move || *g.lock(),
        sink,
        terminal,
    );
    let shell = shell
        .with_loud_hook(move |f| *l.lock() = Some(f.clone()))
        .with_step_hook(move |_| {
            st.fetch_add(1, Ordering::SeqCst);
        });
    let host = std::thread::spawn(move || shell.run().map(|p| p.counts()));
    // One unit runs long, one fills the queue, one is held behind them.
    let mut receipts = Vec::new();
    for id in 0..3 {
        if id == 2 {
            *guard.lock() = CORDONED;
        }
        let (tx, rx) = receipt_pair();
        handle.enqueue(UnitMeta::pooled(id, Verifier), tx).unwrap();
        receipts.push(rx);
    }
    *guard.lock() = GuardSnapshot::nominal(4);
    let first = seat_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the first unit is granted");
    // Hold the unit until the shell has ticked many more than K times (every
    // step after the three enqueues is a backstop tick).
    let hang_guard = Instant::now() + Duration::from_secs(60);
    while steps.load(Ordering::SeqCst) < 3 + 10 * u64::from(K) && !host.is_finished() {
        assert!(Instant::now() < hang_guard, "the backstop stopped ticking");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        loud.lock().is_none(),
        "a busy seat is not a stall: {:?}",
        loud.lock()
    );
    let mut pending = Some(first);
    for id in 0..3 {
        let d = match pending.take() {
            Some(d) => d,
            None => seat_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the next unit is granted when the seat frees"),
        };
        assert_eq!(d.meta.id, id);
        d.payload.complete(Box::new(id));
        handle.seat_done(d.seat, id);
    }
    for r in &receipts {
        assert!(r
            .wait_timeout(Duration::from_secs(10))
            .expect("resolved")
            .is_ok());
    }
    handle.close();
    let counts = host.join().unwrap().expect("no loud failure");
    assert_eq!((counts.submitted, counts.resolved), (3, 3), "{counts}");
}

#[test]
fn a_huge_backstop_interval_does_not_overflow_the_deadline() {
    let config = PumpConfig {
        backstop_interval_ms: u64::MAX,
        ..PumpConfig::default()
    };
    let sink = PooledQueue::new(&[Registrar]);
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Registrar, 1)], 4), config),
        || CORDONED,
        sink,
        terminal,
    );
    let host = std::thread::spawn(move || shell.run().map(|p| p.backstop_armed()));
    let (tx, rx) = receipt_pair();
    assert_eq!(
        handle.enqueue(UnitMeta::pooled(0, Registrar), tx).unwrap(),
        Placement::Backlogged
    );
    handle.close();
    assert!(!host.join().unwrap().unwrap());
    assert_eq!(rx.wait().unwrap_err(), TerminalReason::HostClosed);
}

#[test]
fn keyed_grants_reach_only_their_seat_mailbox_through_the_shell() {
    let sink = KeyedMailboxes::new(&[(Solver, 3)]);
    let boxes: Vec<_> = (0..3)
        .map(|i| {
            sink.mailbox(SeatId {
                role: Solver,
                index: i,
            })
            .unwrap()
        })
        .collect();
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Solver, 3)], 8), PumpConfig::default()),
        || GuardSnapshot::nominal(4),
        sink,
        terminal,
    );
    let host = std::thread::spawn(move || shell.run().map(|_| ()));
    for (id, key) in [(10, 4), (11, 2), (12, 0)] {
        handle
            .enqueue(UnitMeta::keyed(id, Solver, key), receipt_pair().0)
            .unwrap();
    }
    let got: Vec<Vec<u64>> = boxes
        .iter()
        .map(|b| b.try_iter().map(|d| d.meta.id).collect())
        .collect();
    assert_eq!(got, vec![vec![12], vec![10], vec![11]]);
    drop(handle); // every handle gone: the shell closes
    host.join().unwrap().unwrap();
}

#[test]
fn the_waker_nudges_every_registered_host_and_the_edge_drains_a_held_backlog() {
    let guard = Arc::new(Mutex::new(CORDONED));
    let waker = PostureWaker::new();
    let mut hosts = Vec::new();
    let mut receipts = Vec::new();
    for h in 0..2 {
        let g = guard.clone();
        // Backstop disabled: only the edge can wake these hosts.
        let config = PumpConfig {
            backstop_enabled: false,
            ..PumpConfig::default()
        };
        let sink = PooledQueue::new(&[PoolStateUpdater]);
        let rx = sink.receiver(PoolStateUpdater).unwrap();
        let (shell, handle) = HostShell::new(
            HostPump::new(layout(vec![(PoolStateUpdater, 1)], 4), config),
            move || *g.lock(),
            sink,
            terminal,
        );
        waker.register_host(&handle);
        let run = std::thread::spawn(move || shell.run().map(|_| ()));
        let (tx, r) = receipt_pair();
        assert_eq!(
            handle
                .enqueue(UnitMeta::pooled(h, PoolStateUpdater), tx)
                .unwrap(),
            Placement::Backlogged
        );
        receipts.push(r);
        hosts.push((run, handle, rx));
    }
    assert_eq!(waker.len(), 2);
    waker.observe(CORDONED);
    *guard.lock() = GuardSnapshot::nominal(4);
    assert_eq!(waker.observe(GuardSnapshot::nominal(4)), Some(2));
    for (run, handle, rx) in hosts {
        let d = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the edge drained the backlog");
        d.payload.complete(Box::new(d.meta.id));
        handle.seat_done(d.seat, d.meta.id);
        handle.close();
        run.join().unwrap().unwrap();
    }
    for r in receipts {
        assert!(r.wait().is_ok());
    }
}

#[test]
fn handles_are_clone_send_sync() {
    fn assert_handle<T: Clone + Send + Sync + 'static>() {}
    assert_handle::<fleet::shell::HostHandle<ReceiptSender>>();
    fn assert_send<T: Send>() {}
    assert_send::<HostShell<ReceiptSender>>();
    assert_send::<fleet::receipt::Receipt>();
}
