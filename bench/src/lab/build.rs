//! From what a run measured to its report and the files beside it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fleet::census::CensusRow;
use fleet::plan::Plan;
use fleet::posture::PostureCounters;
use fleet::quota::QuotaReport;
use fleet_workloads::replay::{CycleRecord, OutcomeRow, ReplayResult};
use fleet_workloads::Corpus;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::lab::feeder::FeederLog;
use crate::lab::session::RunArtifacts;
use crate::lab::spec::{profile_name, Contender};
use crate::probe::cgroup::CgroupVersion;
use crate::probe::threads::ThreadFigures;
use crate::report::{
    CoTenantInfo, CorpusRef, CounterValue, CycleRow, LatencyRecorder, LiveLog, Machine, Metric,
    Mismatch, OutcomeCounts, PlanChange, PostureCounts, QuotaDetection, RunReport,
    SaturationFigures, ThreadCounts, Throttle, ThrottleSource, TimelineEvent,
};

/// Everything measured around a replay.
pub(crate) struct Measured<'a> {
    pub label: String,
    pub contender: Contender,
    pub plan: Option<&'a Plan>,
    pub quota: f64,
    pub detected: &'a QuotaReport,
    pub scale: f64,
    pub corpus_path: &'a Path,
    pub corpus: &'a Corpus,
    pub threads: ThreadFigures,
    pub cpu_seconds: f64,
    pub wall: Duration,
    pub feeder: FeederLog,
    pub cgroup_version: Option<CgroupVersion>,
    /// The version of the process's own cgroup when no child was made and
    /// its `cpu.stat` was sampled.
    pub own_cgroup: Option<CgroupVersion>,
    pub posture: PostureCounters,
    pub perf: BTreeMap<String, CounterValue>,
    pub perf_per_thread: BTreeMap<String, BTreeMap<String, u64>>,
    pub load_average: Option<f64>,
    /// Cores other processes kept busy during the run.
    pub other_cpus: Option<f64>,
    pub census: Option<Vec<CensusRow>>,
    /// The lent reserve's guard figures (a serial fleet lending it).
    pub lent_reserve: Option<fleet_bindings::LentReserve>,
    /// Operator retunes applied during the run, as timeline events.
    pub retunes: Vec<TimelineEvent>,
    /// Quota changes re-detection saw, and their timeline events.
    pub plan_changes: Vec<PlanChange>,
    pub quota_events: Vec<TimelineEvent>,
    /// Where cycle rows and outcomes were streamed (`run --stream`).
    pub streamed_to: Option<std::path::PathBuf>,
    /// The co-tenant's mode and what it measured.
    pub cotenant_mode: crate::lab::CoTenantMode,
    pub cotenant: crate::lab::cotenant::CoTenantFigures,
    /// Busy threads of the contention process (0: none).
    pub contend: u32,
    /// Mean time from a sim's I/O deadline to its wake-up, µs.
    pub sim_io_mean_late_us: Option<f64>,
    /// Time between cycle arrivals at scale 1, µs.
    pub interval_us: u64,
}

/// A progress bar on stderr (hidden when stderr is not a terminal; a plain
/// line is printed every quarter instead).
pub(crate) fn progress_bar(total: u64, label: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{prefix:>14} [{bar:30}] {pos}/{len} cycles {elapsed_precise} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_prefix(label.to_string());
    pb
}

/// The feeder's events and the operator's retunes in one time order (a
/// stable sort: events at the same instant keep their source order).
fn merge_timeline(
    mut feeder: Vec<TimelineEvent>,
    retunes: Vec<TimelineEvent>,
) -> Vec<TimelineEvent> {
    feeder.extend(retunes);
    feeder.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    feeder
}

