//! The figures a run builds cycle by cycle: the latency recorders, the
//! per-cycle rows and the outcome counts, kept in memory or streamed to
//! disk as the run goes (the report's live logs and JSON lines).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fleet_workloads::replay::{CycleRecord, OutcomeRow};

use crate::report::{CycleRow, LatencyRecorder, LiveLog, Metric, OutcomeCounts};

/// The figures built cycle by cycle: the latency recorders, the per-cycle
/// rows and the outcome counts. A retained replay is folded in at the end;
/// a streamed one cycle by cycle as it runs, writing each row and outcome
/// to its sink instead of keeping it.
pub(crate) struct CycleStats {
    pub(crate) makespan: LatencyRecorder,
    pub(crate) ratio: LatencyRecorder,
    pub(crate) process_ratio: LatencyRecorder,
    pub(crate) bins: LatencyRecorder,
    pub(crate) sims: LatencyRecorder,
    pub(crate) last_interval: Duration,
    pub(crate) outcomes: OutcomeCounts,
    /// The kept rows and outcome lines (`None` when streamed).
    pub(crate) kept: Option<(Vec<CycleRow>, Vec<u8>)>,
    /// Where streamed rows and outcomes go: (cycles.jsonl, outcomes.jsonl).
    pub(crate) sink: Option<(
        Box<dyn std::io::Write + Send>,
        Box<dyn std::io::Write + Send>,
    )>,
    /// Where a streamed run's closed intervals go, one log per recorder in
    /// [`CycleStats::recorders`] order (empty when kept).
    pub(crate) live: Vec<LiveLog>,
    /// The first error writing to the sink (the run goes on; the report says so).
    pub(crate) sink_error: Option<String>,
}

impl CycleStats {
    /// Figures that keep every row (the report's `per_cycle`).
    pub(crate) fn kept() -> Self {
        Self::with(Some((Vec::new(), Vec::new())), None)
    }

    /// Figures that write each row and outcome as a JSON line to `cycles`
    /// and `outcomes`, each closed latency interval to its metric's log in
    /// `dir` (`makespan.hlog`, …; see [`LiveLog`]), and keep only the
    /// histograms and counts.
    ///
    /// Errors: the I/O error creating a log, with its path.
    pub(crate) fn streamed(
        cycles: Box<dyn std::io::Write + Send>,
        outcomes: Box<dyn std::io::Write + Send>,
        dir: &Path,
    ) -> Result<Self, (std::path::PathBuf, std::io::Error)> {
        let mut stats = Self::with(None, Some((cycles, outcomes)));
        let start = SystemTime::now();
        for metric in stats.recorders().map(|r| r.metric()) {
            let log = LiveLog::create(dir, metric, start)
                .map_err(|e| (dir.join(metric.file_name()), e))?;
            stats.live.push(log);
        }
        Ok(stats)
    }

    fn with(
        kept: Option<(Vec<CycleRow>, Vec<u8>)>,
        sink: Option<(
            Box<dyn std::io::Write + Send>,
            Box<dyn std::io::Write + Send>,
        )>,
    ) -> Self {
        CycleStats {
            makespan: LatencyRecorder::new(Metric::Makespan),
            ratio: LatencyRecorder::new(Metric::MakespanOverLowerBound),
            process_ratio: LatencyRecorder::new(Metric::MakespanOverProcessBound),
            bins: LatencyRecorder::new(Metric::BinWalk),
            sims: LatencyRecorder::new(Metric::SimLatency),
            last_interval: Duration::ZERO,
            outcomes: OutcomeCounts::default(),
            kept,
            sink,
            live: Vec::new(),
            sink_error: None,
        }
    }

    /// Folds one cycle in.
    pub(crate) fn cycle(&mut self, c: &CycleRecord) {
        // Latency is end − intended start, recorded as measured: no
        // coordinated-omission correction on top.
        self.makespan.record_ticks(c.makespan_us());
        self.ratio
            .record_ratio(c.makespan_us() as f64 / c.lower_bound_us.max(1) as f64);
        self.process_ratio
            .record_ratio(c.makespan_us() as f64 / c.process_lower_bound_us.max(1) as f64);
        for b in &c.bins {
            self.bins.record_ticks(b.walk_us);
            for s in &b.sim_latency_us {
                self.sims.record_ticks(*s);
            }
        }
        // One interval per second of run time in the logs.
        let now = Duration::from_micros(c.end_us);
        if now.saturating_sub(self.last_interval) >= Duration::from_secs(1) {
            self.close_intervals(now);
            self.last_interval = now;
        }
        let row = CycleRow {
            cycle: c.cycle as u64,
            intended_start_ms: c.intended_start_us as f64 / 1e3,
            makespan_ms: c.makespan_us() as f64 / 1e3,
            lower_bound_ms: c.lower_bound_us as f64 / 1e3,
            process_lower_bound_ms: c.process_lower_bound_us as f64 / 1e3,
            start_late_ms: c.start_us.saturating_sub(c.intended_start_us) as f64 / 1e3,
            bins_walk_ms: c.bins.iter().map(|b| b.walk_us as f64 / 1e3).collect(),
        };
        if let Some((rows, _)) = self.kept.as_mut() {
            rows.push(row);
        } else if let Some((cycles, _)) = self.sink.as_mut() {
            let written = serde_json::to_writer(&mut *cycles, &row)
                .map_err(|e| e.to_string())
                .and_then(|()| cycles.write_all(b"\n").map_err(|e| e.to_string()))
                .and_then(|()| cycles.flush().map_err(|e| e.to_string()));
            if let Err(e) = written {
                self.sink_error.get_or_insert(e);
            }
        }
    }

    /// Folds one cycle's outcomes in.
    pub(crate) fn outcomes(&mut self, rows: &[OutcomeRow]) {
        let mut line = Vec::new();
        for row in rows {
            self.outcomes.add(&row.outcome);
            serde_json::to_writer(&mut line, row).expect("outcome rows serialize");
            line.push(b'\n');
        }
        if let Some((_, jsonl)) = self.kept.as_mut() {
            jsonl.extend(line);
        } else if let Some((_, out)) = self.sink.as_mut() {
            if let Err(e) = out.write_all(&line).and_then(|()| out.flush()) {
                self.sink_error.get_or_insert(e.to_string());
            }
        }
    }

    /// Closes every recorder's interval at `now`: into its live log when
    /// streamed (a write error is kept for the report), else kept.
    pub(crate) fn close_intervals(&mut self, now: Duration) {
        let mut live = std::mem::take(&mut self.live);
        if live.is_empty() {
            for r in self.recorders() {
                r.close_interval(now);
            }
        } else {
            let mut failed = None;
            for (r, log) in self.recorders().into_iter().zip(&mut live) {
                if let Err(e) = log.close_from(r, now) {
                    failed.get_or_insert_with(|| format!("{}: {e}", log.path().display()));
                }
            }
            if let Some(e) = failed {
                self.sink_error.get_or_insert(e);
            }
        }
        self.live = live;
    }

    fn recorders(&mut self) -> [&mut LatencyRecorder; 5] {
        [
            &mut self.makespan,
            &mut self.ratio,
            &mut self.process_ratio,
            &mut self.bins,
            &mut self.sims,
        ]
    }
}
