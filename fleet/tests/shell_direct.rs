//! Submits and seat reports step the pump on the calling thread: admission
//! is answered and a grant delivered without the shell thread, and a direct
//! step that arms the backstop wakes the shell so its timer runs.

use fleet::admission::AdmissionError;
use fleet::guard::GuardSnapshot;
use fleet::pump::{HostLayout, HostPump, Placement, PumpConfig};
use fleet::receipt::{receipt_pair, ReceiptSender, TerminalReason};
use fleet::shell::HostShell;
use fleet::sink::PooledQueue;
use fleet::unit::UnitMeta;
use fleet::WorkerRole::{self, *};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

fn layout(seats: Vec<(WorkerRole, u32)>, queue_capacity: u32) -> HostLayout {
    HostLayout {
        host: "direct-test".into(),
        seats,
        queue_capacity,
        walk_admission: 6,
        sim_slot_cap: 4,
    }
}

fn terminal(_: UnitMeta, tx: ReceiptSender, reason: TerminalReason) {
    tx.terminal(reason)
}

/// On the old shell a submit was a round trip to the shell thread: with no
/// shell thread running it never returned.
#[test]
fn a_submit_is_answered_and_granted_without_the_shell_thread() {
    let sink = PooledQueue::new(&[Resolve]);
    let seat_rx = sink.receiver(Resolve).unwrap();
    // The shell is built but never run.
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Resolve, 1)], 4), PumpConfig::default()),
        || GuardSnapshot::nominal(4),
        sink,
        terminal,
    );
    let (answers_tx, answers_rx) = crossbeam_channel::unbounded();
    let h = handle.clone();
    std::thread::spawn(move || {
        for id in 0..2 {
            let (tx, rx) = receipt_pair();
            let answer = h
                .enqueue(UnitMeta::pooled(id, Resolve), tx)
                .map_err(|r| r.error);
            let _ = answers_tx.send((answer, rx));
        }
    });
    let mut receipts = Vec::new();
    for _ in 0..2 {
        let (answer, rx) = answers_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the submit is answered without the shell thread");
        assert_eq!(answer, Ok(Placement::Queued));
        receipts.push(rx);
    }
    // The first unit was granted from the submitting thread.
    let d = seat_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("granted on submit");
    assert_eq!(d.meta.id, 0);
    assert!(seat_rx.try_recv().is_err(), "one seat: the second waits");
    d.payload.complete(Box::new(0u64));
    // The seat report grants the queued unit from this thread.
    handle.seat_done(d.seat, d.meta.id);
    let d = seat_rx.try_recv().expect("granted on the seat report");
    assert_eq!(d.meta.id, 1);
    d.payload.complete(Box::new(1u64));
    handle.seat_done(d.seat, d.meta.id);
    for r in &receipts {
        assert!(r.wait_timeout(Duration::from_secs(5)).unwrap().is_ok());
    }
    shell.with_pump(|p| {
        let c = p.counts();
        assert_eq!((c.submitted, c.in_flight, c.resolved), (2, 0, 2), "{c}");
        assert!(c.conserved());
    });
    // Closing on the caller refuses later submits at once.
    handle.close();
    let late = handle
        .enqueue(UnitMeta::pooled(9, Resolve), receipt_pair().0)
        .unwrap_err();
    assert_eq!(late.error, AdmissionError::HostClosed);
    let counts = shell.run().expect("closed cleanly").counts();
    assert_eq!(counts.submitted, 2);
}

/// A submit the posture holds arms the backstop on the submitting thread;
/// the shell thread, idle in an untimed receive, must learn of it (no
/// posture edge is sent here) or the backlog would never drain.
#[test]
fn a_backlogged_submit_wakes_the_idle_shell_so_its_backstop_drains_the_backlog() {
    let guard = Arc::new(Mutex::new(GuardSnapshot {
        cordoned: true,
        sim_intake_cap: 1,
        lane_dead: false,
    }));
    let g = guard.clone();
    let sink = PooledQueue::new(&[Verifier]);
    let seat_rx = sink.receiver(Verifier).unwrap();
    let config = PumpConfig {
        backstop_interval_ms: 5,
        ..PumpConfig::default()
    };
    let (shell, handle) = HostShell::new(
        HostPump::new(layout(vec![(Verifier, 1)], 4), config),
        move || *g.lock(),
        sink,
        terminal,
    );
    let host = std::thread::spawn(move || shell.run().map(|p| p.counts()));
    // Let the shell reach its untimed receive.
    std::thread::sleep(Duration::from_millis(20));
    let (tx, rx) = receipt_pair();
    assert_eq!(
        handle.enqueue(UnitMeta::pooled(1, Verifier), tx).unwrap(),
        Placement::Backlogged
    );
    *guard.lock() = GuardSnapshot::nominal(4);
    let d = seat_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the backstop tick drained the backlog");
    d.payload.complete(Box::new(1u64));
    handle.seat_done(d.seat, d.meta.id);
    assert!(rx.wait_timeout(Duration::from_secs(5)).unwrap().is_ok());
    handle.close();
    let counts = host.join().unwrap().expect("closed cleanly");
    assert!(counts.conserved(), "{counts}");
    assert_eq!(counts.resolved, 1);
}
