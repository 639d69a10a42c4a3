//! A running fleet: its handle, census, posture, and clean shutdown.

use crate::handle::FleetHandle;
use crate::options::{BootError, PinPlan};
use fleet::census::{CensusBinding, CensusRow};
use fleet::plan::Plan;
use fleet::posture::PostureOwner;
use fleet::pump::{PumpCounts, PumpFailure, SeatId};
use fleet::unit::UnitId;
use fleet::waker::PostureWaker;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Name of the thread that runs the host's pump shell.
pub const PUMP_THREAD_NAME: &str = "work-fleet-pump-0";

/// What the pump thread returns: the pump's final counts and the units still
/// in flight when its drain ended (stuck), or its loud failure.
pub(crate) type PumpThread = JoinHandle<Result<(PumpCounts, Vec<(SeatId, UnitId)>), PumpFailure>>;

/// The threads and runtime a binding started; joined on shutdown.
pub(crate) struct Running {
    pub(crate) pump: PumpThread,
    /// Shutdown's deadline, from `close` (the pump's drain uses the same).
    pub(crate) deadline: Duration,
    /// The seats the pump retired (published by the step hook).
    pub(crate) lost: crate::exec::LostSeats,
    pub(crate) seats: Vec<(String, JoinHandle<()>)>,
    pub(crate) io: Option<tokio::runtime::Runtime>,
    /// The serial tier's lending guard (decision 0009), stopped first.
    pub(crate) guard: Option<crate::lend::Guard>,
}

impl Running {
    /// Closes the host, waits up to the deadline for in-flight units and
    /// every thread, and joins what finished; returns what shutdown saw.
    pub(crate) fn stop(mut self, handle: &FleetHandle) -> Result<ShutdownReport, ShutdownError> {
        if let Some(g) = self.guard.take() {
            g.stop();
        }
        handle.inner.host.close();
        let until = Instant::now().checked_add(self.deadline);
        // The pump drains up to the same deadline; a little grace covers
        // its last step.
        let pump = join_by(self.pump, until.and_then(|u| u.checked_add(PUMP_GRACE)));
        let mut panicked = Vec::new();
        let mut stuck_threads = Vec::new();
        let mut joined = usize::from(pump.is_some());
        for (name, t) in self.seats {
            match join_by(t, until) {
                Some(Ok(())) => joined += 1,
                Some(Err(_)) => {
                    joined += 1;
                    panicked.push(name);
                }
                None => stuck_threads.push(name),
            }
        }
        let io_workers = match self.io {
            Some(rt) => {
                let left = until.map_or(Duration::from_secs(10), |u| {
                    u.saturating_duration_since(Instant::now())
                });
                rt.shutdown_timeout(left.max(Duration::from_millis(10)));
                true
            }
            None => false,
        };
        let lost_seats = self.lost.lock().clone();
        let (counts, stuck_units) = match pump {
            Some(Ok(Ok(done))) => done,
            Some(Ok(Err(failure))) => return Err(ShutdownError::PumpFailed(failure)),
            Some(Err(_)) => {
                return Err(ShutdownError::ThreadPanicked {
                    threads: vec![PUMP_THREAD_NAME.to_string()],
                })
            }
            None => {
                stuck_threads.insert(0, PUMP_THREAD_NAME.to_string());
                return Err(ShutdownError::Stuck {
                    deadline: self.deadline,
                    units: Vec::new(),
                    threads: stuck_threads,
                    pump: None,
                });
            }
        };
        if !stuck_units.is_empty() || !stuck_threads.is_empty() {
            return Err(ShutdownError::Stuck {
                deadline: self.deadline,
                units: stuck_units,
                threads: stuck_threads,
                pump: Some(counts),
            });
        }
        // A thread that died with a seat the pump retired is accounted for
        // (a lost seat: lane death); any other panic is a binding bug.
        if panicked.len() > lost_seats.len() {
            return Err(ShutdownError::ThreadPanicked { threads: panicked });
        }
        Ok(ShutdownReport {
            pump: counts,
            threads_joined: joined,
            io_runtime_stopped: io_workers,
            lost_seats,
            lost_threads: panicked,
        })
    }
}

/// Extra time the pump thread gets past the shutdown deadline to return
/// from its drain.
const PUMP_GRACE: Duration = Duration::from_millis(500);

/// Joins `t` if it ends by `until` (`None`: wait indefinitely); `None` when
/// it is still running then (the thread is left detached).
fn join_by<T>(t: JoinHandle<T>, until: Option<Instant>) -> Option<std::thread::Result<T>> {
    if let Some(until) = until {
        let mut nap = Duration::from_micros(100);
        while !t.is_finished() {
            let now = Instant::now();
            if now >= until {
                return None;
            }
            std::thread::sleep(nap.min(until - now));
            nap = (nap * 2).min(Duration::from_millis(20));
        }
    }
    Some(t.join())
}

