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
use std::sync::Arc;
use std::time::Duration;

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
    let counts = host.join().unwrap().expect("closed cleanly");
    assert_eq!(
        (counts.submitted, counts.in_flight, counts.resolved),
        (2, 1, 1),
        "{counts}"
    );
    // The queued unit resolved terminally; the granted one is with its seat (the sink's queue).
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
fn a_stall_calls_the_loud_hook_naming_the_host() {
    let guard = Arc::new(Mutex::new(GuardSnapshot::nominal(4)));
    let g = guard.clone();
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let config = PumpConfig {
        backstop_interval_ms: 5,
        stall_ticks: 3,
        backstop_enabled: true,
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
    // One unit runs forever (nobody reports it), one fills the queue, two are held.
    for id in 0..2 {
        handle
            .enqueue(UnitMeta::pooled(id, Verifier), receipt_pair().0)
            .unwrap();
    }
    *guard.lock() = CORDONED;
    for id in 2..4 {
        assert_eq!(
            handle
                .enqueue(UnitMeta::pooled(id, Verifier), receipt_pair().0)
                .unwrap(),
            Placement::Backlogged
        );
    }
    *guard.lock() = GuardSnapshot::nominal(4);
    let failure = host.join().unwrap().expect_err("the stall fails loudly");
    assert!(matches!(failure.kind, FailureKind::Stalled { ticks: 3 }));
    assert_eq!(
        seen.lock().as_ref().map(|f| f.host.clone()),
        Some("shell-test".into())
    );
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
