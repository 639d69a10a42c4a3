//! The pinned binding: one dedicated OS thread per seat.
//!
//! `DESIGN.md` §4; seed 000 §13 ("pinned — one dedicated thread per seat").
//! Solver and Merge seats take units through per-seat keyed mailboxes (a bin
//! key always lands on its own seat); pooled roles share one queue per role.
//! Each seat runs its unit to completion with the ambient Tokio runtime's
//! handle current (`Handle::block_on`), so sim bodies can use Tokio timers
//! and a walk awaiting a sim receipt blocks only its own seat. The ambient
//! runtime has the budget's A workers, named `work-fleet-io-N`.

use crate::exec::Lane;
use crate::handle::Job;
use crate::host::{wait_started, Host};
use crate::options::{host_layout, BootError, BootOptions, PinPlan};
use crate::running::{census_rows, Fleet};
use fleet::plan::{Binding, Plan};
use fleet::pump::SeatId;
use fleet::sink::{Delivery, KeyedMailboxes, PooledQueue, SeatSink};
use fleet::unit::UnitMeta;
use fleet::Hosting;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The ambient I/O workers' name prefix (the census row's thread name).
pub const AMBIENT_THREAD_PREFIX: &str = "work-fleet-io";

/// Thread name of the `n`-th ambient I/O worker.
pub fn io_thread_name(n: usize) -> String {
    format!("{AMBIENT_THREAD_PREFIX}-{n}")
}

/// Boots the pinned binding (see [`crate::boot`]).
pub(crate) fn boot(plan: &Plan, opts: BootOptions, pins: PinPlan) -> Result<Fleet, BootError> {
    let layout = plan.seat_layout();
    let workers = layout.ambient_workers.max(1) as usize;
    let counter = Arc::new(AtomicUsize::new(0));
    // Each worker reports once it runs (named); boot waits for all of them,
    // so the census and /proc agree the moment boot returns.
    let (up, io_up) = crossbeam_channel::bounded::<()>(workers);
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name_fn(move || io_thread_name(counter.fetch_add(1, Ordering::Relaxed)))
        .on_thread_start(move || {
            let _ = up.try_send(());
        })
        .enable_time()
        .build()
        .map_err(|source| BootError::Runtime {
            which: "ambient I/O",
            source,
        })?;
    for _ in 0..workers {
        if io_up.recv().is_err() {
            break;
        }
    }

    let hl = host_layout(plan, &opts);
    let keyed_seats: Vec<_> = hl
        .seats
        .iter()
        .copied()
        .filter(|(r, _)| r.hosting() == Hosting::Keyed)
        .collect();
    let pooled_roles: Vec<_> = hl
        .seats
        .iter()
        .map(|(r, _)| *r)
        .filter(|r| r.hosting() == Hosting::Pooled)
        .collect();
    let keyed = KeyedMailboxes::<Job>::new(&keyed_seats);
    let pooled = PooledQueue::<Job>::new(&pooled_roles);
    let receivers: Vec<_> = layout
        .seats
        .iter()
        .map(|s| match s.role.hosting() {
            Hosting::Keyed => keyed.mailbox(SeatId {
                role: s.role,
                index: s.index,
            }),
            Hosting::Pooled => pooled.receiver(s.role),
        })
        .collect();
    let sink = move |seat: SeatId, meta: UnitMeta, job: Job| match seat.role.hosting() {
        Hosting::Keyed => keyed.deliver(seat, meta, job),
        Hosting::Pooled => pooled.deliver(seat, meta, job),
    };

    let rt = io.handle().clone();
    let mut host = Host::start(hl, &opts, Binding::Pinned, sink, Some(io))?;
    let mut started = Vec::new();
    for (k, (spec, rx)) in layout.seats.iter().zip(receivers).enumerate() {
        let rx = rx.expect("every seat of the layout has a mailbox or a pooled queue");
        let (lane, name, rt) = (host.lane.clone(), spec.thread_name.clone(), rt.clone());
        let spawned = host.spawn_seat(&spec.thread_name, pins.cpu_for(k), move |up| {
            up.report();
            let _enter = rt.enter();
            seat_loop(&lane, &rt, &name, rx);
        });
        match spawned {
            Ok(rx) => started.push(rx),
            Err(e) => return Err(host.fail(e)),
        }
    }
    let seat_cpus = wait_started(&started);
    Ok(host.into_fleet(plan, pins, census_rows(plan, &seat_cpus, None), None))
}

/// A seat thread's life: run each delivery to completion until the host
/// closes (every sender of its mailbox or queue dropped).
fn seat_loop(
    lane: &Lane,
    rt: &tokio::runtime::Handle,
    name: &str,
    rx: crossbeam_channel::Receiver<Delivery<Job>>,
) {
    while let Ok(d) = rx.recv() {
        lane.run_blocking(rt, name, d);
    }
}
