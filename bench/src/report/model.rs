//! The run report: what one replay of the corpus measured, as data.
//!
//! [`RunReport`] is written as `report.json` next to `report.html` and the
//! HdrHistogram logs (`DESIGN.md` §6: "a report (table on the terminal; JSON;
//! an HTML page with plots; histograms in HdrHistogram's log format)"). Its
//! keys are snake_case and stable: CI gates and scripts read them by name, so
//! renaming a field is a breaking change. Optional parts are written as
//! `null`, never left out, so every key is always present.
//!
//! Units are in the field names: `_ms` is milliseconds, `_seconds` seconds,
//! `quota` cores; ratios have no unit.

use std::collections::BTreeMap;

use fleet::PathOutcome;
use serde::{Deserialize, Serialize};

use super::timeline::TimelineEvent;

/// One replay of the corpus under one profile, as measured by the driver.
///
/// Filled by the replay driver (or a baseline), rendered by
/// [`crate::report::summary`] and [`crate::report::html`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Free text naming the run in tables and legends, e.g. `"fleet auto"` or
    /// `"pile of pools"`.
    pub label: String,
    /// The profile asked for: `auto`, `pinned` or `serial` (issue 5), or a
    /// baseline's name.
    pub profile: String,
    /// The binding the profile resolved to (`pinned` or `serial`), or the
    /// baseline's name.
    pub binding: String,
    /// True when the plan grants more seats than the quota's cores (the
    /// forced-`pinned` CI profile B, `DESIGN.md` §6).
    pub oversubscribed: bool,
    /// The time scale: CPU and I/O durations are multiplied by it (`DESIGN.md`
    /// §5). Always `> 0`.
    pub scale: f64,
    /// Cycles replayed.
    pub cycles: u64,
    /// Paths replayed over all cycles.
    pub paths: u64,
    /// How many paths ended in each outcome kind.
    pub outcomes: OutcomeCounts,
    /// True when every produced outcome equals the golden one.
    pub parity: bool,
    /// The first produced outcome that differs from the golden one; `null`
    /// when `parity` is true.
    pub first_mismatch: Option<Mismatch>,
    /// Cycle makespan (end − intended start), milliseconds.
    pub makespan_ms: Percentiles,
    /// Cycle makespan divided by the cycle's plan-based lower bound (the
    /// larger of its critical path and its total CPU over the cores the plan
    /// grants the cycle's units: 1 for the serial binding); `≥ 1` for a
    /// sound bound. The CI profiles A and B gate this one.
    pub makespan_over_lower_bound: Percentiles,
    /// Cycle makespan divided by the cycle's lower bound on the cores the
    /// process may use (quota and affinity): the same bound for every
    /// contender on the same host, so the one to compare contenders by.
    /// All zero in older reports.
    #[serde(default)]
    pub makespan_over_process_bound: Percentiles,
    /// One bin's solver walk, milliseconds.
    pub bin_walk_ms: Percentiles,
    /// One simulation, submit to result, milliseconds.
    pub sim_latency_ms: Percentiles,
    /// Thread counts of the process.
    pub threads: ThreadCounts,
    /// Timer slack of the run's threads, the lab's own left out: slack in
    /// ns → threads seen with it (`/proc/self/task/*/timerslack_ns`, read
    /// once per thread when the sampler first sees it). The kernel's
    /// default is 50,000 ns; empty where it could not be read.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub timer_slack_ns: std::collections::BTreeMap<u64, u64>,
    /// CPU time of the process during the run (user + system), seconds.
    pub cpu_seconds: f64,
    /// Wall-clock time of the run, seconds.
    pub wall_seconds: f64,
    /// CPU throttling seen during the run; `null` where nothing could be read.
    pub throttle: Option<Throttle>,
    /// Posture counters (`DESIGN.md` §3 "Posture").
    pub posture: PostureCounts,
    /// Perf counters by name (e.g. `context_switches`); each is a value or
    /// the reason it was skipped. `null` when counters were not asked for.
    pub perf_counters: Option<BTreeMap<String, CounterValue>>,
    /// Values recorded above the histograms' range, over all metrics. Such a
    /// value is counted here and never clamped (issue 6); a gate fails on any.
    pub histograms_out_of_range: u64,
    /// One row per cycle, in cycle order.
    pub per_cycle: Vec<CycleRow>,
    /// Posture, throttle and retune events in time order.
    pub timeline: Vec<TimelineEvent>,
    /// The machine the run used.
    pub machine: Machine,
    /// The corpus replayed.
    pub corpus: CorpusRef,
    /// The fleet's census at the end of the run (seat rows with their thread
    /// names, binding labels and pins); empty for the baselines.
    #[serde(default)]
    pub census: Vec<serde_json::Value>,
    /// Where a serial fleet lent its reserved cores at the idle class
    /// (`docs/decisions/0009-reserve-lent-at-idle-class.md`): how often its
    /// guard took the cycle threads back to the normal class because other
    /// processes starved them; `None` otherwise.
    #[serde(default)]
    pub lent_reserve: Option<fleet_bindings::LentReserve>,
    /// Software perf counters per fleet seat thread (`name (tid)` → counter →
    /// value: context switches, CPU migrations, task clock in ns); empty for
    /// the baselines or where perf events are not available.
    #[serde(default)]
    pub perf_per_thread: BTreeMap<String, BTreeMap<String, u64>>,
    /// Background units driven alongside the cycles (pool updates, the
    /// registration crawl): `poolupd_submitted`, `poolupd_completed`,
    /// `poolupd_refused`, `crawl_submitted`, `crawl_completed`,
    /// `crawl_refused`, `terminal`. A refused submit never ran and is
    /// counted under its kind's `_refused`, never dropped.
    #[serde(default)]
    pub background: BTreeMap<String, u64>,
    /// Receipt waits that passed their deadline (`DESIGN.md` §3 "Outcome
    /// ledger"): `deadline_ms` (the bound every wait had), then units that
    /// overran by kind (`resolve`, `walk`, `merge`, `background`) and
    /// `paths`, the paths whose outcome is `Failed(Overrun)` (a sim past its
    /// deadline fails its path). Empty for a run that measured none (older
    /// reports, the baselines).
    #[serde(default)]
    pub overruns: BTreeMap<String, u64>,
    /// How the CPU quota was detected: `null` in older reports.
    #[serde(default)]
    pub quota_detection: Option<QuotaDetection>,
    /// Quota changes re-detection saw while the run lasted, in time order,
    /// each with the re-derived plan's bounds or why the re-plan was refused
    /// (`DESIGN.md` §3 "Quota detection"); empty when the quota held still.
    #[serde(default)]
    pub plan_changes: Vec<PlanChange>,
    /// The process's resident set size over the run; `null` where it could
    /// not be read (and in older reports).
    #[serde(default)]
    pub rss: Option<RssFigures>,
    /// Where the cycle rows and outcomes were streamed instead of being kept
    /// (`run --stream DIR`): `per_cycle` is then empty and the rows are in
    /// `DIR/cycles.jsonl`, the outcomes in `DIR/outcomes.jsonl`; `null` when
    /// everything is in this report.
    #[serde(default)]
    pub streamed_to: Option<String>,
    /// How late the co-tenant's 1 ms probe woke, µs (the host's own
    /// latency-critical work, `crate::lab::cotenant`); `null` with the
    /// co-tenant off and in older reports.
    #[serde(default)]
    pub cotenant_lateness_us: Option<crate::lab::Lateness>,
    /// How late the co-tenant's reserve bursts completed (completion −
    /// cycle start − the burst's duration alone), µs; `null` unless the
    /// co-tenant ran with its reserve load (`--cotenant on`).
    #[serde(default)]
    pub reserve_task_lateness_us: Option<crate::lab::Lateness>,
    /// How the co-tenant ran; `null` in older reports.
    #[serde(default)]
    pub cotenant: Option<CoTenantInfo>,
    /// Set when the run ended with a growing late-cycle backlog (the host
    /// could not keep up); `null` when it kept up. A gate fails on it.
    #[serde(default)]
    pub saturation: Option<SaturationFigures>,
    /// The most any cycle started after its intended start, ms.
    #[serde(default)]
    pub peak_start_late_ms: f64,
    /// Time between cycle arrivals in this run (scaled), ms; 0 in older
    /// reports.
    #[serde(default)]
    pub arrival_interval_ms: f64,
    /// Busy threads a separate process kept running for the run
    /// (`--contend`); 0 for none.
    #[serde(default)]
    pub contend_threads: u32,
    /// Their scheduling class (`--contend-class`); `null` without
    /// contention and in older reports.
    #[serde(default)]
    pub contend_class: Option<crate::lab::contend::ContendClass>,
    /// Mean time between a sim's I/O deadline and the shared timer waking
    /// it, µs (the I/O resolution every contender got); `null` when no sim
    /// waited, and in older reports.
    #[serde(default)]
    pub sim_io_mean_late_us: Option<f64>,
}

