//! The unit bodies of a solve cycle: resolve, a bin's walk, a simulation, the
//! merge, a pool update and a registration-crawl step.
//!
//! Every body is a future so both bindings can run it: the pinned binding
//! blocks its seat on it, the serial binding interleaves it with the host's
//! other granted units at its await points (a walk yields at each sim join).
//! CPU is spent on real arithmetic by [`crate::cpu::burn_cpu_us_async`]
//! (which yields at the fleet's checkpoint every slice on a serial cycle
//! thread, and never elsewhere; the baselines' blocking resolve and sims
//! use [`crate::cpu::burn_cpu_us`]); I/O waits
//! are on the shared simulated I/O timer ([`crate::simio`]), the same for
//! every contender. Outcomes come only from the corpus (`DESIGN.md` §5).
//!
//! Spans (`DESIGN.md` §3 "Telemetry"; seed 000 §7), all at `debug` level so
//! they cost one cached interest check when no subscriber wants them:
//! `resolve` (cycle, swaps), `solve.bin` (cycle, bin, paths, and `walk_ms`
//! recorded when the walk ends — the seed's `arb.solve.bin`) and `sim`
//! (path, cpu_us, io_us). Each carries `seat`: the name of the thread the
//! unit started on (`work-fleet-solver-3`, `work-fleet-serial-0`), recorded
//! only when the span is enabled. Spans never change an outcome.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::ledger::BinWitness;
use fleet::receipt::UnitValue;
use fleet::{FailReason, PathOutcome, WorkerRole};
use fleet_bindings::{FleetHandle, SeatCtx, UnitBody};
use futures::future::BoxFuture;
use futures::FutureExt;
use tracing::field::Empty;
use tracing::Instrument;

use crate::corpus::{CycleCase, PathCase, SimCase};
use crate::pools::{CurrentPools, PoolSet};
use crate::replay::record::BinRecord;

/// Scales a corpus duration (µs at scale 1) to this run's scale.
#[derive(Debug, Clone, Copy)]
pub struct Scale(pub f64);

impl Scale {
    /// `us × scale`, rounded, in µs.
    pub fn us(self, us: u64) -> u64 {
        (us as f64 * self.0).round() as u64
    }
}

/// What every unit of one cycle shares.
pub struct CycleShared {
    /// The corpus cycle.
    pub case: Arc<CycleCase>,
    /// The pool states this cycle is solved on (after its swaps).
    pub pools: Arc<PoolSet>,
    /// Profit threshold (start-token units).
    pub threshold: u128,
    /// Time scale.
    pub scale: Scale,
    /// The bound on a walk's wait for one of its sims; past it the path is
    /// `Failed(Overrun)` and the walk goes on.
    pub sim_deadline: Duration,
}

/// Records the calling thread's name in `span`'s `seat` field, only when a
/// subscriber enabled the span (no work otherwise).
fn record_seat(span: &tracing::Span) {
    if !span.is_disabled() {
        if let Some(name) = std::thread::current().name() {
            span.record("seat", name);
        }
    }
}

/// Resolves a cycle: applies its swaps to the previous pool states and
/// spends the cycle's resolve CPU. Returns the states the cycle solves on.
/// Runs inside a `resolve` span (cycle, swaps, seat).
pub fn resolve_step(prev: &PoolSet, case: &CycleCase, scale: Scale) -> Arc<PoolSet> {
    let span = resolve_span(case);
    let _entered = span.enter();
    let mut next = prev.clone();
    next.apply(&case.swaps);
    if let Some(path) = case.paths.first() {
        crate::cpu::burn_cpu_us(scale.us(case.resolve_cpu_us as u64), &next, &path.hops);
    }
    Arc::new(next)
}

/// The `resolve` span of a cycle, its seat recorded on the calling thread.
fn resolve_span(case: &CycleCase) -> tracing::Span {
    let span = tracing::debug_span!(
        "resolve",
        cycle = case.index,
        swaps = case.swaps.len(),
        seat = Empty
    );
    record_seat(&span);
    span
}

/// [`resolve_step`] for a unit body: the burn awaits the fleet's
/// checkpoint ([`crate::cpu::burn_cpu_us_async`]), so on a serial cycle
/// thread a unit granted meanwhile starts within a slice.
pub async fn resolve_step_async(prev: &PoolSet, case: &CycleCase, scale: Scale) -> Arc<PoolSet> {
    let span = resolve_span(case);
    async move {
        let mut next = prev.clone();
        next.apply(&case.swaps);
        if let Some(path) = case.paths.first() {
            crate::cpu::burn_cpu_us_async(scale.us(case.resolve_cpu_us as u64), &next, &path.hops)
                .await;
        }
        Arc::new(next)
    }
    .instrument(span)
    .await
}

