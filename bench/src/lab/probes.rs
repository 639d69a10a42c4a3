//! The probes that run beside a contender for the length of its replay:
//! the co-tenant, the optional contention process, the sim I/O timer's
//! lateness, the thread monitor and the process's CPU clock. They start
//! after the contender's host (so the lab's own threads are not counted as
//! the contender's) and finish before it shuts down.

use std::sync::Arc;
use std::time::Duration;

use fleet_workloads::Corpus;

use crate::lab::contend::Contention;
use crate::lab::cotenant::{CoTenant, CoTenantFigures, ReserveTrigger};
use crate::lab::spec::{LabError, RunSpec};
use crate::probe::hostload::HostLoad;
use crate::probe::threads::{ThreadFigures, ThreadMonitor};

/// The running probes.
pub(crate) struct Probes {
    simio0: (u64, u64),
    cotenant: CoTenant,
    contention: Option<Contention>,
    spawned_before: u64,
    monitor: Option<ThreadMonitor>,
    cpu0: f64,
}

/// What the probes measured over the replay.
pub(crate) struct ProbeFigures {
    /// The co-tenant's lateness and CPU.
    pub cotenant: CoTenantFigures,
    /// Mean lateness of the sim I/O timer's wake-ups, µs (`None` if none fired).
    pub sim_io_mean_late_us: Option<f64>,
    /// Other processes' CPUs over the run (from the run's start).
    pub other_cpus: Option<f64>,
    /// The contender's threads (created during the run includes the host's
    /// own count of threads it spawned).
    pub threads: ThreadFigures,
    /// The contender's CPU seconds: the process's, less the monitor's and
    /// the co-tenant's.
    pub cpu_seconds: f64,
}

impl Probes {
    /// Starts the sim I/O timer, the co-tenant, `spec.contend` busy
    /// processes, then the thread monitor; `spawned_before` is the count of
    /// threads the contender's host has spawned so far (0 with no host).
    /// Errors: the co-tenant or the contention process cannot start
    /// ([`LabError::Harness`]).
    pub(crate) fn start(
        spec: &RunSpec,
        corpus: &Corpus,
        spawned_before: u64,
    ) -> Result<Probes, LabError> {
        fleet_workloads::simio::start();
        let simio0 = fleet_workloads::simio::lateness();
        let cotenant = start_cotenant(spec, corpus)?;
        let contention = match spec.contend {
            0 => None,
            n => Some(
                std::env::current_exe()
                    .and_then(|exe| Contention::start(&exe, n, spec.contend_class))
                    .map_err(|source| LabError::Harness {
                        what: "contention process (fleet-lab spin)",
                        source,
                    })?,
            ),
        };
        Ok(Probes {
            simio0,
            cotenant,
            contention,
            spawned_before,
            monitor: ThreadMonitor::start(Duration::from_millis(2)).ok(),
            cpu0: rusage_cpu_seconds(),
        })
    }

    /// The co-tenant's trigger for the reserve burst at each cycle start.
    pub(crate) fn trigger(&self) -> ReserveTrigger {
        self.cotenant.trigger()
    }

    /// Stops every probe and reads its figures; `spawned_now` is the count
    /// of threads the contender's host has spawned by now (0 with no host),
    /// `host_load` is the other processes' load counted from the run's
    /// start (a warning naming `label` is printed when they kept the host
    /// busy).
    pub(crate) fn finish(
        self,
        spawned_now: u64,
        host_load: Option<&HostLoad>,
        label: &str,
    ) -> ProbeFigures {
        let cotenant = self.cotenant.finish();
        let simio1 = fleet_workloads::simio::lateness();
        let sim_io_fired = simio1.1.saturating_sub(self.simio0.1);
        let sim_io_mean_late_us = (sim_io_fired > 0)
            .then(|| simio1.0.saturating_sub(self.simio0.0) as f64 / sim_io_fired as f64 / 1e3);
        if let Some(c) = self.contention {
            c.stop();
        }
        let cpu_total = rusage_cpu_seconds() - self.cpu0;
        let other_cpus = host_load.and_then(|h| h.other_cpus_since().ok());
        if let (Some(other), Some(h)) = (other_cpus, host_load) {
            if let Some(w) = crate::probe::hostload::busy_warning(label, other, h.cpus()) {
                eprintln!("fleet-lab: warning: {w}");
            }
        }
        let mut threads = self.monitor.map(|m| m.finish()).unwrap_or_default();
        // The sampler's own CPU is the lab's, not the contender's.
        let cpu_seconds = (cpu_total - threads.own_cpu_seconds - cotenant.cpu_seconds).max(0.0);
        let self_spawned = spawned_now.saturating_sub(self.spawned_before);
        threads.created_during_run = threads.created_during_run.max(self_spawned as u32);
        ProbeFigures {
            cotenant,
            sim_io_mean_late_us,
            other_cpus,
            threads,
            cpu_seconds,
        }
    }
}

/// The process's user + system CPU seconds so far.
fn rusage_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Starts the run's co-tenant; its reserve burst runs on the corpus's
/// first path over its pools.
fn start_cotenant(spec: &RunSpec, corpus: &Corpus) -> Result<CoTenant, LabError> {
    let hops = corpus
        .cycles
        .iter()
        .flat_map(|c| c.paths.first())
        .next()
        .map(|p| p.hops.clone())
        .unwrap_or_default();
    CoTenant::start(
        spec.cotenant,
        spec.scale,
        Arc::new(corpus.pools.clone()),
        hops,
    )
    .map_err(|source| LabError::Harness {
        what: "co-tenant",
        source,
    })
}