/// How the co-tenant ran (`crate::lab::cotenant`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoTenantInfo {
    /// `on` (probe and reserve load), `probe` or `off`.
    pub mode: crate::lab::CoTenantMode,
    /// The probe's period, µs.
    pub probe_period_us: u64,
    /// Probe ticks a wake more than a period late stood for; each is in
    /// `cotenant_lateness_us` with the lateness it would have had.
    pub probe_missed_ticks: u64,
    /// CPU of one reserve burst, µs (0 without the reserve load).
    pub reserve_burst_us: u64,
    /// CPU the co-tenant used, seconds (left out of `cpu_seconds`).
    pub cpu_seconds: f64,
}

/// A saturated run: its late-cycle backlog kept growing to the end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SaturationFigures {
    /// The first cycle of the final late streak.
    pub since_cycle: u64,
    /// That cycle's intended start, ms since the run began.
    pub since_ms: f64,
    /// How late the last cycle started, ms.
    pub last_late_ms: f64,
    /// The last cycle's lateness over the arrival interval, cycles.
    pub backlog_cycles: f64,
    /// Cycles in the final late streak.
    pub streak_cycles: u64,
}

/// The resident set size over a run (sampled about once a second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RssFigures {
    /// At the run's start, MB (10^6 bytes).
    pub start_mb: f64,
    /// At the run's end, MB.
    pub end_mb: f64,
    /// The largest sample, MB.
    pub peak_mb: f64,
    /// Least-squares slope of the samples, KB (10^3 bytes) per minute: the
    /// steady growth a long run would show; `null` with fewer than two
    /// samples.
    pub growth_kb_per_min: Option<f64>,
    /// The samples: `[seconds since the run started, MB]`, about one a
    /// second, evenly thinned past
    /// [`RSS_KEPT`](crate::probe::rss::RSS_KEPT) (see
    /// [`RssSeries`](crate::probe::rss::RssSeries)).
    pub samples: Vec<[f64; 2]>,
    /// Whether transparent huge pages were off for the process
    /// (`fleet-lab` turns them off unless `--allow-thp`:
    /// [`crate::probe::heap::deny_transparent_huge_pages`]); `null` where
    /// unknown or in reports written before it was recorded.
    #[serde(default)]
    pub huge_pages_denied: Option<bool>,
}