/// The resolve as a fleet Resolve unit; its value is the new `Arc<PoolSet>`.
pub fn resolve_body(prev: Arc<PoolSet>, case: Arc<CycleCase>, scale: Scale) -> UnitBody {
    Box::new(move |_ctx: SeatCtx| {
        async move { Box::new(resolve_step_async(&prev, &case, scale).await) as UnitValue }.boxed()
    })
}

/// The `sim` span of one simulation (path id, corpus CPU and I/O in µs at
/// scale 1, seat).
fn sim_span(sim: &SimCase, path: &PathCase) -> tracing::Span {
    let span = tracing::debug_span!(
        "sim",
        path = path.id,
        cpu_us = sim.cpu_us,
        io_us = sim.io_us,
        seat = Empty
    );
    record_seat(&span);
    span
}

/// Runs one simulation: its CPU, then its I/O wait on the shared simulated
/// I/O timer ([`crate::simio`]; any executor). Returns whether it reverted (a corpus fact).
/// Runs inside a `sim` span opened on the thread that first polls it.
pub async fn simulate(sim: SimCase, pools: Arc<PoolSet>, path: PathCase, scale: Scale) -> bool {
    let span = sim_span(&sim, &path);
    async move {
        crate::cpu::burn_cpu_us_async(scale.us(sim.cpu_us as u64), &pools, &path.hops).await;
        let wait = scale.us(sim.io_us as u64);
        if wait > 0 {
            crate::simio::wait(Duration::from_micros(wait)).await;
        }
        sim.reverts
    }
    .instrument(span)
    .await
}

/// As [`simulate`], blocking the calling thread for the I/O wait on the same
/// timer (for the thread-per-sim baseline).
pub fn simulate_blocking(sim: &SimCase, pools: &PoolSet, path: &PathCase, scale: Scale) -> bool {
    let span = sim_span(sim, path);
    let _entered = span.enter();
    crate::cpu::burn_cpu_us(scale.us(sim.cpu_us as u64), pools, &path.hops);
    let wait = scale.us(sim.io_us as u64);
    if wait > 0 {
        crate::simio::wait_blocking(Duration::from_micros(wait));
    }
    sim.reverts
}

/// A simulation as a fleet SimDriver unit; its value is whether it reverted.
pub fn sim_body(sim: SimCase, pools: Arc<PoolSet>, path: PathCase, scale: Scale) -> UnitBody {
    Box::new(move |_ctx: SeatCtx| {
        async move { Box::new(simulate(sim, pools, path, scale).await) as UnitValue }.boxed()
    })
}

/// How a walk runs one path's simulation and joins it: returns whether the
/// sim reverted, or why it could not run. The fleet submits a SimDriver
/// unit; the baselines the fleet replaces use their own mechanisms.
pub type SimJoin = Arc<
    dyn Fn(SimCase, Arc<PoolSet>, PathCase) -> BoxFuture<'static, Result<bool, FailReason>>
        + Send
        + Sync,
>;

/// Walks one bin: for each of its paths, spend the path's walk CPU, solve it
/// exactly, and start its simulation when it has one; a path's sim is joined
/// after the next path has been walked (one sim in flight while walking, as
/// the live bot's bins do), and outcomes are delivered in path order through
/// the bin's witness — which patches `Failed(LaneDeath)` for every path
/// still owed if the walk dies. Returns the bin's [`BinRecord`].
///
/// `join` must start the sim when called (not when first polled), so the
/// sim runs while the walk goes on.
///
/// The walk runs inside a `solve.bin` span (cycle, bin, paths, seat) opened
/// on the thread that first polls it; `walk_ms` (the record's walk time, ms)
/// is recorded on it when the walk ends.
pub async fn walk_bin(
    shared: Arc<CycleShared>,
    bin: usize,
    witness: BinWitness,
    join: SimJoin,
) -> BinRecord {
    let span = tracing::debug_span!(
        "solve.bin",
        cycle = shared.case.index,
        bin,
        paths = shared.case.bins[bin].len(),
        walk_ms = Empty,
        seat = Empty
    );
    record_seat(&span);
    let record = walk_paths(shared, bin, witness, join)
        .instrument(span.clone())
        .await;
    span.record("walk_ms", record.walk_us as f64 / 1e3);
    record
}

