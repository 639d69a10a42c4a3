//! The shell's direct steps under shuttle: a client submits through
//! `HostHandle::enqueue` (the pump stepped on the client's thread, under the
//! core's lock), a seat reports through `HostHandle::seat_done`, the client
//! closes through `HostHandle::close`, while the real `HostShell::run` loop
//! keeps the backstop and the drain and a posture flipper lifts and
//! re-applies the cordon without an edge. The backlog drains only if a
//! direct step that arms the backstop wakes the shell (`ShellMsg::Wake`);
//! a lost wake-up shows as a deadlock (every thread blocked), which shuttle
//! reports. The negative check: with the backstop disabled the same model
//! deadlocks.
//!
//! Needs the model build (the core's lock and the receipts' locks become
//! shuttle's; a separate target dir keeps the normal cache):
//! `RUSTFLAGS="--cfg fleet_model" CARGO_TARGET_DIR=target/model cargo test -p fleet --test shell_direct_model`
//! In a normal build this file compiles to nothing.
#![cfg(fleet_model)]

use fleet::guard::GuardSnapshot;
use fleet::pump::{HostLayout, HostPump, Placement, PumpConfig, SeatId};
use fleet::receipt::TerminalReason;
use fleet::shell::{HostShell, InboxRecv, ShellInbox, ShellMsg, ShellOutbox};
use fleet::unit::UnitMeta;
use fleet::WorkerRole::Registrar;
use shuttle::sync::mpsc;
use shuttle::sync::{Arc, Condvar, Mutex};
use shuttle::thread;
use std::collections::VecDeque;
use std::time::Duration;

struct Job {
    done: mpsc::Sender<Result<u64, TerminalReason>>,
}

struct Chan {
    msgs: Mutex<(VecDeque<ShellMsg<Job>>, usize)>,
    ready: Condvar,
}

/// The handles' outbox (counts itself so the inbox sees disconnection).
struct Outbox(Arc<Chan>);

impl Outbox {
    fn new(chan: &Arc<Chan>) -> Self {
        chan.msgs.lock().unwrap().1 += 1;
        Outbox(chan.clone())
    }
}

impl ShellOutbox<ShellMsg<Job>> for Outbox {
    fn send(&self, m: ShellMsg<Job>) -> bool {
        self.0.msgs.lock().unwrap().0.push_back(m);
        self.0.ready.notify_all();
        true
    }
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.0.msgs.lock().unwrap().1 -= 1;
        self.0.ready.notify_all();
    }
}

struct Inbox(Arc<Chan>);

impl ShellInbox<ShellMsg<Job>> for Inbox {
    fn recv(&mut self, timeout: Option<Duration>) -> InboxRecv<ShellMsg<Job>> {
        let mut st = self.0.msgs.lock().unwrap();
        loop {
            if let Some(m) = st.0.pop_front() {
                return InboxRecv::Msg(m);
            }
            if st.1 == 0 {
                return InboxRecv::Disconnected;
            }
            if timeout.is_some() {
                drop(st);
                thread::yield_now();
                return InboxRecv::Timeout;
            }
            st = self.0.ready.wait(st).unwrap();
        }
    }
}

fn model(backstop_enabled: bool) {
    let chan = Arc::new(Chan {
        msgs: Mutex::new((VecDeque::new(), 0)),
        ready: Condvar::new(),
    });
    let cordoned = GuardSnapshot {
        cordoned: true,
        sim_intake_cap: 1,
        lane_dead: false,
    };
    let guard = Arc::new(Mutex::new(cordoned));
    let layout = HostLayout {
        host: "model".into(),
        seats: vec![(Registrar, 1)],
        queue_capacity: 1,
        walk_admission: 1,
        sim_slot_cap: 1,
    };
    let config = PumpConfig {
        backstop_interval_ms: 250,
        stall_ticks: u32::MAX,
        backstop_enabled,
        ..PumpConfig::default()
    };
    let (seat_tx, seat_rx) = mpsc::channel::<(SeatId, UnitMeta, Job)>();
    let g = guard.clone();
    let (shell, handle) = HostShell::with_outbox(
        HostPump::new(layout, config),
        Inbox(chan.clone()),
        Outbox::new(&chan),
        move || *g.lock().unwrap(),
        move |seat, meta, job| seat_tx.send((seat, meta, job)).expect("seat alive"),
        |_, job: Job, reason| {
            let _ = job.done.send(Err(reason));
        },
    );
    let shell = shell.with_loud_hook(|f| panic!("loud failure in the model: {f}"));
    let host = thread::spawn(move || {
        shell.run().expect("no loud failure");
    });

    // The seat: runs each delivered unit and reports it done directly.
    let seat_handle = handle.clone();
    let seat = thread::spawn(move || {
        while let Ok((seat, meta, job)) = seat_rx.recv() {
            job.done.send(Ok(meta.id)).unwrap();
            seat_handle.seat_done(seat, meta.id);
        }
    });

    // The posture: lifts, cordons again, lifts; guard writes only, no edge.
    let g = guard.clone();
    let posture = thread::spawn(move || {
        for cordon in [false, true, false] {
            g.lock().unwrap().cordoned = cordon;
            thread::yield_now();
        }
    });

    // The client: two units submitted directly, both receipts, then a close.
    let (done_tx, done_rx) = mpsc::channel();
    for id in 0..2 {
        let job = Job {
            done: done_tx.clone(),
        };
        let placement = handle
            .enqueue(UnitMeta::pooled(id, Registrar), job)
            .map_err(|r| r.error);
        assert!(
            matches!(placement, Ok(Placement::Queued | Placement::Backlogged)),
            "{placement:?}"
        );
    }
    drop(done_tx);
    let mut values = Vec::new();
    for _ in 0..2 {
        values.push(done_rx.recv().expect("a receipt").expect("a value"));
    }
    values.sort();
    assert_eq!(values, vec![0, 1]);
    handle.close();
    drop(handle);
    posture.join().unwrap();
    host.join().unwrap();
    seat.join().unwrap();
}

#[test]
fn direct_steps_lose_no_wake_up_under_random_schedules() {
    shuttle::check_random(|| model(true), 2_000);
}

#[test]
fn direct_steps_lose_no_wake_up_under_pct_schedules() {
    shuttle::check_pct(|| model(true), 2_000, 3);
}

#[test]
fn without_the_backstop_the_direct_model_finds_the_lost_wake_up() {
    let found = std::panic::catch_unwind(|| shuttle::check_random(|| model(false), 2_000));
    let payload = found.expect_err("shuttle must report the deadlock when nothing wakes the host");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        message.contains("deadlock"),
        "the failure is the lost wake-up, not another panic: {message}"
    );
}
