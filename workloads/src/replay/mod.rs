//! The replay driver: feeds a corpus's cycles through a booted fleet on an
//! open-loop arrival schedule and records what happened.
//!
//! Per cycle (`DESIGN.md` §5): a pool update (background, deferrable), the
//! resolve (applies the cycle's swaps), then one walk per bin (Solver, keyed
//! by bin index) whose sims run on the SimDriver role, and the merge (keyed,
//! the one pin) that drains every path's outcome through the exactness
//! ledger. A registration crawl with a bounded window of 32 runs alongside.
//! The driver knows nothing of which binding runs the units.
//!
//! Each cycle runs inside an `info`-level `cycle` span (cycle index, paths,
//! bins; `makespan_ms` recorded when the cycle ends) on the driving thread,
//! and ends with a `debug` event carrying `tracy.frame_mark = true`, which
//! the Tracy layer turns into one frame per cycle (`DESIGN.md` §3
//! "Telemetry"). The unit spans are in [`units`].

mod background;
pub mod host;
mod parity;
mod produced;
pub mod record;
pub mod saturation;
pub mod units;

use produced::Produced;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::ledger::{BinWitness, ExactnessFuse, SharedLedger};
use fleet::{FailReason, PathOutcome, WorkerRole};

use crate::corpus::{Corpus, CycleCase, PathCase};
use crate::pools::CurrentPools;
use background::Background;
pub use host::{CycleHost, FleetHost, Solved, UnitFailure};
pub use parity::{compare, compare_cycle};
pub use record::{
    BackgroundRecord, BinRecord, CycleRecord, Mismatch, OutcomeRow, OverrunRecord, ReplayResult,
};
pub use saturation::Saturation;
use units::{CycleShared, Scale};

/// The registration crawl's submission window (seed 003 "Context").
pub const CRAWL_WINDOW: usize = 32;

/// CPU of one registration-crawl step at scale 1, µs.
pub const CRAWL_UNIT_CPU_US: u64 = 200;

/// The bound on a receipt wait when no cycle budget is known
/// ([`FleetHost::new`]).
pub const DEFAULT_UNIT_DEADLINE: Duration = Duration::from_secs(30);

/// The smallest unit deadline [`unit_deadline`] derives: below it a loaded
/// host's scheduling noise, not a hung unit, would decide.
pub const UNIT_DEADLINE_FLOOR: Duration = Duration::from_secs(5);

/// Cycle budgets a unit may take before its waiter gives up on it.
pub const UNIT_DEADLINE_CYCLES: u32 = 10;

/// The receipt deadline derived from the cycle budget: a cycle has
/// `cycle_interval_us × scale` before the next one arrives, and a unit
/// that has not answered within [`UNIT_DEADLINE_CYCLES`] budgets is hung;
/// never below [`UNIT_DEADLINE_FLOOR`]. A non-finite or non-positive scale
/// gives the floor; a budget past `u64::MAX` µs saturates there.
pub fn unit_deadline(cycle_interval_us: u64, scale: f64) -> Duration {
    if !(scale.is_finite() && scale > 0.0) {
        return UNIT_DEADLINE_FLOOR;
    }
    let budget_us = cycle_interval_us as f64 * scale * f64::from(UNIT_DEADLINE_CYCLES);
    // `as` saturates: a budget past u64::MAX µs is "no deadline" in effect.
    Duration::from_micros(budget_us as u64).max(UNIT_DEADLINE_FLOOR)
}

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A unit the cycle needs was refused or ended without a value.
    #[error("cycle {cycle}: {role}: {reason}")]
    Unit {
        /// Cycle index.
        cycle: u32,
        /// Role of the unit.
        role: WorkerRole,
        /// What happened.
        reason: String,
    },
    /// The scale is not a positive finite number.
    #[error("scale {0} is invalid: give a positive number (1.0 is the live bot's timing)")]
    BadScale(f64),
}

/// Called before each cycle starts, with the cycle index.
pub type CycleStartHook = Box<dyn FnMut(u32) + Send>;

/// Called after each cycle ends, with its record.
pub type CycleEndHook = Box<dyn FnMut(&CycleRecord) + Send>;

/// Called after each cycle ends, with the outcomes it produced (ordered by
/// path; empty when its merge gave none).
pub type OutcomesHook = Box<dyn FnMut(&[OutcomeRow]) + Send>;

