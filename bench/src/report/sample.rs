//! A plausible synthetic [`RunReport`], for examples, page tests and the
//! screenshot check. Shaped like the live bot's figures (`DESIGN.md` §5:
//! cycle span avg ≈ 208 ms, p95 ≈ 384 ms, max ≈ 480 ms at scale 1; 6 bins of
//! ≈ 86 ms walk; sims ≈ 3.3 ms CPU plus I/O wait) and deterministic from a
//! seed. Its figures are made up: never mistake it for a measurement.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use fleet::{FailReason, PathOutcome};

use super::hdr::{HdrLog, LatencyRecorder, Metric};

use super::model::*;
use super::timeline::{TimelineEvent, TimelineKind};

/// Length of one interval of the sample's logs, milliseconds.
const INTERVAL_MS: f64 = 10_000.0;

/// A small deterministic generator (xorshift64*), so samples need no
/// random-number crate and are the same on every machine.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exponential with mean 1.
    fn exp(&mut self) -> f64 {
        -(1.0 - self.unit()).ln()
    }
}

/// How the sample run behaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleShape {
    /// Mean extra makespan over the lower bound, as a fraction of it (e.g.
    /// 0.15 for a tight fleet, 0.8 for a pile of pools).
    pub tail: f64,
    /// Threads created per cycle (0 for the fleet, ≈ 95 for the pile).
    pub threads_per_cycle: u64,
    /// Throttle events per minute (≈ 2.7 live).
    pub throttle_per_min: f64,
}

impl SampleShape {
    /// The fleet: tight tail, no threads created.
    pub const FLEET: SampleShape = SampleShape {
        tail: 0.15,
        threads_per_cycle: 0,
        throttle_per_min: 2.0,
    };
    /// The pile of pools: heavy tail, a thread per sim.
    pub const PILE: SampleShape = SampleShape {
        tail: 0.8,
        threads_per_cycle: 95,
        throttle_per_min: 2.7,
    };
}

/// A synthetic run of `cycles` cycles at time `scale`, labelled `label`,
/// deterministic from `seed`. Percentiles come from [`LatencyRecorder`]s
/// fed with the generated values, as a real run's do.
pub fn sample_run(
    label: &str,
    shape: SampleShape,
    cycles: u64,
    scale: f64,
    seed: u64,
) -> RunReport {
    sample_run_with_logs(label, shape, cycles, scale, seed).0
}

/// The cycles of a sample run: the four metrics' recorders, the rows, the
/// outcome counts and the path count.
struct SampleCycles {
    mk: LatencyRecorder,
    ratio: LatencyRecorder,
    walk: LatencyRecorder,
    sim: LatencyRecorder,
    per_cycle: Vec<CycleRow>,
    outcomes: OutcomeCounts,
    paths: u64,
}

/// Generates `cycles` cycles a period of 250 ms × `scale` apart, closing
/// an interval of every recorder each [`INTERVAL_MS`].
fn sample_cycles(shape: SampleShape, cycles: u64, scale: f64, rng: &mut Rng) -> SampleCycles {
    let rec = LatencyRecorder::new;
    let (mut mk, mut ratio, mut walk, mut sim) = (
        rec(Metric::Makespan),
        rec(Metric::MakespanOverLowerBound),
        rec(Metric::BinWalk),
        rec(Metric::SimLatency),
    );
    let period_ms = 250.0 * scale;
    let mut per_cycle = Vec::new();
    let mut outcomes = OutcomeCounts::default();
    let mut paths = 0;
    let mut next_interval_ms = INTERVAL_MS;
    for c in 0..cycles {
        let start_ms = c as f64 * period_ms;
        while start_ms >= next_interval_ms {
            let at = Duration::from_secs_f64(next_interval_ms / 1000.0);
            for r in [&mut mk, &mut ratio, &mut walk, &mut sim] {
                r.close_interval(at);
            }
            next_interval_ms += INTERVAL_MS;
        }
        let bins: Vec<f64> = (0..6)
            .map(|_| scale * (60.0 + 50.0 * rng.unit() + 25.0 * rng.exp()))
            .collect();
        let lower = bins.iter().copied().fold(0.0, f64::max) + 12.4 * scale;
        let makespan = lower * (1.0 + shape.tail * rng.exp() * rng.exp().min(3.0));
        for w in &bins {
            walk.record_ms(*w);
        }
        let sims = 85 + rng.next_u64() % 21;
        for _ in 0..sims {
            sim.record_ms(scale * (3.3 + 6.0 * rng.exp() * (1.0 + shape.tail)));
        }
        let n = 95 + rng.next_u64() % 11;
        for _ in 0..n {
            let o = match rng.next_u64() % 20 {
                0..=1 => PathOutcome::Solved {
                    amount_in: 1_000_000,
                    profit: 12_345,
                },
                2 => PathOutcome::Failed {
                    reason: FailReason::SimReverted,
                },
                _ => PathOutcome::Suppressed,
            };
            outcomes.add(&o);
        }
        paths += n;
        mk.record_ms(makespan);
        ratio.record_ratio(makespan / lower);
        per_cycle.push(CycleRow {
            cycle: c,
            intended_start_ms: start_ms,
            makespan_ms: makespan,
            lower_bound_ms: lower,
            process_lower_bound_ms: lower,
            start_late_ms: 0.0,
            bins_walk_ms: bins,
        });
    }
    SampleCycles {
        mk,
        ratio,
        walk,
        sim,
        per_cycle,
        outcomes,
        paths,
    }
}

