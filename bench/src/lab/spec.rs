//! What a measured run is asked to do: the contender, the run's options
//! ([`RunSpec`]) and why a run can fail ([`LabError`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use fleet::budget::BudgetOverrides;
use fleet::plan::Profile;
use fleet::posture::PosturePolicy;
use fleet::pump::PumpConfig;
use fleet_bindings::PinCores;

use crate::probe::cgroup::CgroupError;

/// What runs the corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// The fleet under a profile (`auto`, `pinned`, `serial`).
    Fleet(Profile),
    /// The pile of pools the fleet replaces.
    PileOfPools,
    /// Plain Tokio multi-thread runtime.
    PlainTokio,
    /// A Rayon pool plus a Tokio runtime for sims.
    RayonTokio,
}

impl Contender {
    /// The default label: `fleet auto`, `pile of pools`, …
    pub fn label(&self) -> String {
        match self {
            Contender::Fleet(p) => format!("fleet {}", profile_name(*p)),
            Contender::PileOfPools => "pile of pools".into(),
            Contender::PlainTokio => "plain tokio".into(),
            Contender::RayonTokio => "rayon + tokio".into(),
        }
    }
}

pub(crate) fn profile_name(p: Profile) -> &'static str {
    match p {
        Profile::Auto => "auto",
        Profile::Pinned => "pinned",
        Profile::Serial => "serial",
    }
}

/// A mid-run quota change on the run's real cgroup: at cycle `at_cycle` the
/// quota becomes `cores`; after `cycles` more cycles it is restored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaShrink {
    /// Cycle index at which the quota shrinks.
    pub at_cycle: u32,
    /// The shrunken quota, cores.
    pub cores: f64,
    /// How many cycles the shrink lasts before the quota is restored.
    pub cycles: u32,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// What runs.
    pub contender: Contender,
    /// Label in tables and plots (default: the contender's).
    pub label: Option<String>,
    /// The corpus file (for the report's provenance).
    pub corpus_path: PathBuf,
    /// Time scale (> 0).
    pub scale: f64,
    /// Replay only the first N cycles.
    pub cycles: Option<u32>,
    /// The quota the fleet plans for, cores (default: detected).
    pub quota: Option<f64>,
    /// Run inside a real child cgroup with this CPU quota, cores.
    pub cgroup_quota: Option<f64>,
    /// Shrink the real cgroup's quota mid-run.
    pub quota_shrinks: Vec<QuotaShrink>,
    /// Core pinning of seat threads.
    pub pin_cores: PinCores,
    /// Posture policy at boot.
    pub posture: PosturePolicy,
    /// Pump timing.
    pub pump: PumpConfig,
    /// The config's `[budget]` overrides (whole cores, sim seats), applied to
    /// a fleet contender's plan as `fleet-lab plan` applies them; the
    /// baselines size themselves.
    pub budget: BudgetOverrides,
    /// Throttle sampling period, ms.
    pub sample_period_ms: u64,
    /// Registration-crawl units per cycle (0: none).
    pub crawl_units_per_cycle: u32,
    /// The bound on every receipt wait of the replay; `None`: derived from
    /// the cycle budget (`fleet_workloads::replay::unit_deadline`).
    pub unit_deadline: Option<Duration>,
    /// Re-detect the quota this often while a fleet runs (`None`: never);
    /// a change re-plans the fleet from the next cycle boundary.
    pub quota_watch: Option<Duration>,
    /// Stream each cycle's row and outcomes to `DIR/cycles.jsonl` and
    /// `DIR/outcomes.jsonl`, and the latency intervals to `DIR/<metric>.hlog`
    /// ([`crate::report::LiveLog`]), as the run goes instead of keeping them
    /// (a long soak's memory stays flat); the report's `per_cycle` is then
    /// empty.
    pub stream_to: Option<PathBuf>,
    /// After each cordon, once its backlog has drained, hand the allocator's
    /// free memory back to the OS ([`crate::probe::heap`]; a fleet run
    /// only: the baselines have no cordon).
    pub release_heap: bool,
    /// The host's own work beside the contender ([`crate::lab::cotenant`]).
    pub cotenant: crate::lab::CoTenantMode,
    /// Busy threads in a separate process for the run (0: none;
    /// [`crate::lab::contend`]).
    pub contend: u32,
    /// The contention threads' scheduling class.
    pub contend_class: crate::lab::contend::ContendClass,
    /// Time between cycle arrivals at scale 1, µs (`None`: the corpus's).
    pub interval_us: Option<u64>,
    /// Let a serial fleet lend its reserved cores at the idle class where
    /// the quota cannot throttle the process ([`fleet::plan::Plan::lend_reserve`];
    /// default on).
    pub lend_reserve: bool,
    /// Show progress on stderr.
    pub progress: bool,
    /// Sample the run with pprof and write a flamegraph SVG here.
    pub flamegraph: Option<PathBuf>,
    /// Test-only fault injection (shows the gates can fail).
    pub injection: crate::lab::Injection,
    /// Serve the Prometheus scrape here while the run lasts (`GET /metrics`).
    pub metrics_addr: Option<SocketAddr>,
    /// Serve the posture operator channel here while the run lasts.
    pub operator_addr: Option<SocketAddr>,
}

