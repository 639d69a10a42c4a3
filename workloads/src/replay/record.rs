//! What a replay measured: one record per cycle, plus the produced outcomes.
//!
//! All durations are µs of wall time on the monotonic clock, relative to the
//! run's start unless said otherwise. Latency is measured as end − intended
//! start (the cycle's slot in the arrival schedule), so a cycle that starts
//! late because its predecessor overran is charged for the wait — no
//! coordinated-omission correction is applied on top.

use fleet::PathOutcome;
use serde::Serialize;

/// One bin's walk in one cycle.
#[derive(Debug, Clone, Serialize)]
pub struct BinRecord {
    /// Bin index, 0..6.
    pub bin: u32,
    /// Paths walked.
    pub paths: u32,
    /// Walk span, µs: from the walk's first instruction to its last outcome
    /// (includes its sim joins).
    pub walk_us: u64,
    /// Latency of each of its sims, µs: submit → receipt.
    pub sim_latency_us: Vec<u64>,
}

/// One replayed cycle.
#[derive(Debug, Clone, Serialize)]
pub struct CycleRecord {
    /// Cycle index in the corpus.
    pub cycle: u32,
    /// Intended start, µs since the run began (index × interval × scale).
    pub intended_start_us: u64,
    /// Actual start, µs since the run began.
    pub start_us: u64,
    /// End (the merge's receipt), µs since the run began.
    pub end_us: u64,
    /// The cycle's lower bound, µs: max(critical path, total CPU / the cores
    /// the plan grants the cycle's units) (`ReplayOptions::cores_granted`).
    pub lower_bound_us: u64,
    /// The cycle's lower bound over the cores the process may use, µs:
    /// max(critical path, total CPU / `ReplayOptions::cores_process`), the
    /// same for every contender on the same host.
    pub process_lower_bound_us: u64,
    /// Per-bin walks.
    pub bins: Vec<BinRecord>,
}

impl CycleRecord {
    /// End − intended start, µs.
    pub fn makespan_us(&self) -> u64 {
        self.end_us.saturating_sub(self.intended_start_us)
    }
}

/// One produced outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutcomeRow {
    /// Cycle index.
    pub cycle: u32,
    /// Path id within the cycle.
    pub path: u32,
    /// The outcome the fleet produced.
    pub outcome: PathOutcome,
}

/// The first produced outcome that differs from the golden one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// Cycle index.
    pub cycle: u32,
    /// Path id.
    pub path: u32,
    /// The golden outcome (`None`: the corpus has no such path).
    pub expected: Option<PathOutcome>,
    /// What the fleet produced (`None`: no outcome was produced).
    pub got: Option<PathOutcome>,
}

/// Background work the replay drove alongside the cycles. Every submit is
/// counted once: accepted (`*_submitted`, then completed or terminal) or
/// refused (`*_refused`).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BackgroundRecord {
    /// Pool-update units submitted (accepted by the host).
    pub poolupd_submitted: u64,
    /// Pool-update units whose receipt resolved with a value.
    pub poolupd_completed: u64,
    /// Registration-crawl units submitted.
    pub crawl_submitted: u64,
    /// Registration-crawl units whose receipt resolved with a value.
    pub crawl_completed: u64,
    /// Pool-update submits the host refused (the unit never ran).
    pub poolupd_refused: u64,
    /// Registration-crawl submits the host refused (the unit never ran; the
    /// crawl tries again on the next cycle).
    pub crawl_refused: u64,
    /// Receipts that resolved terminally (lane death, closed host).
    pub terminal: u64,
}

/// Receipt waits that passed their deadline (`DESIGN.md` §3 "Outcome
/// ledger": an overrun is a typed, counted outcome; nothing hangs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OverrunRecord {
    /// The deadline every wait had, ms.
    pub deadline_ms: u64,
    /// Resolves that overran (their cycle's paths are all `Failed(Overrun)`).
    pub resolve: u64,
    /// Walks that overran (their owed paths were settled `Failed(Overrun)`).
    pub walk: u64,
    /// Merges that overran (their cycle's outcomes are missing).
    pub merge: u64,
    /// Background units still unanswered at the end of the run.
    pub background: u64,
    /// Paths whose outcome is `Failed(Overrun)`, from any of the above or a
    /// sim past its deadline.
    pub paths: u64,
}

impl OverrunRecord {
    /// Units that overran (resolve + walk + merge + background; sims are
    /// counted in `paths`).
    pub fn units(&self) -> u64 {
        self.resolve + self.walk + self.merge + self.background
    }
}

/// Everything a replay produced.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayResult {
    /// Per-cycle records, in cycle order (empty when the replay did not
    /// retain them: `ReplayOptions::retain`).
    pub cycles: Vec<CycleRecord>,
    /// Every produced outcome, ordered by (cycle, path) (empty when not
    /// retained).
    pub outcomes: Vec<OutcomeRow>,
    /// Cycles replayed (retained or not).
    pub cycles_replayed: u64,
    /// Paths replayed.
    pub paths: u64,
    /// Whether every produced outcome equals the golden one.
    pub parity: bool,
    /// The first difference, if any.
    pub first_mismatch: Option<Mismatch>,
    /// Background units.
    pub background: BackgroundRecord,
    /// Receipt waits past their deadline.
    pub overruns: OverrunRecord,
    /// Wall time of the whole replay, µs.
    pub wall_us: u64,
    /// The run ended with a growing late-cycle backlog (see
    /// [`super::saturation`]); `None` when it kept up.
    pub saturation: Option<super::saturation::Saturation>,
    /// The most any cycle started after its intended start, ms.
    pub peak_start_late_ms: f64,
}