/// The sample's timeline over `wall_ms`: throttle episodes at
/// `shape.throttle_per_min`, one cordon and one retune; and the throttle
/// count.
fn sample_timeline(
    shape: SampleShape,
    wall_ms: f64,
    scale: f64,
    rng: &mut Rng,
) -> (Vec<TimelineEvent>, u64) {
    let mut timeline = Vec::new();
    let mut t = 0.0;
    let mut throttles = 0;
    let mean_gap_ms = 60_000.0 / shape.throttle_per_min.max(1e-6) * scale;
    loop {
        t += mean_gap_ms * rng.exp();
        if t >= wall_ms {
            break;
        }
        throttles += 1;
        timeline.push(TimelineEvent {
            t_ms: t,
            kind: TimelineKind::Throttle,
            detail: format!("{} throttled periods", 1 + rng.next_u64() % 3),
        });
    }
    let (enter, exit) = (wall_ms * POSTURE_ENTER, wall_ms * POSTURE_EXIT);
    timeline.push(TimelineEvent {
        t_ms: enter,
        kind: TimelineKind::PostureEnter,
        detail: "duty 4.1 % over 3 windows".into(),
    });
    timeline.push(TimelineEvent {
        t_ms: exit,
        kind: TimelineKind::PostureExit,
        detail: "clean window elapsed".into(),
    });
    timeline.push(TimelineEvent {
        t_ms: wall_ms * 0.7,
        kind: TimelineKind::Retune,
        detail: "cordon_duty_percent 5 -> 3".into(),
    });
    timeline.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    (timeline, throttles)
}

/// Where the sample's cordon starts and ends, as fractions of the run.
const POSTURE_ENTER: f64 = 0.35;
const POSTURE_EXIT: f64 = 0.55;

/// The sample's perf counters (instructions skipped, as on this host).
fn sample_counters(rng: &mut Rng) -> BTreeMap<String, CounterValue> {
    let mut counters = BTreeMap::new();
    counters.insert(
        "context_switches".to_string(),
        CounterValue::Value(41_200 + rng.next_u64() % 1000),
    );
    counters.insert(
        "cpu_migrations".to_string(),
        CounterValue::Value(310 + rng.next_u64() % 50),
    );
    counters.insert(
        "instructions".to_string(),
        CounterValue::Skipped {
            skipped: "not supported".into(),
        },
    );
    counters
}

/// The sample's co-tenant figures: a thread-per-sim shape wakes the host's
/// probe later.
fn sample_cotenant(
    shape: SampleShape,
    wall_ms: f64,
    cycles: u64,
    scale: f64,
) -> (
    crate::lab::Lateness,
    crate::lab::Lateness,
    crate::report::CoTenantInfo,
) {
    let cotenant = crate::lab::Lateness {
        p50: 60.0 * (1.0 + shape.tail),
        p99: 180.0 * (1.0 + 4.0 * shape.tail),
        p999: 400.0 * (1.0 + 4.0 * shape.tail),
        max: 900.0 * (1.0 + 4.0 * shape.tail),
        count: (wall_ms as u64).max(1),
    };
    let reserve = crate::lab::Lateness {
        p50: 100.0 * (1.0 + shape.tail),
        p99: 900.0 * (1.0 + 3.0 * shape.tail),
        p999: 1_500.0 * (1.0 + 3.0 * shape.tail),
        max: 2_000.0 * (1.0 + 3.0 * shape.tail),
        count: cycles,
    };
    let info = crate::report::CoTenantInfo {
        mode: crate::lab::CoTenantMode::On,
        probe_period_us: 1_000,
        probe_missed_ticks: 0,
        reserve_burst_us: (20_000.0 * scale) as u64,
        cpu_seconds: wall_ms / 1000.0 * 0.03,
    };
    (cotenant, reserve, info)
}

