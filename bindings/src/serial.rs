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
//! the idle class under a guard (the crate's `lend` module; decision 0009).

use crate::exec::Lane;
use crate::handle::Job;
use crate::host::{wait_started, Host};
use crate::lend;
use crate::options::{host_layout, BootError, BootOptions, PinPlan};
use crate::running::{census_rows_cycle, Fleet};
use fleet::plan::{serial_thread_name, Binding, Plan};
use fleet::pump::SeatId;
use fleet::sink::Delivery;
use fleet::unit::UnitMeta;
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
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::unbounded_channel::<Delivery<Job>>())
        .unzip();
    let route = seat_routes(plan, threads);
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
    let mut host = Host::start(host_layout(plan, &opts), &opts, Binding::Serial, sink, None)?;
    let mut ready = Vec::with_capacity(threads);
    let slots: Vec<Arc<lend::CycleSlot>> = (0..threads).map(|_| Arc::default()).collect();
    for ((t, rx), slot) in receivers.into_iter().enumerate().zip(slots.iter().cloned()) {
        let rt = match runtimes.next() {
            Some(rt) => rt,
            None => break,
        };
        let name = serial_thread_name(t as u32);
        let (lane, thread_name) = (host.lane.clone(), name.clone());
        let spawned = host.spawn_seat(&name, pins.cpu_for(t), move |up| {
            let counted = lend.then(|| {
                slot.enter();
                slot
            });
            up.report();
            cycle_thread(rt, lane, &thread_name, rx, counted);
        });
        match spawned {
            Ok(rx) => ready.push(rx),
            Err(e) => return Err(host.fail(e)),
        }
    }
    let cycle_cpus = wait_started(&ready);
    let lent = match lend {
        true => match start_guard(slots, threads, plan) {
            Ok((guard, stats)) => {
                host.set_guard(guard);
                Some(stats)
            }
            Err(e) => return Err(host.fail(e)),
        },
        false => None,
    };
    let census = census_rows_cycle(plan, &[], &cycle_cpus);
    Ok(host.into_fleet(plan, pins, census, lent))
}

/// Which cycle thread each seat of the plan's layout rides, fixed at boot
/// (`threads` cycle threads, at least one).
fn seat_routes(plan: &Plan, threads: usize) -> Vec<(SeatId, usize)> {
    let layout = plan.seat_layout();
    layout
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
        .collect()
}

/// Starts the lent reserve's guard over the cycle threads' slots.
///
/// Errors: [`BootError::Spawn`] when its thread cannot start.
fn start_guard(
    slots: Vec<Arc<lend::CycleSlot>>,
    threads: usize,
    plan: &Plan,
) -> Result<(lend::Guard, Arc<lend::LendStats>), BootError> {
    let stats = Arc::new(lend::LendStats::default());
    lend::Guard::start(
        slots,
        stats.clone(),
        threads as u32,
        plan.budget.reserve_cpus,
    )
    .map(|guard| (guard, stats))
    .map_err(|source| BootError::Spawn {
        thread: lend::GUARD_THREAD_NAME.into(),
        source,
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