impl RunSpec {
    /// Defaults for a contender over a corpus at a scale.
    pub fn new(contender: Contender, corpus_path: PathBuf, scale: f64) -> Self {
        RunSpec {
            contender,
            label: None,
            corpus_path,
            scale,
            cycles: None,
            quota: None,
            cgroup_quota: None,
            quota_shrinks: Vec::new(),
            pin_cores: PinCores::Auto,
            posture: PosturePolicy::default(),
            pump: PumpConfig::default(),
            budget: BudgetOverrides::default(),
            sample_period_ms: 100,
            crawl_units_per_cycle: 4,
            unit_deadline: None,
            quota_watch: Some(fleet::quota::DEFAULT_WATCH_PERIOD),
            stream_to: None,
            release_heap: true,
            cotenant: crate::lab::CoTenantMode::On,
            contend: 0,
            contend_class: Default::default(),
            interval_us: None,
            lend_reserve: true,
            progress: false,
            flamegraph: None,
            metrics_addr: None,
            operator_addr: None,
            injection: Default::default(),
        }
    }
}

/// Why a run could not start or finish. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The scale is not a positive finite number.
    #[error("--scale {0} is invalid: give a positive number (1.0 is the live bot's timing, 0.1 runs ten times faster)")]
    BadScale(f64),
    /// The plan refused the quota.
    #[error(transparent)]
    Plan(#[from] fleet::plan::PlanError),
    /// The plan refused the quota detected inside the run's cgroup (the
    /// cgroup has been left and removed).
    #[error("inside the run's cgroup the quota is {cores} cores and the plan refused it: {source}; or pass --quota to plan for more than the kernel grants")]
    CgroupPlan {
        /// The quota detected inside the cgroup, cores.
        cores: f64,
        /// The plan's refusal.
        #[source]
        source: fleet::plan::PlanError,
    },
    /// The fleet could not boot.
    #[error(transparent)]
    Boot(#[from] fleet_bindings::BootError),
    /// A real cgroup could not be made or driven.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// A baseline's pools could not be built.
    #[error("cannot build the {which} baseline: {source}")]
    Baseline {
        /// Which baseline.
        which: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The replay stopped.
    #[error(transparent)]
    Replay(#[from] fleet_workloads::replay::ReplayError),
    /// The fleet did not shut down cleanly.
    #[error("fleet shutdown: {0}")]
    Shutdown(String),
    /// The metrics endpoint or operator channel could not start.
    #[error("{0}")]
    Ops(String),
    /// The stream directory or its files could not be created.
    #[error("--stream {path}: {source}; give a writable directory")]
    Stream {
        /// The directory or file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The co-tenant or the contention process could not start.
    #[error("cannot start the {what}: {source}")]
    Harness {
        /// What could not start.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The flamegraph could not be written.
    #[error("flamegraph {path}: {reason}")]
    Flamegraph {
        /// The SVG path.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}
