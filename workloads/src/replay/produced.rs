//! What a replay produced, kept whole or streamed to the hooks, and the
//! result it becomes.

use super::parity::compare_cycle;
use super::*;

/// What the replay produced so far: kept whole, or streamed to the hooks.
pub(super) struct Produced {
    retain: bool,
    records: Vec<CycleRecord>,
    outcomes: Vec<OutcomeRow>,
    cycles: u64,
    overrun_paths: u64,
    first_mismatch: Option<Mismatch>,
}

impl Produced {
    /// Nothing produced yet; `retain`: keep every record and row (for `n`
    /// cycles).
    pub(super) fn new(retain: bool, n: usize) -> Produced {
        Produced {
            retain,
            records: Vec::with_capacity(if retain { n } else { 0 }),
            outcomes: Vec::new(),
            cycles: 0,
            overrun_paths: 0,
            first_mismatch: None,
        }
    }

    /// The replay's result: what was produced, with the run's totals.
    pub(super) fn into_result(
        self,
        paths: u64,
        background: BackgroundRecord,
        mut overruns: OverrunRecord,
        wall_us: u64,
        backlog: &saturation::SaturationDetector,
    ) -> ReplayResult {
        overruns.paths = self.overrun_paths;
        ReplayResult {
            cycles: self.records,
            outcomes: self.outcomes,
            cycles_replayed: self.cycles,
            paths,
            parity: self.first_mismatch.is_none(),
            first_mismatch: self.first_mismatch,
            background,
            overruns,
            wall_us,
            saturation: backlog.verdict(),
            peak_start_late_ms: backlog.peak_late_ms(),
        }
    }

    /// One cycle ended: parity against its golden outcomes, the hooks, and
    /// (when retaining) the record and rows.
    pub(super) fn cycle_done(
        &mut self,
        case: &CycleCase,
        record: CycleRecord,
        rows: Vec<OutcomeRow>,
        opts: &mut ReplayOptions,
    ) {
        self.cycles += 1;
        self.overrun_paths += rows
            .iter()
            .filter(|o| o.outcome == overrun_outcome())
            .count() as u64;
        if self.first_mismatch.is_none() {
            self.first_mismatch = compare_cycle(case, &rows);
        }
        if let Some(f) = opts.on_cycle_end.as_mut() {
            f(&record);
        }
        if let Some(f) = opts.on_outcomes.as_mut() {
            f(&rows);
        }
        if self.retain {
            self.records.push(record);
            self.outcomes.extend(rows);
        }
    }
}