/// The walk itself (see [`walk_bin`]).
async fn walk_paths(
    shared: Arc<CycleShared>,
    bin: usize,
    mut witness: BinWitness,
    join: SimJoin,
) -> BinRecord {
    type Pending = (
        u32,
        PathOutcome,
        Instant,
        BoxFuture<'static, Result<bool, FailReason>>,
    );
    async fn finish(p: Pending, witness: &mut BinWitness, sims: &mut Vec<u64>) {
        let (id, solved, t, fut) = p;
        let outcome = match fut.await {
            Ok(true) => PathOutcome::Failed {
                reason: FailReason::SimReverted,
            },
            Ok(false) => solved,
            Err(reason) => PathOutcome::Failed { reason },
        };
        sims.push(t.elapsed().as_micros() as u64);
        let _ = witness.deliver(id, outcome);
    }
    let started = Instant::now();
    let case = &shared.case;
    let mut sims = Vec::new();
    let mut pending: Option<Pending> = None;
    for &pi in &case.bins[bin] {
        let path = &case.paths[pi as usize];
        crate::cpu::burn_cpu_us_async(
            shared.scale.us(path.walk_cpu_us as u64),
            &shared.pools,
            &path.hops,
        )
        .await;
        let solved = crate::solve::solve_path(&shared.pools, path, shared.threshold);
        if let Some(p) = pending.take() {
            finish(p, &mut witness, &mut sims).await;
        }
        match &path.sim {
            None => {
                // A closed pipe means the fuse already tripped loudly.
                let _ = witness.deliver(path.id, solved);
            }
            Some(sim) => {
                let fut = join(*sim, shared.pools.clone(), path.clone());
                pending = Some((path.id, solved, Instant::now(), fut));
            }
        }
    }
    if let Some(p) = pending.take() {
        finish(p, &mut witness, &mut sims).await;
    }
    BinRecord {
        bin: bin as u32,
        paths: case.bins[bin].len() as u32,
        walk_us: started.elapsed().as_micros() as u64,
        sim_latency_us: sims,
    }
}

/// The fleet's sim join: submit a SimDriver unit and await its receipt for
/// at most `deadline` ([`fleet_bindings::within`]): a sim past it fails its
/// path as `Failed(Overrun)` (counted) instead of hanging the walk; a refused
/// sim is `Failed(SimRefused)`; a lost one `Failed(LaneDeath)`.
pub fn fleet_sim_join(fleet: FleetHandle, scale: Scale, deadline: Duration) -> SimJoin {
    Arc::new(move |sim: SimCase, pools: Arc<PoolSet>, path: PathCase| {
        let submitted = fleet.submit(
            WorkerRole::SimDriver,
            None,
            sim_body(sim, pools, path, scale),
        );
        async move {
            let receipt = submitted.map_err(|_| FailReason::SimRefused)?;
            match fleet_bindings::within(receipt, deadline, Some(WorkerRole::SimDriver)).await {
                Ok(value) => value
                    .downcast::<bool>()
                    .map(|b| *b)
                    .map_err(|_| FailReason::LaneDeath),
                Err(fleet::receipt::TerminalReason::Overrun { .. }) => Err(FailReason::Overrun),
                Err(_) => Err(FailReason::LaneDeath),
            }
        }
        .boxed()
    })
}

/// A bin's walk as a fleet Solver unit; its value is the [`BinRecord`].
pub fn walk_body(shared: Arc<CycleShared>, bin: usize, witness: BinWitness) -> UnitBody {
    Box::new(move |ctx: SeatCtx| {
        let join = fleet_sim_join(ctx.fleet.clone(), shared.scale, shared.sim_deadline);
        async move { Box::new(walk_bin(shared, bin, witness, join).await) as UnitValue }.boxed()
    })
}

/// Background CPU of a deferrable role (a pool update or a crawl step),
/// spent on the pool states current when the unit runs ([`CurrentPools`]).
pub fn background_body(cpu_us: u64, pools: CurrentPools, probe: PathCase) -> UnitBody {
    Box::new(move |_ctx: SeatCtx| {
        async move {
            let pools = pools.get();
            crate::cpu::burn_cpu_us_async(cpu_us, &pools, &probe.hops).await;
            Box::new(()) as UnitValue
        }
        .boxed()
    })
}