impl RssFigures {
    /// The figures of a sampled run's bounded series: its kept samples,
    /// with the exact peak even when it fell between them; `None` when
    /// there are none.
    pub fn from_series(series: &crate::probe::rss::RssSeries) -> Option<Self> {
        let mut figures = Self::from_kib_samples(&series.samples())?;
        if let Some((_, kib)) = series.peak() {
            figures.peak_mb = figures.peak_mb.max(kib as f64 * 1024.0 / 1e6);
        }
        Some(figures)
    }

    /// The figures of `(seconds, KiB)` samples; `None` when there are none.
    pub fn from_kib_samples(samples: &[(f64, u64)]) -> Option<Self> {
        let mb = |kib: u64| kib as f64 * 1024.0 / 1e6;
        let (first, last) = (samples.first()?, samples.last()?);
        let n = samples.len() as f64;
        let growth_kb_per_min = (samples.len() >= 2).then(|| {
            let mean_t = samples.iter().map(|(t, _)| t).sum::<f64>() / n;
            let mean_m = samples.iter().map(|(_, k)| mb(*k)).sum::<f64>() / n;
            let (mut num, mut den) = (0.0, 0.0);
            for (t, k) in samples {
                num += (t - mean_t) * (mb(*k) - mean_m);
                den += (t - mean_t) * (t - mean_t);
            }
            // MB per second → KB per minute.
            if den > 0.0 {
                num / den * 1e3 * 60.0
            } else {
                0.0
            }
        });
        Some(RssFigures {
            start_mb: mb(first.1),
            end_mb: mb(last.1),
            peak_mb: samples.iter().map(|(_, k)| mb(*k)).fold(0.0, f64::max),
            growth_kb_per_min,
            samples: samples.iter().map(|(t, k)| [*t, mb(*k)]).collect(),
            huge_pages_denied: None,
        })
    }
}