/// The sample's threads (a thread-per-sim shape creates
/// `threads_per_cycle` a cycle), its 2-CPU machine and its corpus.
fn sample_host(shape: SampleShape, cycles: u64) -> (ThreadCounts, Machine, CorpusRef) {
    let threads = ThreadCounts {
        at_start: 9,
        peak: 9 + shape.threads_per_cycle.min(40),
        created_during_run: shape.threads_per_cycle * cycles,
        peak_runnable: 2 + shape.threads_per_cycle / 10,
    };
    let machine = Machine {
        cpus: 2,
        quota: Some(2.0),
        load_average: None,
        other_cpus: None,
    };
    let corpus = CorpusRef {
        path: "corpus/golden.corpus".into(),
        version: "1".into(),
        checksum: "sha256:sample".into(),
    };
    (threads, machine, corpus)
}

/// `events` injected throttle events of 7.5 ms each over `wall_ms`.
fn sample_throttle(events: u64, wall_ms: f64) -> Throttle {
    Throttle {
        events,
        throttled_ms: events as f64 * 7.5,
        throttled_share: events as f64 * 7.5 / wall_ms,
        source: ThrottleSource::Injected,
    }
}

/// [`sample_run`] plus its interval logs (one per [`Metric`], an interval
/// per 10 s of run time, `StartTime` fixed so the bytes are reproducible).
pub fn sample_run_with_logs(
    label: &str,
    shape: SampleShape,
    cycles: u64,
    scale: f64,
    seed: u64,
) -> (RunReport, Vec<HdrLog>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let period_ms = 250.0 * scale;
    let SampleCycles {
        mk,
        ratio,
        walk,
        sim,
        per_cycle,
        outcomes,
        paths,
    } = sample_cycles(shape, cycles, scale, &mut rng);
    let wall_ms = cycles as f64 * period_ms + per_cycle.last().map_or(0.0, |r| r.makespan_ms);
    let (timeline, throttles) = sample_timeline(shape, wall_ms, scale, &mut rng);
    let counters = sample_counters(&mut rng);
    let (enter, exit) = (wall_ms * POSTURE_ENTER, wall_ms * POSTURE_EXIT);
    let (cotenant_lateness, reserve_lateness, cotenant) =
        sample_cotenant(shape, wall_ms, cycles, scale);
    let (threads, machine, corpus) = sample_host(shape, cycles);
    let (profile, binding) = match shape.threads_per_cycle {
        0 => ("auto", "serial"),
        _ => ("pile_of_pools", "pile_of_pools"),
    };
    let run_start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let run_end = Duration::from_secs_f64(wall_ms / 1000.0);
    let logs = [&mk, &ratio, &walk, &sim]
        .iter()
        .map(|r| {
            r.to_hdr_log(run_start, run_end)
                .expect("writing into memory cannot fail")
        })
        .collect();
    let report = RunReport {
        label: label.to_string(),
        profile: profile.to_string(),
        binding: binding.to_string(),
        oversubscribed: false,
        scale,
        cycles,
        paths,
        outcomes,
        parity: true,
        first_mismatch: None,
        makespan_ms: mk.percentiles(),
        makespan_over_lower_bound: ratio.percentiles(),
        // The synthetic bound is the same for every core count.
        makespan_over_process_bound: ratio.percentiles(),
        bin_walk_ms: walk.percentiles(),
        sim_latency_ms: sim.percentiles(),
        threads,
        timer_slack_ns: [(50_000, 9)].into_iter().collect(),
        cpu_seconds: wall_ms / 1000.0 * 0.4 * (1.0 + shape.tail),
        wall_seconds: wall_ms / 1000.0,
        throttle: Some(sample_throttle(throttles, wall_ms)),
        posture: PostureCounts {
            enters: 1,
            exits: 1,
            cordoned_ms: exit - enter,
            intake_suppressed: 17,
        },
        perf_counters: Some(counters),
        histograms_out_of_range: [&mk, &ratio, &walk, &sim]
            .iter()
            .map(|r| r.out_of_range())
            .sum(),
        per_cycle,
        timeline,
        machine,
        corpus,
        census: Vec::new(),
        lent_reserve: None,
        perf_per_thread: BTreeMap::new(),
        background: BTreeMap::new(),
        overruns: BTreeMap::new(),
        quota_detection: None,
        plan_changes: Vec::new(),
        rss: None,
        streamed_to: None,
        cotenant_lateness_us: Some(cotenant_lateness),
        reserve_task_lateness_us: Some(reserve_lateness),
        cotenant: Some(cotenant),
        saturation: None,
        peak_start_late_ms: 0.0,
        arrival_interval_ms: period_ms,
        contend_threads: 0,
        contend_class: None,
        sim_io_mean_late_us: Some(12.0),
    };
    (report, logs)
}