/// Builds the report and its files.
/// The figures built cycle by cycle: the latency recorders, the per-cycle
/// rows and the outcome counts. A retained replay is folded in at the end;
/// a streamed one cycle by cycle as it runs, writing each row and outcome
/// to its sink instead of keeping it.
pub(crate) struct CycleStats {
    makespan: LatencyRecorder,
    ratio: LatencyRecorder,
    process_ratio: LatencyRecorder,
    bins: LatencyRecorder,
    sims: LatencyRecorder,
    last_interval: Duration,
    outcomes: OutcomeCounts,
    /// The kept rows and outcome lines (`None` when streamed).
    kept: Option<(Vec<CycleRow>, Vec<u8>)>,
    /// Where streamed rows and outcomes go: (cycles.jsonl, outcomes.jsonl).
    sink: Option<(
        Box<dyn std::io::Write + Send>,
        Box<dyn std::io::Write + Send>,
    )>,
    /// Where a streamed run's closed intervals go, one log per recorder in
    /// [`CycleStats::recorders`] order (empty when kept).
    live: Vec<LiveLog>,
    /// The first error writing to the sink (the run goes on; the report says so).
    sink_error: Option<String>,
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
    fn close_intervals(&mut self, now: Duration) {
        let mut live = std::mem::take(&mut self.live);
        if live.is_empty() {
            for r in self.recorders() {
                r.close_interval(now);
            }
        } else {
            let mut failed = None;
            for (r, log) in self.recorders().into_iter().zip(&mut live) {
                if let Err(e) = r.close_interval_into(now, log) {
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

/// Builds the report and its files. `stats`: the figures a streamed run
/// folded in as it went (`None`: fold the retained replay here).
pub(crate) fn build_report(
    m: Measured<'_>,
    replay: ReplayResult,
    stats: Option<CycleStats>,
) -> RunArtifacts {
    let mut stats = stats.unwrap_or_else(|| {
        let mut s = CycleStats::kept();
        for c in &replay.cycles {
            s.cycle(c);
        }
        for chunk in replay.outcomes.chunk_by(|a, b| a.cycle == b.cycle) {
            s.outcomes(chunk);
        }
        s
    });
    let end = Duration::from_micros(replay.wall_us);
    stats.close_intervals(end);
    if let Some(e) = &stats.sink_error {
        eprintln!("fleet-lab: warning: streaming to disk stopped early: {e}");
    }
    let CycleStats {
        makespan,
        ratio,
        process_ratio,
        bins,
        sims,
        outcomes,
        kept,
        live,
        ..
    } = stats;
    let (per_cycle, jsonl) = kept.unwrap_or_default();
    let first_mismatch = replay.first_mismatch.as_ref().map(|mm| Mismatch {
        cycle: mm.cycle as u64,
        path: mm.path as u64,
        expected: mm.expected,
        got: mm.got,
    });
    let wall_s = m.wall.as_secs_f64();
    let throttle = m.cgroup_version.or(m.own_cgroup).map(|v| Throttle {
        events: m.feeder.events,
        throttled_ms: m.feeder.throttled_us as f64 / 1e3,
        throttled_share: (m.feeder.throttled_us as f64 / 1e6 / wall_s.max(1e-9)).min(1.0),
        source: match v {
            CgroupVersion::V2 => ThrottleSource::CgroupV2,
            CgroupVersion::V1 => ThrottleSource::CgroupV1,
        },
    });
    let (profile, binding, oversubscribed) = match (m.contender, m.plan) {
        (Contender::Fleet(p), Some(plan)) => (
            profile_name(p).to_string(),
            match plan.binding {
                fleet::plan::Binding::Pinned => "pinned".to_string(),
                fleet::plan::Binding::Serial => "serial".to_string(),
            },
            plan.oversubscribed,
        ),
        _ => ("baseline".to_string(), "none".to_string(), false),
    };
    let out_of_range = makespan.out_of_range()
        + ratio.out_of_range()
        + process_ratio.out_of_range()
        + bins.out_of_range()
        + sims.out_of_range();
    let mut background = BTreeMap::new();
    let b = &replay.background;
    for (k, v) in [
        ("poolupd_submitted", b.poolupd_submitted),
        ("poolupd_completed", b.poolupd_completed),
        ("crawl_submitted", b.crawl_submitted),
        ("poolupd_refused", b.poolupd_refused),
        ("crawl_completed", b.crawl_completed),
        ("crawl_refused", b.crawl_refused),
        ("terminal", b.terminal),
    ] {
        background.insert(k.to_string(), v);
    }
    let o = &replay.overruns;
    let overruns = match m.contender {
        // The baselines' waits are not bounded: nothing was measured.
        Contender::Fleet(_) => [
            ("deadline_ms", o.deadline_ms),
            ("resolve", o.resolve),
            ("walk", o.walk),
            ("merge", o.merge),
            ("background", o.background),
            ("paths", o.paths),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        _ => BTreeMap::new(),
    };
    let quota_detection = Some(QuotaDetection {
        source: m.detected.source.name().to_string(),
        quota: m.detected.exact_cpus,
        unknown_reason: match &m.detected.source {
            fleet::quota::QuotaSource::Unknown { reason } => Some(reason.clone()),
            _ => None,
        },
        reason: m.detected.reason.clone(),
    });
    let report = RunReport {
        label: m.label,
        profile,
        binding,
        oversubscribed,
        scale: m.scale,
        cycles: replay.cycles_replayed,
        paths: replay.paths,
        outcomes,
        parity: replay.parity,
        first_mismatch,
        makespan_ms: makespan.percentiles(),
        makespan_over_lower_bound: ratio.percentiles(),
        makespan_over_process_bound: process_ratio.percentiles(),
        bin_walk_ms: bins.percentiles(),
        sim_latency_ms: sims.percentiles(),
        threads: ThreadCounts {
            at_start: m.threads.at_start as u64,
            peak: m.threads.peak as u64,
            created_during_run: m.threads.created_during_run as u64,
            peak_runnable: m.threads.peak_runnable as u64,
        },
        timer_slack_ns: m
            .threads
            .timer_slack_ns
            .iter()
            .map(|(k, v)| (*k, u64::from(*v)))
            .collect(),
        cpu_seconds: m.cpu_seconds,
        wall_seconds: wall_s,
        throttle,
        posture: PostureCounts {
            enters: m.posture.enters,
            exits: m.posture.exits,
            cordoned_ms: m.posture.cordoned_dwell_ms as f64,
            intake_suppressed: m.posture.intake_suppressions,
        },
        perf_counters: Some(m.perf),
        histograms_out_of_range: out_of_range,
        per_cycle,
        timeline: merge_timeline(
            m.feeder.timeline,
            m.retunes.into_iter().chain(m.quota_events).collect(),
        ),
        machine: Machine {
            cpus: m.detected.affinity_cpus as u64,
            quota: Some(m.quota),
            load_average: m.load_average,
            other_cpus: m.other_cpus,
        },
        corpus: CorpusRef {
            path: m.corpus_path.display().to_string(),
            version: m.corpus.header.version.to_string(),
            checksum: m.corpus.header.checksum.clone(),
        },
        census: m
            .census
            .unwrap_or_default()
            .iter()
            .map(|r| serde_json::to_value(r).expect("census rows serialize"))
            .collect(),
        perf_per_thread: m.perf_per_thread,
        lent_reserve: m.lent_reserve,
        background,
        overruns,
        quota_detection,
        plan_changes: m.plan_changes,
        rss: crate::report::RssFigures::from_series(&m.threads.rss).map(|mut r| {
            r.huge_pages_denied = crate::probe::heap::transparent_huge_pages_denied();
            r
        }),
        streamed_to: m.streamed_to.map(|p| p.display().to_string()),
        cotenant_lateness_us: m.cotenant.probe,
        reserve_task_lateness_us: m.cotenant.reserve,
        cotenant: Some(CoTenantInfo {
            mode: m.cotenant_mode,
            probe_period_us: crate::lab::cotenant::PROBE_PERIOD.as_micros() as u64,
            probe_missed_ticks: m.cotenant.probe_missed_ticks,
            reserve_burst_us: m.cotenant.reserve_burst_us,
            cpu_seconds: m.cotenant.cpu_seconds,
        }),
        saturation: replay.saturation.map(|s| SaturationFigures {
            since_cycle: u64::from(s.since_cycle),
            since_ms: s.since_ms,
            last_late_ms: s.last_late_ms,
            backlog_cycles: s.backlog_cycles,
            streak_cycles: u64::from(s.streak_cycles),
        }),
        peak_start_late_ms: replay.peak_start_late_ms,
        arrival_interval_ms: m.interval_us as f64 * m.scale / 1e3,
        contend_threads: m.contend,
        sim_io_mean_late_us: m.sim_io_mean_late_us,
    };
    let start = SystemTime::now() - m.wall;
    let recorders = [&makespan, &ratio, &process_ratio, &bins, &sims];
    let logs = if live.is_empty() {
        recorders
            .iter()
            .filter_map(|r| r.to_hdr_log(start, end).ok())
            .collect()
    } else {
        live.into_iter()
            .zip(recorders)
            .filter_map(|(log, r)| {
                let path = log.path().to_path_buf();
                log.finish(r, end)
                    .map_err(|e| {
                        eprintln!("fleet-lab: warning: closing {}: {e}", path.display());
                    })
                    .ok()
            })
            .collect()
    };
    RunArtifacts {
        report,
        logs,
        outcomes_jsonl: jsonl,
        extras: Vec::new(),
        replay,
    }
}
