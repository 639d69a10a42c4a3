//! From what a run measured to its report and the files beside it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use fleet::census::CensusRow;
use fleet::plan::Plan;
use fleet::posture::PostureCounters;
use fleet::quota::QuotaReport;
use fleet_workloads::replay::ReplayResult;
use fleet_workloads::Corpus;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::lab::cycle_stats::CycleStats;
use crate::lab::feeder::FeederLog;
use crate::lab::spec::{profile_name, Contender};
use crate::probe::cgroup::CgroupVersion;
use crate::probe::threads::ThreadFigures;
use crate::report::{
    CoTenantInfo, CorpusRef, CounterValue, ExtraFile, HdrLog, LatencyRecorder, LiveLog, Machine,
    Mismatch, PlanChange, PostureCounts, QuotaDetection, RunReport, SaturationFigures,
    ThreadCounts, Throttle, ThrottleSource, TimelineEvent,
};

/// A finished run: its report and the files that go next to it.
pub struct RunArtifacts {
    /// The report.
    pub report: RunReport,
    /// HdrHistogram interval logs.
    pub logs: Vec<HdrLog>,
    /// Produced outcomes, one JSON object per line.
    pub outcomes_jsonl: Vec<u8>,
    /// Extra files (metrics dump, …).
    pub extras: Vec<ExtraFile>,
    /// The raw replay result.
    pub replay: ReplayResult,
}

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
    pub cotenant_mode: crate::lab::cotenant::CoTenantMode,
    pub cotenant: crate::lab::cotenant::CoTenantFigures,
    /// Busy threads of the contention process (0: none).
    pub contend: u32,
    /// Their scheduling class.
    pub contend_class: crate::lab::contend::ContendClass,
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

/// Builds the report and its files. `stats`: the figures a streamed run
/// folded in as it went (`None`: fold the retained replay here).
pub(crate) fn build_report(
    m: Measured<'_>,
    replay: ReplayResult,
    stats: Option<CycleStats>,
) -> RunArtifacts {
    let end = Duration::from_micros(replay.wall_us);
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
    } = finished_stats(&replay, stats, end);
    let (per_cycle, jsonl) = kept.unwrap_or_default();
    let first_mismatch = replay.first_mismatch.as_ref().map(|mm| Mismatch {
        cycle: mm.cycle as u64,
        path: mm.path as u64,
        expected: mm.expected,
        got: mm.got,
    });
    let wall_s = m.wall.as_secs_f64();
    let m_wall = m.wall;
    let recorders = [&makespan, &ratio, &process_ratio, &bins, &sims];
    let out_of_range = recorders.iter().map(|r| r.out_of_range()).sum();
    let throttle = throttle_of(&m, wall_s);
    let (profile, binding, oversubscribed) = identity(m.contender, m.plan);
    let background = background_of(&replay.background);
    let overruns = overruns_of(m.contender, &replay.overruns);
    let quota_detection = Some(quota_detection_of(m.detected));
    let (machine, corpus, cotenant) = host_of(&m);
    let (census, rss) = census_and_rss(&m);
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
        threads: thread_counts(&m.threads),
        timer_slack_ns: m
            .threads
            .timer_slack_ns
            .iter()
            .map(|(k, v)| (*k, u64::from(*v)))
            .collect(),
        cpu_seconds: m.cpu_seconds,
        wall_seconds: wall_s,
        throttle,
        posture: posture_counts(&m.posture),
        perf_counters: Some(m.perf),
        histograms_out_of_range: out_of_range,
        per_cycle,
        timeline: merge_timeline(
            m.feeder.timeline,
            m.retunes.into_iter().chain(m.quota_events).collect(),
        ),
        machine,
        corpus,
        census,
        perf_per_thread: m.perf_per_thread,
        lent_reserve: m.lent_reserve,
        background,
        overruns,
        quota_detection,
        plan_changes: m.plan_changes,
        rss,
        streamed_to: m.streamed_to.map(|p| p.display().to_string()),
        cotenant_lateness_us: m.cotenant.probe,
        reserve_task_lateness_us: m.cotenant.reserve,
        cotenant: Some(cotenant),
        saturation: replay.saturation.map(|s| saturation_figures(&s)),
        peak_start_late_ms: replay.peak_start_late_ms,
        arrival_interval_ms: m.interval_us as f64 * m.scale / 1e3,
        contend_threads: m.contend,
        contend_class: (m.contend > 0).then_some(m.contend_class),
        sim_io_mean_late_us: m.sim_io_mean_late_us,
    };
    let logs = logs_of(live, recorders, m_wall, end);
    RunArtifacts {
        report,
        logs,
        outcomes_jsonl: jsonl,
        extras: Vec::new(),
        replay,
    }
}

/// The cycle figures with every interval closed at `end`: a streamed run's
/// `stats`, or the retained replay's folded here (`stats` `None`). A sink
/// that failed is warned about (the report says where streaming stopped).
fn finished_stats(replay: &ReplayResult, stats: Option<CycleStats>, end: Duration) -> CycleStats {
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
    stats.close_intervals(end);
    if let Some(e) = &stats.sink_error {
        eprintln!("fleet-lab: warning: streaming to disk stopped early: {e}");
    }
    stats
}

