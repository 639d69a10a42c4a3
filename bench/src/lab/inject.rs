//! Test-only fault injection, so the gates can be shown to fail: a host
//! wrapper that delays every cycle's hand-off, slows every unit down by a
//! factor, breaks one outcome, or refuses every background submit.

use std::sync::Arc;
use std::time::Duration;

use fleet::ledger::{BinWitness, CycleMerge};
use fleet::receipt::Receipt;
use fleet::{FailReason, PathOutcome, WorkerRole};
use fleet_workloads::corpus::{CycleCase, PathCase};
use fleet_workloads::pools::{CurrentPools, PoolSet};
use fleet_workloads::replay::host::{Merged, Solved, UnitFailure};
use fleet_workloads::replay::record::BinRecord;
use fleet_workloads::replay::units::{CycleShared, Scale};
use fleet_workloads::replay::{CycleHost, DEFAULT_UNIT_DEADLINE};

/// What to inject.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Injection {
    /// Sleep this long before handing each cycle's units to the host, ms.
    pub delay_ms: u64,
    /// Replace the first path outcome of cycle 1 with a wrong one.
    pub wrong_outcome: bool,
    /// Refuse every background submit (shows refusals are counted).
    pub refuse_background: bool,
    /// Multiply every unit's CPU and I/O time by this factor (`None`: as
    /// the corpus says). The lower bound stays the corpus's, so a 1.5×
    /// slowdown shows whether a gate notices work 50 % slower.
    pub slowdown: Option<f64>,
}

impl Injection {
    /// Whether anything is injected.
    pub fn any(&self) -> bool {
        self.delay_ms > 0 || self.wrong_outcome || self.refuse_background || self.slowdown.is_some()
    }
}

/// A host that injects faults around another.
pub struct InjectedHost {
    inner: Box<dyn CycleHost>,
    injection: Injection,
}

impl InjectedHost {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn CycleHost>, injection: Injection) -> Self {
        InjectedHost { inner, injection }
    }
}

impl InjectedHost {
    /// `scale` times the slowdown factor, if any.
    fn slowed(&self, scale: Scale) -> Scale {
        Scale(scale.0 * self.injection.slowdown.unwrap_or(1.0))
    }

    /// Sleeps the injected hand-off delay, if any.
    fn delay(&self) {
        if self.injection.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(self.injection.delay_ms));
        }
    }
}

impl CycleHost for InjectedHost {
    fn resolve(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
    ) -> Result<Arc<PoolSet>, String> {
        self.delay();
        self.inner.resolve(prev, case, self.slowed(scale))
    }

    fn solve(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
    ) -> Result<(Vec<Option<BinRecord>>, Merged), String> {
        self.solve_within(shared, witnesses, merge, DEFAULT_UNIT_DEADLINE)
            .map(Solved::into_parts)
    }

    fn resolve_within(
        &self,
        prev: Arc<PoolSet>,
        case: Arc<CycleCase>,
        scale: Scale,
        deadline: Duration,
    ) -> Result<Arc<PoolSet>, UnitFailure> {
        self.delay();
        self.inner
            .resolve_within(prev, case, self.slowed(scale), deadline)
    }

    fn solve_within(
        &self,
        shared: Arc<CycleShared>,
        witnesses: Vec<BinWitness>,
        merge: CycleMerge,
        deadline: Duration,
    ) -> Result<Solved, String> {
        let cycle = shared.case.index;
        let shared = match self.injection.slowdown {
            Some(_) => Arc::new(CycleShared {
                case: shared.case.clone(),
                pools: shared.pools.clone(),
                threshold: shared.threshold,
                scale: self.slowed(shared.scale),
                sim_deadline: shared.sim_deadline,
            }),
            None => shared,
        };
        let mut solved = self
            .inner
            .solve_within(shared, witnesses, merge, deadline)?;
        if self.injection.wrong_outcome && cycle == 1 {
            if let Some(rec) = solved.merged.as_mut() {
                if let Some((_, o)) = rec.outcomes.iter_mut().next() {
                    *o = match o {
                        PathOutcome::Suppressed => PathOutcome::Failed {
                            reason: FailReason::SimRefused,
                        },
                        _ => PathOutcome::Suppressed,
                    };
                }
            }
        }
        Ok(solved)
    }

    fn background(
        &self,
        role: WorkerRole,
        cpu_us: u64,
        pools: CurrentPools,
        probe: PathCase,
    ) -> Result<Receipt, String> {
        if self.injection.refuse_background {
            return Err(format!("{role} submit refused by the test injection"));
        }
        let cpu_us = self.slowed(Scale(1.0)).us(cpu_us);
        self.inner.background(role, cpu_us, pools, probe)
    }

    fn threads_spawned(&self) -> u64 {
        self.inner.threads_spawned()
    }
}