/// What a clean shutdown saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The pump's final counts (safety S holds: `pump.conserved()`).
    pub pump: PumpCounts,
    /// Threads joined (pump and seat threads; the I/O runtime's workers are
    /// stopped by the runtime itself).
    pub threads_joined: usize,
    /// The ambient I/O runtime was shut down (pinned binding).
    pub io_runtime_stopped: bool,
    /// Seats lost while running (their threads died outside a unit; the
    /// pump retired them: a lane death). Empty on a healthy run.
    pub lost_seats: Vec<fleet::pump::SeatId>,
    /// Seat threads that had died with those seats (pinned binding; the
    /// serial binding's lost seats are tasks on its cycle threads).
    pub lost_threads: Vec<String>,
}

/// Shutdown found a problem; every thread that ended by the deadline was
/// still joined.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    /// The pump had failed loudly before shutdown (its hook already ran).
    #[error("the host pump had failed loudly: {0}")]
    PumpFailed(PumpFailure),
    /// Shutdown's deadline passed with units in flight or fleet threads
    /// still running (a hung unit, a seat that never reports). The units
    /// and threads are named; the threads are left detached. Find the unit
    /// bodies that do not return, or raise `BootOptions::shutdown_deadline`.
    #[error("shutdown deadline of {deadline:?} passed: units still in flight {units:?}, threads still running {threads:?}; find the unit bodies that do not return")]
    Stuck {
        /// The deadline, from `close`.
        deadline: Duration,
        /// (seat, unit) in flight when the pump's drain ended.
        units: Vec<(SeatId, UnitId)>,
        /// Fleet threads still running at the deadline.
        threads: Vec<String>,
        /// The pump's counts when its drain ended (`None` if the pump
        /// thread itself did not return).
        pump: Option<PumpCounts>,
    },
    /// A fleet thread itself panicked (outside any unit: a binding bug).
    #[error(
        "fleet threads panicked outside any unit: {threads:?}; this is a binding bug, report it"
    )]
    ThreadPanicked {
        /// The threads' names.
        threads: Vec<String>,
    },
}

/// A running fleet of one binding. Dropping it shuts it down (errors are
/// logged); call [`Fleet::shutdown`] to see them. Never drop or shut down a
/// fleet from one of its own seats.
pub struct Fleet {
    pub(crate) plan: Plan,
    pub(crate) posture: Arc<PostureOwner>,
    pub(crate) waker: Arc<PostureWaker>,
    pub(crate) handle: FleetHandle,
    pub(crate) census: Vec<CensusRow>,
    pub(crate) pins: PinPlan,
    pub(crate) lost: crate::exec::LostSeats,
    pub(crate) running: Option<Running>,
    /// What the lending guard did, where the reserve is lent.
    pub(crate) lent: Option<Arc<crate::lend::LendStats>>,
}