/// How to replay.
pub struct ReplayOptions {
    /// Time scale: CPU and I/O durations and the arrival interval are multiplied by it.
    pub scale: f64,
    /// Replay only the first N cycles (all when `None`).
    pub cycles: Option<u32>,
    /// Cores the plan grants the cycle's units; the plan-based lower bound
    /// ([`CycleRecord::lower_bound_us`]) divides the cycle's total CPU by it.
    pub cores_granted: f64,
    /// Cores the process may use (quota and affinity); the process lower
    /// bound ([`CycleRecord::process_lower_bound_us`]) divides by it, the
    /// same for every contender.
    pub cores_process: f64,
    /// Time between cycle arrivals at scale 1, µs (`None`: the corpus's
    /// `cycle_interval_us`). Scaled like every other duration.
    pub interval_us: Option<u64>,
    /// Run the registration crawl alongside (units per cycle; 0 = none).
    pub crawl_units_per_cycle: u32,
    /// The bound on every receipt wait (resolve, walks, merge, sims, the
    /// final background settle); `None`: derived from the cycle budget
    /// ([`unit_deadline`]). An overrun is counted in
    /// [`ReplayResult::overruns`] and its paths are `Failed(Overrun)`.
    pub unit_deadline: Option<Duration>,
    /// Called before each cycle starts (cycle index), e.g. to change a quota.
    /// It runs on the replay's thread after the arrival wait, just before
    /// the cycle's start is taken.
    pub on_cycle_start: Option<CycleStartHook>,
    /// Called after each cycle with its record (progress, live metrics).
    pub on_cycle_end: Option<CycleEndHook>,
    /// Called after each cycle with its outcomes (to stream them to disk).
    pub on_outcomes: Option<OutcomesHook>,
    /// Keep every cycle's record and outcome in the result (`true`, the
    /// default). `false` for a long soak: the hooks see each cycle once, the
    /// result's `cycles` and `outcomes` stay empty, and memory stays flat;
    /// parity is still checked cycle by cycle.
    pub retain: bool,
    /// The exactness fuse of the merge's ledger (`None`: abort the process on
    /// a trip, the production discipline; tests pass a hook).
    pub fuse: Option<ExactnessFuse>,
}

impl ReplayOptions {
    /// Defaults: the given scale, every cycle, 1 core granted, a crawl of 4
    /// units per cycle.
    pub fn new(scale: f64) -> Self {
        ReplayOptions {
            scale,
            cycles: None,
            cores_granted: 1.0,
            cores_process: 1.0,
            interval_us: None,
            crawl_units_per_cycle: 4,
            unit_deadline: None,
            on_cycle_start: None,
            on_cycle_end: None,
            on_outcomes: None,
            retain: true,
            fuse: None,
        }
    }
}

/// The lower bound of a cycle at a scale, µs: the larger of its critical
/// path (resolve, then the slowest bin's walk CPU plus its sims' CPU and I/O
/// in sequence) and its total CPU divided by the granted cores.
pub fn lower_bound_us(case: &CycleCase, scale: f64, cores_granted: f64) -> u64 {
    let mut total_cpu = case.resolve_cpu_us as f64;
    let mut slowest_bin = 0f64;
    for bin in &case.bins {
        let mut span = 0f64;
        for &pi in bin {
            let p = &case.paths[pi as usize];
            span += p.walk_cpu_us as f64;
            total_cpu += p.walk_cpu_us as f64;
            if let Some(s) = &p.sim {
                span += (s.cpu_us + s.io_us) as f64;
                total_cpu += s.cpu_us as f64;
            }
        }
        slowest_bin = slowest_bin.max(span);
    }
    let critical = case.resolve_cpu_us as f64 + slowest_bin;
    (critical.max(total_cpu / cores_granted.max(1e-9)) * scale).round() as u64
}

/// A replay's schedule: its time scale, the cycles it replays, the
/// arrival interval (µs, scaled) and the bound on every receipt wait.
struct Schedule {
    scale: Scale,
    n: usize,
    interval_us: u64,
    deadline: Duration,
}

impl Schedule {
    fn of(corpus: &Corpus, opts: &ReplayOptions) -> Schedule {
        let scale = Scale(opts.scale);
        let n = opts.cycles.map_or(corpus.cycles.len(), |c| {
            (c as usize).min(corpus.cycles.len())
        });
        let interval_at_1 = opts.interval_us.unwrap_or(corpus.header.cycle_interval_us);
        let deadline = opts
            .unit_deadline
            .unwrap_or_else(|| unit_deadline(interval_at_1, opts.scale));
        Schedule {
            scale,
            n,
            interval_us: scale.us(interval_at_1),
            deadline,
        }
    }
}

/// Sleeps until `intended` µs after `t0` (returns at once when late).
fn sleep_until(t0: Instant, intended: u64) {
    let now = t0.elapsed().as_micros() as u64;
    if now < intended {
        std::thread::sleep(Duration::from_micros(intended - now));
    }
}

