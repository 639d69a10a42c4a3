//! What boot takes and how it fails: the options, the boot error, the
//! pinning plan, and the pump layout both bindings build their host over.
//! [`crate::boot`] re-exports the public items; both bindings and the
//! running fleet read them from here.

use crate::affinity::{self, AffinityError, AffinityMask, PinCores, PinDecision};
use fleet::plan::Plan;
use fleet::posture::{PostureOwner, PosturePolicy};
use fleet::pump::{HostLayout, PumpConfig};
use std::sync::Arc;

/// How to boot. Build with [`BootOptions::new`] or [`BootOptions::for_plan`]
/// and adjust the public fields.
#[derive(Debug, Clone)]
pub struct BootOptions {
    /// The process's posture owner (its guard feeds the pump; a lane death
    /// latches it).
    pub posture: Arc<PostureOwner>,
    /// Pump timing (backstop interval, ms; stall ticks K).
    pub pump: PumpConfig,
    /// Core pinning of seat threads (default `Auto`).
    pub pin_cores: PinCores,
    /// Bounded queue capacity per role, units (default 1024). A full queue
    /// refuses the unit and hands it back.
    pub queue_capacity: u32,
    /// The host's name in logs and loud failures (default `fleet`).
    pub host_name: String,
    /// How long shutdown waits, from `close`, for in-flight units to finish
    /// and every fleet thread to end (default 10 s). What is still running
    /// then is reported stuck ([`crate::ShutdownError::Stuck`]) and its
    /// threads are left detached.
    pub shutdown_deadline: std::time::Duration,
}

impl BootOptions {
    /// Options around an existing posture owner, with defaults elsewhere.
    pub fn new(posture: Arc<PostureOwner>) -> Self {
        BootOptions {
            posture,
            pump: PumpConfig::default(),
            pin_cores: PinCores::Auto,
            queue_capacity: 1024,
            host_name: "fleet".to_string(),
            shutdown_deadline: fleet::shell::DEFAULT_DRAIN_DEADLINE,
        }
    }

    /// Options with a fresh nominal posture owner (default policy, the
    /// plan's sim slot cap).
    pub fn for_plan(plan: &Plan) -> Self {
        let cap = plan.seat_layout().sim_slot_cap;
        Self::new(Arc::new(PostureOwner::new(PosturePolicy::default(), cap)))
    }
}

/// Why boot failed. Nothing is left running: every thread boot started was
/// closed and joined before the error returns.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// The Tokio runtime could not be built.
    #[error("cannot build the {which} Tokio runtime: {source}; check the process's thread limit")]
    Runtime {
        /// `ambient I/O` or `serial`.
        which: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A seat or pump thread could not be spawned.
    #[error(
        "cannot spawn thread {thread}: {source}; check the process's thread limit (ulimit -u)"
    )]
    Spawn {
        /// The thread's name.
        thread: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// `PinCores::On` but the affinity mask could not be read.
    #[error("core pinning was forced but the affinity mask is unreadable: {0}")]
    Affinity(#[from] AffinityError),
    /// The plan has no seats (an empty layout cannot host anything).
    #[error("the plan's seat layout is empty; resolve the plan with Plan::resolve")]
    EmptyLayout,
}

/// The pinning outcome boot settled on: the captured mask and the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinPlan {
    /// The mask captured at boot, before any pinning (`None` if unreadable
    /// under `Auto`/`Off`).
    pub mask: Option<AffinityMask>,
    /// Whether and why seats are pinned.
    pub decision: PinDecision,
}

impl PinPlan {
    /// The CPU for the `k`-th seat, when pinning applies.
    pub fn cpu_for(&self, k: usize) -> Option<usize> {
        match (&self.mask, self.decision.pins()) {
            (Some(m), true) => Some(m.cpu_for_seat(k)),
            _ => None,
        }
    }
}

/// Captures the mask (once, before any pinning) and decides.
pub(crate) fn pin_plan(plan: &Plan, pin: PinCores) -> Result<PinPlan, BootError> {
    let mask = match AffinityMask::capture() {
        Ok(m) => Some(m),
        Err(e) if pin == PinCores::On => return Err(e.into()),
        Err(e) => {
            tracing::warn!(%e, "affinity mask unreadable; seats are not pinned");
            None
        }
    };
    let decision = match &mask {
        Some(m) => affinity::decide(
            pin,
            m,
            affinity::host_cpu_count(),
            plan.quota_cpus,
            plan.oversubscribed,
        ),
        None => PinDecision::NoPin(affinity::PinReason::Disabled),
    };
    Ok(PinPlan { mask, decision })
}

/// The pump layout for the plan's seats: one host for the whole fleet.
pub(crate) fn host_layout(plan: &Plan, opts: &BootOptions) -> HostLayout {
    let layout = plan.seat_layout();
    let mut seats: Vec<(fleet::WorkerRole, u32)> = Vec::new();
    for s in &layout.seats {
        match seats.iter_mut().find(|(r, _)| *r == s.role) {
            Some((_, n)) => *n += 1,
            None => seats.push((s.role, 1)),
        }
    }
    HostLayout {
        host: opts.host_name.clone(),
        seats,
        queue_capacity: opts.queue_capacity,
        walk_admission: layout.walk_admission,
        sim_slot_cap: layout.sim_slot_cap,
    }
}
