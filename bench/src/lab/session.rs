//! One measured run: boot the contender, drive the replay beside the
//! co-tenant and the probes, build the report (what it is asked to do is in
//! [`super::spec`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use fleet::plan::{Binding, Plan};
use fleet::posture::PostureOwner;
use fleet::quota::{QuotaReport, ThrottleSampler};
use fleet_workloads::replay::{replay, ReplayOptions, ReplayResult};
use fleet_workloads::Corpus;

use crate::lab::build::{build_report, Measured};
use crate::lab::feeder::FeederLog;
use crate::lab::hooks::{self, HookInputs};
use crate::lab::probes::{ProbeFigures, Probes};
use crate::lab::requota::QuotaWatch;
use crate::lab::spec::{LabError, RunSpec};
use crate::lab::stages::{self, Placement};
use crate::probe::perf::{RunCounters, ThreadCounters};
use crate::report::{ExtraFile, HdrLog, RunReport};

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

/// Runs `spec` over `corpus`.
pub fn run(spec: &RunSpec, corpus: &Corpus) -> Result<RunArtifacts, LabError> {
    if !(spec.scale.is_finite() && spec.scale > 0.0) {
        return Err(LabError::BadScale(spec.scale));
    }
    let load_average = load_average();
    // Other processes' load is measured over this run only, with the run's
    // own CPU taken out: the load average would count the lab's earlier
    // runs (compare, parity) as other work.
    let host_load = crate::probe::hostload::HostLoad::start().ok();
    let label = spec.label.clone().unwrap_or_else(|| spec.contender.label());
    let Placement {
        cgroup_quota,
        cgroup,
        detected,
        quota,
        plan,
    } = stages::place(spec)?;
    // Throttling is counted where the limit is: the child cgroup made for
    // the run, else the limiting ancestor detection found (a leaf with no
    // limit of its own reports no throttle events), with the leaf's v2
    // `cpu.stat.local` where present.
    let sampler = throttle_sampler(cgroup.as_ref().map(|c| c.dir()), &detected);
    let t0 = Instant::now();
    let counters = RunCounters::start();
    let profiler = stages::start_profiler(spec)?;

    let sim_cap = plan.as_ref().map_or(4, |p| p.seat_layout().sim_slot_cap);
    let posture = Arc::new(PostureOwner::new(spec.posture, sim_cap));
    let (host, mut fleet) = stages::start_host(spec, plan.as_ref(), &posture)?;
    let (metrics, operator) = stages::start_ops(spec, plan.as_ref(), &posture)?;
    let (feeder, sampler_error) = stages::start_feeder(sampler, spec, &posture, fleet.as_ref(), t0);
    // Re-detection while the run lasts: a changed quota re-plans the fleet
    // from the next cycle boundary. Started before the thread monitor: the
    // lab's own threads are not the contender's.
    let watch = match (&fleet, plan.as_ref(), spec.quota_watch) {
        (Some(f), Some(p), Some(period)) => Some(Arc::new(QuotaWatch::start(
            &detected,
            p.clone(),
            f.handle(),
            period,
            t0,
            fleet::quota::detect_live,
        ))),
        _ => None,
    };
    let seat_counters = fleet
        .as_ref()
        .map(|_| ThreadCounters::attach("work-fleet-"));
    // The lab's own threads start before the thread monitor, so they are
    // not counted as the contender's: the sim I/O timer, the co-tenant.
    let probes = Probes::start(spec, corpus, &*host)?;

    let mut opts = ReplayOptions::new(spec.scale);
    opts.cycles = spec.cycles;
    opts.cores_granted = cores_granted(
        fleet.as_ref().map(|f| f.plan()).or(plan.as_ref()),
        quota,
        &detected,
    );
    opts.cores_process = detected.effective_cpus().max(1.0);
    opts.interval_us = spec.interval_us;
    opts.crawl_units_per_cycle = spec.crawl_units_per_cycle;
    opts.unit_deadline = spec.unit_deadline;
    let hooked = hooks::install(
        &mut opts,
        HookInputs {
            spec,
            corpus,
            fleet: fleet.as_ref(),
            posture: &posture,
            watch: watch.clone(),
            trigger: probes.trigger(),
            cgroup,
            cgroup_quota,
            t0,
        },
    )?;

    let replayed = replay(&*host, corpus, opts);
    // The replay dropped its hooks: this is the last handle on the figures.
    let streamed = hooked.streamed.map(|s| match Arc::try_unwrap(s) {
        Ok(m) => m.into_inner(),
        Err(_) => unreachable!("the replay's hooks are dropped when it returns"),
    });
    let (plan_changes, quota_events) = match watch.map(Arc::try_unwrap) {
        Some(Ok(w)) => w.finish(),
        _ => Default::default(),
    };
    if let Some(pb) = hooked.progress {
        pb.finish_and_clear();
    }
    let wall = t0.elapsed();
    let ProbeFigures {
        cotenant,
        sim_io_mean_late_us,
        other_cpus,
        threads,
        cpu_seconds,
    } = probes.finish(&*host, host_load.as_ref(), &label);
    let feeder_sampled = feeder.is_some();
    let feeder_log = feeder.map(|f| f.finish()).unwrap_or_else(|| FeederLog {
        error: Some(format!(
            "no cgroup cpu.stat to sample: {}",
            sampler_error.unwrap_or_default()
        )),
        ..Default::default()
    });
    let census = fleet.as_ref().map(|f| f.census());
    let lent_reserve = fleet.as_ref().and_then(|f| f.lent_reserve());
    // The plan the fleet ran (a lending plan runs unlent where the process
    // may not take a thread back from the idle class).
    let plan = fleet.as_ref().map(|f| f.plan().clone()).or(plan);
    let perf_per_thread = seat_counters.map(|c| c.read().0).unwrap_or_default();
    let posture_counters = posture.counters();
    let retunes = operator
        .as_ref()
        .map(|op| retune_events(&op.retunes(), t0))
        .unwrap_or_default();
    drop(host);
    if let Some(f) = fleet.take() {
        f.shutdown()
            .map_err(|e| LabError::Shutdown(e.to_string()))?;
    }
    let perf = counters.finish();
    let (cg, _, _) = std::mem::take(&mut *hooked.shrink_state.lock());
    let cgroup_version = cg.as_ref().map(|c| c.version());
    if let Some(cg) = cg {
        cg.leave()?;
    }
    let replayed = replayed?;
    if let (Some(guard), Some(path)) = (profiler, &spec.flamegraph) {
        write_flamegraph(&guard, path)?;
    }
    let measured = Measured {
        label,
        contender: spec.contender,
        plan: plan.as_ref(),
        quota,
        detected: &detected,
        scale: spec.scale,
        corpus_path: &spec.corpus_path,
        corpus,
        threads,
        cpu_seconds,
        wall,
        feeder: feeder_log,
        cgroup_version,
        own_cgroup: if feeder_sampled {
            own_version(&detected)
        } else {
            None
        },
        posture: posture_counters,
        perf,
        perf_per_thread,
        load_average,
        other_cpus,
        census,
        lent_reserve,
        retunes,
        plan_changes,
        quota_events: quota_events
            .into_iter()
            .chain(std::mem::take(&mut *hooked.heap_events.lock()))
            .collect(),
        streamed_to: spec.stream_to.clone(),
        cotenant_mode: spec.cotenant,
        cotenant,
        contend: spec.contend,
        sim_io_mean_late_us,
        interval_us: spec.interval_us.unwrap_or(corpus.header.cycle_interval_us),
    };
    let mut artifacts = build_report(measured, replayed, streamed);
    artifacts.extras.push(ExtraFile {
        name: "metrics.prom".into(),
        bytes: metrics.render().into_bytes(),
    });
    drop(operator);
    Ok(artifacts)
}