/// Runs the cycle's resolve on `host` within `deadline`: the pool states
/// the cycle solves on, or `None` when the resolve overran.
///
/// Errors: the host refused the resolve or it ended without a value
/// ([`ReplayError::Unit`]).
fn resolve(
    host: &dyn CycleHost,
    pools: &Arc<crate::pools::PoolSet>,
    case: &Arc<CycleCase>,
    scale: Scale,
    deadline: Duration,
) -> Result<Option<Arc<crate::pools::PoolSet>>, ReplayError> {
    match host.resolve_within(pools.clone(), case.clone(), scale, deadline) {
        Ok(p) => Ok(Some(p)),
        Err(UnitFailure::Overrun { .. }) => Ok(None),
        Err(UnitFailure::Failed(reason)) => Err(ReplayError::Unit {
            cycle: case.index,
            role: WorkerRole::Resolve,
            reason,
        }),
    }
}

/// The cycle's record once it ends (`end_us`) with its bins: its arrival
/// and start, and both lower bounds at the run's scale.
fn cycle_record(
    case: &CycleCase,
    opts: &ReplayOptions,
    intended: u64,
    start_us: u64,
) -> impl Fn(u64, Vec<BinRecord>) -> CycleRecord {
    let granted = lower_bound_us(case, opts.scale, opts.cores_granted);
    let process = lower_bound_us(case, opts.scale, opts.cores_process);
    let cycle = case.index;
    move |end_us, bins| CycleRecord {
        cycle,
        intended_start_us: intended,
        start_us,
        end_us,
        lower_bound_us: granted,
        process_lower_bound_us: process,
        bins,
    }
}

/// The cycle's span (its `makespan_ms` recorded when it ends).
fn cycle_span(case: &CycleCase) -> tracing::Span {
    tracing::info_span!(
        "cycle",
        cycle = case.index,
        paths = case.paths.len(),
        bins = case.bins.len(),
        makespan_ms = tracing::field::Empty
    )
}

/// Replays `corpus` through `host` on an open-loop arrival schedule.
pub fn replay(
    host: &dyn CycleHost,
    corpus: &Corpus,
    mut opts: ReplayOptions,
) -> Result<ReplayResult, ReplayError> {
    if !(opts.scale.is_finite() && opts.scale > 0.0) {
        return Err(ReplayError::BadScale(opts.scale));
    }
    let Schedule {
        scale,
        n,
        interval_us,
        deadline,
    } = Schedule::of(corpus, &opts);
    let mut backlog = saturation::SaturationDetector::new(interval_us);
    let mut overruns = OverrunRecord {
        deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
        ..OverrunRecord::default()
    };
    let threshold = corpus.header.profit_threshold;
    let probe = probe_path(corpus);

    let t0 = Instant::now();
    let now_us = || t0.elapsed().as_micros() as u64;
    let ledger = SharedLedger::new(opts.fuse.take().unwrap_or_else(ExactnessFuse::aborting));
    let mut pools = Arc::new(corpus.pools.clone());
    // What the background units read when they run (never a snapshot each).
    let current = CurrentPools::new(pools.clone());
    let mut produced = Produced::new(opts.retain, n);
    let mut background = Background::default();

    for (i, case) in corpus.cycles.iter().take(n).enumerate() {
        let cycle = case.index;
        let intended = i as u64 * interval_us;
        // The background work never blocks a cycle ([`background`]).
        background.collect(probe.is_some());
        if let Some(probe) = &probe {
            let cpu = scale.us(CRAWL_UNIT_CPU_US);
            background.submit_crawl(host, opts.crawl_units_per_cycle, cpu, &current, probe);
        }
        sleep_until(t0, intended);
        if let Some(f) = opts.on_cycle_start.as_mut() {
            f(cycle);
        }
        let cycle_span = cycle_span(case);
        let _in_cycle = cycle_span.enter();
        let start_us = now_us();
        backlog.cycle(cycle, intended, start_us);
        let record = cycle_record(case, &opts, intended, start_us);
        let case = Arc::new(case.clone());

        if let Some(probe) = &probe {
            let cpu = scale.us(case.poolupd_cpu_us as u64);
            background.submit_poolupd(host, cpu, &current, probe);
        }

        let ids: Vec<u32> = case.paths.iter().map(|p| p.id).collect();
        let Some(resolved) = resolve(host, &pools, &case, scale, deadline)? else {
            // Without its pool states the cycle cannot be solved: every
            // path is Failed(Overrun), the book closes exact, and the next
            // cycle solves on the states before this one.
            overruns.resolve += 1;
            let rows = close_overrun(&ledger, cycle, &ids)?;
            let end_us = now_us();
            produced.cycle_done(&case, record(end_us, Vec::new()), rows, &mut opts);
            continue;
        };
        pools = resolved;
        current.set(pools.clone());

        let (bins, rows) = solve_cycle(
            host,
            &ledger,
            CycleShared {
                case: case.clone(),
                pools: pools.clone(),
                threshold,
                scale,
                sim_deadline: deadline,
            },
            &ids,
            &mut overruns,
        )?;
        let end_us = now_us();

        let record = record(end_us, bins);
        cycle_span.record("makespan_ms", record.makespan_us() as f64 / 1e3);
        tracing::debug!(tracy.frame_mark = true);
        produced.cycle_done(&case, record, rows, &mut opts);
    }
    let background = background.settle(deadline, &mut overruns);
    let paths = corpus.cycles.iter().take(n).map(|c| c.paths.len() as u64);
    let paths = paths.sum();
    Ok(produced.into_result(paths, background, overruns, now_us(), &backlog))
}