/// The reserved cores lent to a serial fleet at the idle class
/// (`docs/decisions/0009-reserve-lent-at-idle-class.md`), as
/// [`Fleet::lent_reserve`] reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LentReserve {
    /// Times the cycle threads went back to the normal class because other
    /// processes starved them.
    pub promotions: u64,
    /// Whether they are at the normal class now (a hold in progress).
    pub promoted: bool,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("binding", &self.plan.binding)
            .field("oversubscribed", &self.plan.oversubscribed)
            .field("pins", &self.pins)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A handle to submit units with (`Clone + Send + Sync`).
    pub fn handle(&self) -> FleetHandle {
        self.handle.clone()
    }

    /// The plan the fleet runs: the one it was booted from, except that a
    /// plan lending the reserve runs unlent where the process may not take
    /// a thread back from the idle class ([`Plan::reserve_lent`] says which).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The lent reserve's guard figures; `None` where the reserve is not
    /// lent (the pinned binding, or a plan that does not lend it).
    pub fn lent_reserve(&self) -> Option<LentReserve> {
        self.lent.as_ref().map(|s| LentReserve {
            promotions: s.promotions.load(std::sync::atomic::Ordering::Relaxed),
            promoted: s.promoted.load(std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The posture owner (shared with the pump's guard).
    pub fn posture(&self) -> Arc<PostureOwner> {
        self.posture.clone()
    }

    /// The posture waker the host is registered with: a posture feeder calls
    /// `notify(seq)` / `observe(guard)` on it after it changes the posture.
    pub fn waker(&self) -> Arc<PostureWaker> {
        self.waker.clone()
    }

    /// Whether and where seats were pinned.
    pub fn pins(&self) -> &PinPlan {
        &self.pins
    }

    /// The census: the plan's projection with what boot actually did (the
    /// pump thread, each pinned seat's CPU, the binding label per row:
    /// `pinned` dedicated threads, `shared` runtimes, `logical` lanes riding
    /// another thread), the oversubscribed mark, and `lost: true` on each
    /// seat the pump retired since boot.
    pub fn census(&self) -> Vec<CensusRow> {
        let lost = self.lost.lock().clone();
        let mut rows = self.census.clone();
        for row in rows.iter_mut() {
            row.lost = lost.iter().any(|s| {
                Some(s.role) == row.role
                    && row.name == format!("{}-{}", s.role.thread_label(), s.index)
            });
        }
        rows
    }

    /// Seats lost since boot (their threads died outside a unit; the pump
    /// retired them). Empty on a healthy fleet.
    pub fn lost_seats(&self) -> Vec<fleet::pump::SeatId> {
        self.lost.lock().clone()
    }

    /// `runtime_status()` for this booted fleet (`fleet_booted: true`, the
    /// plan with its oversubscribed mark, the budget table, these census
    /// rows, and `degraded` with its cause once a lane death latched)
    /// against the detected `quota`.
    pub fn status(&self, quota: &fleet::quota::QuotaReport) -> fleet::status::RuntimeStatus {
        let census = fleet::census::Census::new();
        for row in self.census() {
            census.register(row);
        }
        let mut status = fleet::status::runtime_status(&self.plan, quota, Some(&census));
        status.degraded = self.posture.degraded();
        status
    }

    /// Closes the host (queued and held units resolve `HostClosed`; in-flight
    /// units finish and are counted), then joins every thread the fleet
    /// started and stops the ambient I/O runtime, all within
    /// `BootOptions::shutdown_deadline`.
    ///
    /// Errors: [`ShutdownError`]; every thread that ended by the deadline is
    /// joined regardless, the rest are named in [`ShutdownError::Stuck`].
    pub fn shutdown(mut self) -> Result<ShutdownReport, ShutdownError> {
        let running = self.running.take().expect("a live fleet holds its threads");
        running.stop(&self.handle)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            if let Err(e) = running.stop(&self.handle) {
                tracing::error!(%e, "fleet shutdown on drop found a problem");
            }
        }
    }
}

/// The census rows of a booted plan: the projection, the pump row, and the
/// pinned CPUs (`seat_cpus[k]` for the `k`-th seat of the layout; the
/// serial binding's first cycle thread on `serial_cpu`).
pub(crate) fn census_rows(
    plan: &Plan,
    seat_cpus: &[Option<usize>],
    serial_cpu: Option<usize>,
) -> Vec<CensusRow> {
    census_rows_cycle(plan, seat_cpus, &[serial_cpu])
}

/// [`census_rows`] with the pinned CPU of every serial cycle thread
/// (`cycle_cpus[t]` for `work-fleet-serial-{t}`).
pub(crate) fn census_rows_cycle(
    plan: &Plan,
    seat_cpus: &[Option<usize>],
    cycle_cpus: &[Option<usize>],
) -> Vec<CensusRow> {
    let mut rows = plan.census_projection();
    let layout = plan.seat_layout();
    for row in rows.iter_mut() {
        if let Some(k) = layout.seats.iter().position(|s| {
            Some(s.role) == row.role && format!("{}-{}", s.role.thread_label(), s.index) == row.name
        }) {
            row.pinned_cpu = seat_cpus.get(k).copied().flatten();
        }
        if row.role.is_none() {
            if let Some(t) = (0..layout.cycle_threads)
                .find(|t| row.thread_name == fleet::plan::serial_thread_name(*t))
            {
                row.pinned_cpu = cycle_cpus.get(t as usize).copied().flatten();
            }
        }
        if row.name == "ambient_io" && plan.binding == fleet::plan::Binding::Serial {
            // The serial binding has no ambient runtime: I/O rides the cycle
            // threads' current-thread runtimes.
            row.thread_name = fleet::plan::SERIAL_THREAD_NAME.to_string();
            row.binding = CensusBinding::Logical;
            row.sizing_rule = format!("{} (rides the cycle threads)", row.sizing_rule);
        }
    }
    rows.push(CensusRow {
        name: "pump-0".into(),
        role: None,
        count: 1,
        sizing_rule: "one pump shell thread per host".into(),
        thread_name: PUMP_THREAD_NAME.into(),
        binding: CensusBinding::Pinned,
        oversubscribed: plan.oversubscribed,
        pinned_cpu: None,
        lost: false,
    });
    if plan.reserve_lent {
        rows.push(CensusRow {
            name: "lend-guard-0".into(),
            role: None,
            count: 1,
            sizing_rule: "the lent reserve's guard: returns the cycle threads to the normal class while other work starves them (decision 0009)".into(),
            thread_name: crate::lend::GUARD_THREAD_NAME.into(),
            binding: CensusBinding::Pinned,
            oversubscribed: plan.oversubscribed,
            pinned_cpu: None,
            lost: false,
        });
    }
    rows
}

/// Spawns a named thread.
pub(crate) fn spawn_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, BootError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|source| BootError::Spawn {
            thread: name.to_string(),
            source,
        })
}