/// The throttle sampler of a run: the child cgroup made for it when there is
/// one, else the cgroup that limits the process as detected (the limiting
/// ancestor, plus the leaf's `cpu.stat.local`).
fn throttle_sampler(
    child: Option<&std::path::Path>,
    detected: &QuotaReport,
) -> Result<ThrottleSampler, fleet::quota::CpuStatError> {
    match child {
        Some(dir) => ThrottleSampler::new(dir),
        None => ThrottleSampler::for_report(detected),
    }
}

/// The operator channel's applied retunes as timeline events, ms since
/// the run's start `t0`.
fn retune_events(
    retunes: &[crate::ops::operator::AppliedRetune],
    t0: Instant,
) -> Vec<crate::report::TimelineEvent> {
    retunes
        .iter()
        .map(|r| crate::report::TimelineEvent {
            t_ms: r.at.saturating_duration_since(t0).as_secs_f64() * 1e3,
            kind: crate::report::TimelineKind::Retune,
            detail: r.changes.clone(),
        })
        .collect()
}

/// The 1-minute load average from `/proc/loadavg`.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn own_version(detected: &QuotaReport) -> Option<crate::probe::cgroup::CgroupVersion> {
    use crate::probe::cgroup::CgroupVersion as V;
    match detected.source {
        fleet::quota::QuotaSource::CgroupV2 => Some(V::V2),
        fleet::quota::QuotaSource::CgroupV1 => Some(V::V1),
        _ => detected.cgroup_dir.as_ref().map(|d| {
            if d.join("cpu.max").exists() {
                V::V2
            } else {
                V::V1
            }
        }),
    }
}