/// The background units' probe path: the corpus's first path, if any.
fn probe_path(corpus: &Corpus) -> Option<PathCase> {
    corpus
        .cycles
        .iter()
        .flat_map(|c| c.paths.first())
        .next()
        .cloned()
}

/// Solves one resolved cycle on `host`: opens its bins in the ledger,
/// walks and merges them within the shared deadline, counts walk and merge
/// overruns into `overruns`, and returns each bin's record (a dead walk's
/// bin with no time) and the cycle's outcome rows. Errors: the ledger's
/// (a fuse trip) or the host's, as [`ReplayError::Unit`] of the solver.
fn solve_cycle(
    host: &dyn CycleHost,
    ledger: &SharedLedger,
    shared: CycleShared,
    ids: &[u32],
    overruns: &mut OverrunRecord,
) -> Result<(Vec<BinRecord>, Vec<OutcomeRow>), ReplayError> {
    let case = shared.case.clone();
    let cycle = case.index;
    let deadline = shared.sim_deadline;
    let (witnesses, merge) = open_bins(ledger, &case, ids)?;
    let Solved {
        bins,
        merged,
        walk_overruns,
        merge_overrun,
    } = host
        .solve_within(Arc::new(shared), witnesses, merge, deadline)
        .map_err(|reason| ReplayError::Unit {
            cycle,
            role: WorkerRole::Solver,
            reason,
        })?;
    overruns.walk += u64::from(walk_overruns);
    overruns.merge += u64::from(merge_overrun);
    let bins = bins
        .into_iter()
        .enumerate()
        .map(|(b, r)| {
            // A dead walk: its witness delivered LaneDeath for what it owed.
            r.unwrap_or(BinRecord {
                bin: b as u32,
                paths: case.bins[b].len() as u32,
                walk_us: 0,
                sim_latency_us: vec![],
            })
        })
        .collect();
    Ok((bins, rows_of(cycle, merged)))
}

/// Closes `cycle` with every path `Failed(Overrun)` (its resolve overran:
/// without its pool states the cycle cannot be solved); the book stays
/// exact. Errors: a fuse trip, as [`ReplayError::Unit`] of the merge.
fn close_overrun(
    ledger: &SharedLedger,
    cycle: u32,
    ids: &[u32],
) -> Result<Vec<OutcomeRow>, ReplayError> {
    let record = ledger
        .with(|l| {
            l.open(cycle as u64, ids)?;
            for &id in ids {
                l.record(cycle as u64, id, overrun_outcome())?;
            }
            l.close(cycle as u64)
        })
        .map_err(|trip| ReplayError::Unit {
            cycle,
            role: WorkerRole::Merge,
            reason: trip.to_string(),
        })?;
    Ok(rows_of(cycle, Some(record)))
}

/// Opens the cycle's book: one witness per bin (owing that bin's paths)
/// and the merge that drains them. Errors: a fuse trip, as
/// [`ReplayError::Unit`] of the merge.
fn open_bins(
    ledger: &SharedLedger,
    case: &CycleCase,
    ids: &[u32],
) -> Result<(Vec<BinWitness>, fleet::ledger::CycleMerge), ReplayError> {
    let (sender, merge) =
        ledger
            .open_cycle(case.index as u64, ids)
            .map_err(|trip| ReplayError::Unit {
                cycle: case.index,
                role: WorkerRole::Merge,
                reason: trip.to_string(),
            })?;
    let witnesses = case
        .bins
        .iter()
        .map(|bin| {
            BinWitness::new(
                sender.clone(),
                bin.iter().map(|&pi| case.paths[pi as usize].id),
            )
        })
        .collect();
    Ok((witnesses, merge))
}

const fn overrun_outcome() -> PathOutcome {
    PathOutcome::Failed {
        reason: FailReason::Overrun,
    }
}

/// A closed cycle's outcomes as rows, ordered by path (none without a record).
fn rows_of(cycle: u32, record: Option<fleet::ledger::CycleRecord>) -> Vec<OutcomeRow> {
    record.map_or_else(Vec::new, |r| {
        r.outcomes
            .into_iter()
            .map(|(path, outcome)| OutcomeRow {
                cycle,
                path,
                outcome,
            })
            .collect()
    })
}