/// The census rows as JSON, and the resident-set figures.
fn census_and_rss(m: &Measured<'_>) -> (Vec<serde_json::Value>, Option<crate::report::RssFigures>) {
    let census = m
        .census
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::to_value(r).expect("census rows serialize"))
        .collect();
    let rss = crate::report::RssFigures::from_series(&m.threads.rss).map(|mut r| {
        r.huge_pages_denied = crate::probe::heap::transparent_huge_pages_denied();
        r
    });
    (census, rss)
}

fn saturation_figures(s: &fleet_workloads::replay::Saturation) -> SaturationFigures {
    SaturationFigures {
        since_cycle: u64::from(s.since_cycle),
        since_ms: s.since_ms,
        last_late_ms: s.last_late_ms,
        backlog_cycles: s.backlog_cycles,
        streak_cycles: u64::from(s.streak_cycles),
    }
}

/// The throttle figures a cgroup was read for (`None`: none was).
fn throttle_of(m: &Measured<'_>, wall_s: f64) -> Option<Throttle> {
    m.cgroup_version.or(m.own_cgroup).map(|v| Throttle {
        events: m.feeder.events,
        throttled_ms: m.feeder.throttled_us as f64 / 1e3,
        throttled_share: (m.feeder.throttled_us as f64 / 1e6 / wall_s.max(1e-9)).min(1.0),
        source: match v {
            CgroupVersion::V2 => ThrottleSource::CgroupV2,
            CgroupVersion::V1 => ThrottleSource::CgroupV1,
        },
    })
}

/// The run's profile, binding and whether its plan oversubscribed.
fn identity(contender: Contender, plan: Option<&Plan>) -> (String, String, bool) {
    match (contender, plan) {
        (Contender::Fleet(p), Some(plan)) => (
            profile_name(p).to_string(),
            match plan.binding {
                fleet::plan::Binding::Pinned => "pinned".to_string(),
                fleet::plan::Binding::Serial => "serial".to_string(),
            },
            plan.oversubscribed,
        ),
        _ => ("baseline".to_string(), "none".to_string(), false),
    }
}

/// The background work's counts by name.
fn background_of(b: &fleet_workloads::replay::BackgroundRecord) -> BTreeMap<String, u64> {
    [
        ("poolupd_submitted", b.poolupd_submitted),
        ("poolupd_completed", b.poolupd_completed),
        ("crawl_submitted", b.crawl_submitted),
        ("poolupd_refused", b.poolupd_refused),
        ("crawl_completed", b.crawl_completed),
        ("crawl_refused", b.crawl_refused),
        ("terminal", b.terminal),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The fleet's bounded waits that ran over, by name (empty for a
/// baseline: its waits are not bounded, nothing was measured).
fn overruns_of(
    contender: Contender,
    o: &fleet_workloads::replay::OverrunRecord,
) -> BTreeMap<String, u64> {
    match contender {
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
    }
}

/// How the quota was detected.
fn quota_detection_of(detected: &QuotaReport) -> QuotaDetection {
    QuotaDetection {
        source: detected.source.name().to_string(),
        quota: detected.exact_cpus,
        unknown_reason: match &detected.source {
            fleet::quota::QuotaSource::Unknown { reason } => Some(reason.clone()),
            _ => None,
        },
        reason: detected.reason.clone(),
    }
}

/// The machine, the corpus and the co-tenant's settings of the run.
fn host_of(m: &Measured<'_>) -> (Machine, CorpusRef, CoTenantInfo) {
    let machine = Machine {
        cpus: m.detected.affinity_cpus as u64,
        quota: Some(m.quota),
        load_average: m.load_average,
        other_cpus: m.other_cpus,
    };
    let corpus = CorpusRef {
        path: m.corpus_path.display().to_string(),
        version: m.corpus.header.version.to_string(),
        checksum: m.corpus.header.checksum.clone(),
    };
    let cotenant = CoTenantInfo {
        mode: m.cotenant_mode,
        probe_period_us: crate::lab::cotenant::PROBE_PERIOD.as_micros() as u64,
        probe_missed_ticks: m.cotenant.probe_missed_ticks,
        reserve_burst_us: m.cotenant.reserve_burst_us,
        cpu_seconds: m.cotenant.cpu_seconds,
    };
    (machine, corpus, cotenant)
}

fn thread_counts(t: &ThreadFigures) -> ThreadCounts {
    ThreadCounts {
        at_start: t.at_start as u64,
        peak: t.peak as u64,
        created_during_run: t.created_during_run as u64,
        peak_runnable: t.peak_runnable as u64,
    }
}

fn posture_counts(p: &PostureCounters) -> PostureCounts {
    PostureCounts {
        enters: p.enters,
        exits: p.exits,
        cordoned_ms: p.cordoned_dwell_ms as f64,
        intake_suppressed: p.intake_suppressions,
    }
}

/// The interval logs: the kept recorders' (a retained run), or each live
/// log closed with its recorder's last interval (a streamed one). A log
/// that cannot be closed is warned about and left out.
fn logs_of(
    live: Vec<LiveLog>,
    recorders: [&LatencyRecorder; 5],
    wall: Duration,
    end: Duration,
) -> Vec<HdrLog> {
    let start = SystemTime::now() - wall;
    if live.is_empty() {
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
    }
}