/// Cores the plan-based lower bound divides a cycle's CPU by: the serial
/// binding runs every unit on its cycle threads (one core each, capped by
/// the CPUs present; 1 on a 2-core host); the pinned binding's seats may use
/// every core of the quota (⌊Q⌋, at least 1), capped by the CPUs present; a
/// baseline gets the effective CPUs (quota and affinity). Each is a true
/// bound, so makespan over it is ≥ 1.
fn cores_granted(plan: Option<&Plan>, quota: f64, detected: &QuotaReport) -> f64 {
    let cpus = detected.affinity_cpus as f64;
    match plan {
        Some(p) if p.binding == Binding::Serial => {
            f64::from(p.seat_layout().cycle_threads.max(1)).min(cpus)
        }
        Some(p) => p.quota_cpus.floor().max(1.0).min(cpus),
        None => quota.min(cpus).max(1.0),
    }
}

fn write_flamegraph(guard: &pprof::ProfilerGuard<'_>, path: &PathBuf) -> Result<(), LabError> {
    let err = |reason: String| LabError::Flamegraph {
        path: path.clone(),
        reason,
    };
    let report = guard.report().build().map_err(|e| err(e.to_string()))?;
    let file = std::fs::File::create(path).map_err(|e| err(e.to_string()))?;
    report.flamegraph(file).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 leaf with no limit inside a limited parent: the parent counts
    /// the throttle events, so the run samples the parent.
    #[test]
    fn the_run_samples_the_limiting_ancestor_not_the_unlimited_leaf() {
        let root = tempfile::tempdir().unwrap();
        let parent = root.path().join("sys/fs/cgroup/cpu/pod");
        let leaf = parent.join("app");
        std::fs::create_dir_all(&leaf).unwrap();
        let stat = |dir: &std::path::Path, throttled: u64| {
            std::fs::write(
                dir.join("cpu.stat"),
                format!("nr_periods 10\nnr_throttled {throttled}\nthrottled_time 0\n"),
            )
            .unwrap()
        };
        stat(&parent, 0);
        stat(&leaf, 0);
        let detected = QuotaReport {
            exact_cpus: Some(1.0),
            affinity_cpus: 2,
            source: fleet::quota::QuotaSource::CgroupV1,
            reason: "fixture".into(),
            cgroup_dir: Some(leaf.clone()),
            limiting_dir: Some(parent.clone()),
            affinity_list: vec![0, 1],
        };
        let mut sampler = throttle_sampler(None, &detected).unwrap();
        assert_eq!(sampler.dir(), parent.as_path());
        stat(&parent, 5);
        assert_eq!(sampler.sample().unwrap().nr_throttled, 5);
        // A child cgroup made for the run is sampled itself.
        let child = throttle_sampler(Some(&leaf), &detected).unwrap();
        assert_eq!(child.dir(), leaf.as_path());
    }
}
