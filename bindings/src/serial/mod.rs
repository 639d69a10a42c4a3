//! The serial binding: the host's seats ride `C` named cycle threads
//! (`C = ⌊Q⌋ − H` below the pinned tier), each running the granted units of
//! its seats in grant order, over the same pump.
//!
//! `DESIGN.md` §4; seed 000 §13 ("serial — one cycle thread per host over
//! the SAME queue and pump") and §14 (the 2–5 core tier); the thread count
//! is `docs/decisions/0003-serial-cycle-threads.md`. Each cycle thread
//! `work-fleet-serial-{t}` runs a current-thread Tokio runtime with a
//! `LocalSet`: each grant is spawned as a local task the moment it arrives,
//! so on a thread grant order is start order, and a walk that awaits its
//! sim's receipt yields the thread to the other granted units instead of
//! idling it (the pinned binding blocks its dedicated seat instead). The
//! seats of the plan's layout are logical here: the pump still counts them
//! (walk admission, the sim slot cap), and the layout deals them over the
//! cycle threads round-robin ([`fleet::plan::SeatLayout::cycle_thread_of`]).
//! A long CPU unit yields its thread at every [`crate::checkpoint()`] past a
//! slice.
//!
//! Where the plan lends the reserve ([`Plan::reserve_lent`]), the layout
//! adds the reserved cores' cycle threads and every cycle thread runs at
//! the idle class under a guard (the `lend` module; decision 0009).

mod lend;

pub(crate) use lend::{Guard as LendGuard, LendStats, GUARD_THREAD_NAME as LEND_GUARD_THREAD_NAME};

use crate::boot::{host_layout, BootError, BootOptions, PinPlan};
use crate::exec::Lane;
use crate::handle::{FleetHandle, Job};
use crate::running::{census_rows_cycle, spawn_named, Fleet, Running, PUMP_THREAD_NAME};
use fleet::plan::{serial_thread_name, Binding, Plan};
use fleet::pump::{HostPump, SeatId};
use fleet::shell::HostShell;
use fleet::sink::Delivery;
use fleet::unit::UnitMeta;
use fleet::waker::PostureWaker;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Boots the serial binding (see [`crate::boot`]).
pub(crate) fn boot(plan: &Plan, opts: BootOptions, pins: PinPlan) -> Result<Fleet, BootError> {
    // Lending needs the way back: a process that may not return a thread
    // from the idle class runs the plan without lending.
    let lend = plan.reserve_lent && lend::class_is_reversible();
    if plan.reserve_lent && !lend {
        tracing::warn!(
            "the plan lends the reserved cores, but this process may not take a thread back from the idle class (CAP_SYS_NICE or RLIMIT_NICE >= 20 needed): the reserve stays unlent"
        );
    }
    let plan = &Plan {
        reserve_lent: lend,
        ..plan.clone()
    };
    let threads = plan.seat_layout().cycle_threads.max(1) as usize;
    let mut runtimes = (0..threads)
        .map(|_| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .map_err(|source| BootError::Runtime {
                    which: "serial",
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let layout = plan.seat_layout();
    let mut senders = Vec::with_capacity(threads);
    let mut receivers = Vec::with_capacity(threads);
    for _ in 0..threads {
        let (tx, rx) = mpsc::unbounded_channel::<Delivery<Job>>();
        senders.push(tx);
        receivers.push(rx);
    }
    // Which cycle thread each seat rides, fixed at boot.
    let route: Vec<(SeatId, usize)> = layout
        .seats
        .iter()
        .map(|s| {
            let seat = SeatId {
                role: s.role,
                index: s.index,
            };
            let t = layout.cycle_thread_of(s.role, s.index).unwrap_or(0) as usize;
            (seat, t.min(threads - 1))
        })
        .collect();
    let sink = move |seat: SeatId, meta: UnitMeta, payload: Job| {
        let t = route
            .iter()
            .find(|(s, _)| *s == seat)
            .map_or(0, |(_, t)| *t);
        if senders[t]
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
        guard: None,
    };

    let lane = Lane {
        fleet: handle.clone(),
        posture: posture.clone(),
        waker: waker.clone(),
    };
    let mut ready = Vec::with_capacity(threads);
    let slots: Vec<Arc<lend::CycleSlot>> = (0..threads).map(|_| Arc::default()).collect();
    for ((t, rx), slot) in receivers.into_iter().enumerate().zip(slots.iter().cloned()) {
        let rt = match runtimes.next() {
            Some(rt) => rt,
            None => break,
        };
        let name = serial_thread_name(t as u32);
        let cpu = pins.cpu_for(t);
        let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Option<usize>>(1);
        let (lane, thread_name) = (lane.clone(), name.clone());
        let spawned = spawn_named(&name, move || {
            let pinned = cpu.filter(|c| crate::affinity::pin_current_thread(*c));
            let counted = lend.then(|| {
                slot.enter();
                slot
            });
            let _ = ready_tx.send(pinned);
            cycle_thread(rt, lane, &thread_name, rx, counted);
        });
        match spawned {
            Ok(t) => {
                running.seats.push((name, t));
                ready.push(ready_rx);
            }
            Err(e) => {
                let _ = running.stop(&handle);
                return Err(e);
            }
        }
    }
    let cycle_cpus: Vec<Option<usize>> = ready.iter().map(|rx| rx.recv().ok().flatten()).collect();
    let lent = if lend {
        let stats = Arc::new(lend::LendStats::default());
        match lend::Guard::start(
            slots,
            stats.clone(),
            threads as u32,
            plan.budget.reserve_cpus,
        ) {
            Ok(g) => {
                running.guard = Some(g);
                Some(stats)
            }
            Err(source) => {
                let _ = running.stop(&handle);
                return Err(BootError::Spawn {
                    thread: lend::GUARD_THREAD_NAME.into(),
                    source,
                });
            }
        }
    } else {
        None
    };
    Ok(Fleet {
        census: census_rows_cycle(plan, &[], &cycle_cpus),
        plan: plan.clone(),
        posture,
        waker,
        handle,
        pins,
        lost,
        running: Some(running),
        lent,
    })
}

/// A cycle thread: start each grant as a local task in arrival (grant)
/// order; when the host closes, finish every unit still in flight. With a
/// slot (the reserve lent), each unit's polls are counted for the guard.
fn cycle_thread(
    rt: tokio::runtime::Runtime,
    lane: Lane,
    name: &str,
    mut rx: mpsc::UnboundedReceiver<Delivery<Job>>,
    slot: Option<Arc<lend::CycleSlot>>,
) {
    let name: Arc<str> = Arc::from(name);
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        while let Some(d) = rx.recv().await {
            let unit = lane.clone().run_async(name.clone(), d);
            match &slot {
                Some(slot) => {
                    tokio::task::spawn_local(slot.clone().counted(unit));
                }
                None => {
                    tokio::task::spawn_local(unit);
                }
            }
        }
    });
    rt.block_on(local);
}