/// One quota change seen at run time and what the fleet made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanChange {
    /// When re-detection saw it, milliseconds since the run started.
    pub t_ms: f64,
    /// The effective quota before, cores.
    pub from_cpus: f64,
    /// The effective quota now, cores.
    pub to_cpus: f64,
    /// The re-derived plan's binding (the running one is kept); `null` when
    /// the re-plan was refused.
    pub binding: Option<String>,
    /// The re-derived plan is oversubscribed (shares above ⌊Q⌋).
    pub oversubscribed: bool,
    /// Walk admission S before and after; equal when refused.
    pub walk_admission: [u32; 2],
    /// The solver share S of the re-derived budget table, cores; `null` when refused.
    pub solver_cpus: Option<u32>,
    /// The cycle at whose start the new bounds took effect (the next epoch
    /// boundary); `null` when refused or the run ended first.
    pub applied_at_cycle: Option<u64>,
    /// Why the re-plan was refused (e.g. below the host floor), else `null`.
    pub refused: Option<String>,
}

/// How the CPU quota was detected at the run's start (`DESIGN.md` §3 "Quota
/// detection"). "No limit" and "quota unknown" are distinct: only the
/// second says the plan may be for more cores than the process has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaDetection {
    /// `cgroup_v2`, `cgroup_v1`, `affinity` (no limit) or `unknown`.
    pub source: String,
    /// The cgroup quota, cores (exact); `null` when none limits or it is unknown.
    pub quota: Option<f64>,
    /// Why the quota is unknown (what to check); `null` unless `source` is
    /// `unknown`.
    pub unknown_reason: Option<String>,
    /// What detection read and why this source won.
    pub reason: String,
}

/// How many paths ended in each outcome kind ([`PathOutcome::kind`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    /// Paths with outcome `solved`.
    pub solved: u64,
    /// Paths with outcome `suppressed`.
    pub suppressed: u64,
    /// Paths with outcome `failed`.
    pub failed: u64,
}

impl OutcomeCounts {
    /// Counts one outcome into its kind.
    pub fn add(&mut self, outcome: &PathOutcome) {
        match outcome {
            PathOutcome::Solved { .. } => self.solved += 1,
            PathOutcome::Suppressed => self.suppressed += 1,
            PathOutcome::Failed { .. } => self.failed += 1,
        }
    }

    /// All paths counted.
    pub fn total(&self) -> u64 {
        self.solved + self.suppressed + self.failed
    }
}

/// The first path whose produced outcome differs from the golden one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Cycle index in the corpus (0-based).
    pub cycle: u64,
    /// Path index within the cycle (0-based).
    pub path: u64,
    /// The golden outcome (`null`: the corpus has no such path).
    pub expected: Option<PathOutcome>,
    /// The outcome the run produced (`null`: the run produced none).
    pub got: Option<PathOutcome>,
}

/// Summary statistics of one latency (or ratio) metric.
///
/// `p50`..`p99` and `mean` come from an HdrHistogram with 3 significant
/// digits (relative error ≤ 0.1 %) over the in-range values; `max` is the
/// exact largest value seen, out-of-range values included; `count` is the
/// number of in-range values. All zero when nothing was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value seen.
    pub max: f64,
    /// Arithmetic mean of the in-range values.
    pub mean: f64,
    /// Number of in-range values.
    pub count: u64,
}

