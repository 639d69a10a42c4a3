//! The serial binding: one named cycle thread per host runs every granted
//! unit of the host, in grant order, over the same pump.
//!
//! `DESIGN.md` §4; seed 000 §13 ("serial — one cycle thread per host over
//! the SAME queue and pump") and §14 (the 2–5 core tier). The thread
//! `work-fleet-serial-0` runs a current-thread Tokio runtime with a
//! `LocalSet`: each grant is spawned as a local task the moment it arrives,
//! so grant order is start order, and a walk that awaits its sim's receipt
//! yields the thread to the other granted units instead of idling it (the
//! pinned binding blocks its dedicated seat instead). The seats of the plan's
//! layout are logical here: the pump still counts them (walk admission, the
//! sim slot cap), but they all ride this one thread.

use crate::boot::{host_layout, BootError, BootOptions, PinPlan};
use crate::exec::Lane;
use crate::handle::{FleetHandle, Job};
use crate::running::{census_rows, spawn_named, Fleet, Running, PUMP_THREAD_NAME};
use fleet::plan::{Binding, Plan, SERIAL_THREAD_NAME};
use fleet::pump::{HostPump, SeatId};
use fleet::shell::HostShell;
use fleet::sink::Delivery;
use fleet::unit::UnitMeta;
use fleet::waker::PostureWaker;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Boots the serial binding (see [`crate::boot`]).
pub(crate) fn boot(plan: &Plan, opts: BootOptions, pins: PinPlan) -> Result<Fleet, BootError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|source| BootError::Runtime {
            which: "serial",
            source,
        })?;
    let (tx, rx) = mpsc::unbounded_channel::<Delivery<Job>>();
    let sink = move |seat: SeatId, meta: UnitMeta, payload: Job| {
        if tx
            .send(Delivery {
                seat,
                meta,
                payload,
            })
            .is_err()
        {
            // The payload drops here: its receipt resolves SenderDropped and
            // its witness fails the paths it owed.
            tracing::error!(role = %seat.role, seat = seat.index, unit = meta.id, "serial thread gone: unit dropped");
        }
    };
    let posture = opts.posture.clone();
    let guard_posture = posture.clone();
    let (shell, host) = HostShell::new(
        HostPump::new(host_layout(plan, &opts), opts.pump),
        move || guard_posture.guard(),
        sink,
        |_meta, job: Job, reason| job.receipt.terminal(reason),
    );
    let lost = crate::exec::LostSeats::default();
    let shell = shell
        .with_drain_deadline(opts.shutdown_deadline)
        .with_step_hook(crate::exec::step_hook(opts.posture.clone(), lost.clone()));
    let handle = FleetHandle::new(host.clone(), Binding::Serial);
    let waker = Arc::new(PostureWaker::new());
    waker.register_host(&host);
    let pump = spawn_named(PUMP_THREAD_NAME, move || {
        shell.run().map(|p| (p.counts(), p.in_flight()))
    })?;
    let mut running = Running {
        pump,
        deadline: opts.shutdown_deadline,
        lost: lost.clone(),
        seats: Vec::new(),
        io: None,
    };

    let lane = Lane {
        fleet: handle.clone(),
        posture: posture.clone(),
        waker: waker.clone(),
    };
    let cpu = pins.cpu_for(0);
    let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Option<usize>>(1);
    let spawned = spawn_named(SERIAL_THREAD_NAME, move || {
        let pinned = cpu.filter(|c| crate::affinity::pin_current_thread(*c));
        let _ = ready_tx.send(pinned);
        cycle_thread(rt, lane, rx);
    });
    match spawned {
        Ok(t) => running.seats.push((SERIAL_THREAD_NAME.to_string(), t)),
        Err(e) => {
            let _ = running.stop(&handle);
            return Err(e);
        }
    }
    let serial_cpu = ready_rx.recv().ok().flatten();
    Ok(Fleet {
        census: census_rows(plan, &[], serial_cpu),
        plan: plan.clone(),
        posture,
        waker,
        handle,
        pins,
        lost,
        running: Some(running),
    })
}

/// The cycle thread: start each grant as a local task in arrival (grant)
/// order; when the host closes, finish every unit still in flight.
fn cycle_thread(
    rt: tokio::runtime::Runtime,
    lane: Lane,
    mut rx: mpsc::UnboundedReceiver<Delivery<Job>>,
) {
    let name: Arc<str> = Arc::from(SERIAL_THREAD_NAME);
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        while let Some(d) = rx.recv().await {
            tokio::task::spawn_local(lane.clone().run_async(name.clone(), d));
        }
    });
    rt.block_on(local);
}