/// Thread counts of the process (from `/proc/self/task` or equivalent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCounts {
    /// Threads alive when the run started.
    pub at_start: u64,
    /// Most threads alive at once during the run.
    pub peak: u64,
    /// Threads created while the run lasted (0 for the fleet, issue 6).
    pub created_during_run: u64,
    /// Most threads runnable at once (state `R`), sampled during the run.
    pub peak_runnable: u64,
}

/// Where throttle figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleSource {
    /// A cgroup v2 `cpu.stat` (`nr_throttled`, `throttled_usec`).
    CgroupV2,
    /// A cgroup v1 `cpu.stat` (`nr_throttled`, `throttled_time` in ns).
    CgroupV1,
    /// Throttle events injected by a test or a simulated quota, not the kernel.
    Injected,
}

impl ThrottleSource {
    /// The snake_case name used in JSON and on the page.
    pub const fn as_str(self) -> &'static str {
        match self {
            ThrottleSource::CgroupV2 => "cgroup_v2",
            ThrottleSource::CgroupV1 => "cgroup_v1",
            ThrottleSource::Injected => "injected",
        }
    }
}

/// CPU throttling seen during the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throttle {
    /// Throttled periods (`nr_throttled` delta over the run).
    pub events: u64,
    /// Time throttled, milliseconds.
    pub throttled_ms: f64,
    /// `throttled_ms` over the run's wall time, in `[0, 1]`.
    pub throttled_share: f64,
    /// Where the figures came from.
    pub source: ThrottleSource,
}

/// Posture counters over the run (`DESIGN.md` §3 "Posture").
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PostureCounts {
    /// Times the posture entered cordon.
    pub enters: u64,
    /// Times the posture left cordon.
    pub exits: u64,
    /// Time spent cordoned, milliseconds.
    pub cordoned_ms: f64,
    /// Units whose intake was suppressed (floored or held) while cordoned.
    pub intake_suppressed: u64,
}

/// One perf counter's reading: a value, or why it was skipped.
///
/// JSON: a bare number, or `{"skipped": "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CounterValue {
    /// The counter's value over the run (events, or ns for `task_clock`).
    Value(u64),
    /// The counter could not be read, e.g. `"not supported"` for hardware
    /// events on a host without a PMU (issue 7).
    Skipped {
        /// The reason, as the kernel or library gave it.
        skipped: String,
    },
}

/// One cycle's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleRow {
    /// Cycle index in the corpus (0-based).
    pub cycle: u64,
    /// When the cycle was meant to start, milliseconds since the run started.
    pub intended_start_ms: f64,
    /// End − intended start, milliseconds.
    pub makespan_ms: f64,
    /// The cycle's lower bound (see [`RunReport::makespan_over_lower_bound`]),
    /// milliseconds.
    pub lower_bound_ms: f64,
    /// The cycle's lower bound on the process's cores (see
    /// [`RunReport::makespan_over_process_bound`]), milliseconds; 0 in older
    /// reports.
    #[serde(default)]
    pub process_lower_bound_ms: f64,
    /// How late the cycle started (actual − intended start), milliseconds:
    /// the backlog it inherited; 0 in older reports.
    #[serde(default)]
    pub start_late_ms: f64,
    /// Each bin's walk time, milliseconds, indexed by bin (6 bins at scale 1,
    /// `DESIGN.md` §5).
    pub bins_walk_ms: Vec<f64>,
}

/// The machine a run used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Online CPUs of the host.
    pub cpus: u64,
    /// The CPU quota the plan was derived from, cores; `null` when unlimited.
    pub quota: Option<f64>,
    /// The host's 1-minute load average when the run started (`null` where
    /// unknown). Above the CPU count, latency figures reflect other work too.
    #[serde(default)]
    pub load_average: Option<f64>,
    /// Cores other processes kept busy on average on this process's CPUs
    /// while the run lasted (the CPUs' busy time minus the run's own CPU
    /// time, over the wall time); `null` where `/proc` could not be read.
    #[serde(default)]
    pub other_cpus: Option<f64>,
}

/// Which corpus was replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusRef {
    /// Path of the corpus file as given.
    pub path: String,
    /// The corpus format version.
    pub version: String,
    /// The corpus checksum as written in its header.
    pub checksum: String,
}
