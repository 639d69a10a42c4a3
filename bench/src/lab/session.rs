//! One measured run: boot the contender, drive the replay beside the
//! co-tenant and the probes, build the report (what it is asked to do is in
//! [`super::spec`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use fleet::plan::{Binding, Plan};
use fleet::posture::PostureOwner;
use fleet::quota::{QuotaReport, ThrottleSampler};
use fleet_bindings::Fleet;
use fleet_workloads::replay::{replay, CycleHost, ReplayOptions};
use fleet_workloads::Corpus;

use crate::lab::build::{build_report, Measured, RunArtifacts};
use crate::lab::feeder::{Feeder, FeederLog};
use crate::lab::hooks::{self, HookInputs};
use crate::lab::probes::{ProbeFigures, Probes};
use crate::lab::requota::QuotaWatch;
use crate::lab::spec::{LabError, RunSpec};
use crate::lab::stages::{self, Placement};
use crate::ops::metrics::MetricsHandle;
use crate::ops::operator::OperatorServer;
use crate::probe::perf::{RunCounters, ThreadCounters};
use crate::report::ExtraFile;

/// Everything a run started before its replay, in start order; torn down
/// by [`finish`] in reverse.
struct Started {
    label: String,
    load_average: Option<f64>,
    host_load: Option<crate::probe::hostload::HostLoad>,
    detected: QuotaReport,
    quota: f64,
    plan: Option<Plan>,
    t0: Instant,
    counters: RunCounters,
    profiler: Option<pprof::ProfilerGuard<'static>>,
    posture: Arc<PostureOwner>,
    host: Box<dyn CycleHost>,
    fleet: Option<Fleet>,
    metrics: MetricsHandle,
    operator: Option<OperatorServer>,
    feeder: Option<Feeder>,
    sampler_error: Option<String>,
    watch: Option<Arc<QuotaWatch>>,
    seat_counters: Option<ThreadCounters>,
    probes: Probes,
}

/// Runs `spec` over `corpus`.
pub fn run(spec: &RunSpec, corpus: &Corpus) -> Result<RunArtifacts, LabError> {
    if !(spec.scale.is_finite() && spec.scale > 0.0) {
        return Err(LabError::BadScale(spec.scale));
    }
    let (started, cgroup_quota, cgroup) = start(spec, corpus)?;
    let mut opts = ReplayOptions::new(spec.scale);
    opts.cycles = spec.cycles;
    opts.cores_granted = cores_granted(
        started
            .fleet
            .as_ref()
            .map(|f| f.plan())
            .or(started.plan.as_ref()),
        started.quota,
        &started.detected,
    );
    opts.cores_process = started.detected.effective_cpus().max(1.0);
    opts.interval_us = spec.interval_us;
    opts.crawl_units_per_cycle = spec.crawl_units_per_cycle;
    opts.unit_deadline = spec.unit_deadline;
    let hooked = hooks::install(
        &mut opts,
        HookInputs {
            spec,
            corpus,
            fleet: started.fleet.as_ref(),
            posture: &started.posture,
            watch: started.watch.clone(),
            trigger: started.probes.trigger(),
            cgroup,
            cgroup_quota,
            t0: started.t0,
        },
    )?;
    let replayed = replay(&*started.host, corpus, opts);
    finish(spec, corpus, started, hooked, replayed)
}

/// Places the run and starts, in order, the counters, the profiler, the
/// contender's host, the operator endpoints, the throttle feeder, the quota
/// watch and the probes; returns them with the run's cgroup (and its quota)
/// for the replay's hooks.
///
/// Errors: [`LabError`] from the stage that failed (what started before it
/// is dropped, and so stopped).
fn start(
    spec: &RunSpec,
    corpus: &Corpus,
) -> Result<
    (
        Started,
        Option<f64>,
        Option<crate::probe::cgroup::ChildCgroup>,
    ),
    LabError,
> {
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
    let (host, fleet) = stages::start_host(spec, plan.as_ref(), &posture)?;
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
    let probes = Probes::start(spec, corpus, host.threads_spawned())?;
    let started = Started {
        label,
        load_average,
        host_load,
        detected,
        quota,
        plan,
        t0,
        counters,
        profiler,
        posture,
        host,
        fleet,
        metrics,
        operator,
        feeder,
        sampler_error,
        watch,
        seat_counters,
        probes,
    };
    Ok((started, cgroup_quota, cgroup))
}

/// After the replay: stops the probes, the host, the fleet and the
/// counters, leaves the run's cgroup, and builds the report from what was
/// measured.
///
/// Errors: the replay's, a fleet that did not shut down cleanly, the cgroup
/// not left, the flame graph unwritable.
fn finish(
    spec: &RunSpec,
    corpus: &Corpus,
    mut started: Started,
    hooked: hooks::Hooked,
    replayed: Result<fleet_workloads::replay::ReplayResult, fleet_workloads::replay::ReplayError>,
) -> Result<RunArtifacts, LabError> {
    // The replay dropped its hooks: this is the last handle on the figures.
    let streamed = hooked
        .streamed
        .and_then(|s| Arc::try_unwrap(s).ok().map(|m| m.into_inner()));
    let (plan_changes, quota_events) = match started.watch.map(Arc::try_unwrap) {
        Some(Ok(w)) => w.finish(),
        _ => Default::default(),
    };
    if let Some(pb) = hooked.progress {
        pb.finish_and_clear();
    }
    let wall = started.t0.elapsed();
    let spawned = started.host.threads_spawned();
    let probed: ProbeFigures =
        started
            .probes
            .finish(spawned, started.host_load.as_ref(), &started.label);
    let own_cgroup = started
        .feeder
        .is_some()
        .then(|| own_version(&started.detected))
        .flatten();
    let feeder_log = feeder_log(started.feeder, started.sampler_error);
    let (census, lent_reserve, ran) = fleet_figures(started.fleet.as_ref());
    let plan = ran.or(started.plan);
    let perf_per_thread = started
        .seat_counters
        .map(|c| c.read().0)
        .unwrap_or_default();
    let posture_counters = started.posture.counters();
    let retunes = started
        .operator
        .as_ref()
        .map(|op| retune_events(&op.retunes(), started.t0))
        .unwrap_or_default();
    drop(started.host);
    if let Some(f) = started.fleet.take() {
        f.shutdown()
            .map_err(|e| LabError::Shutdown(e.to_string()))?;
    }
    let perf = started.counters.finish();
    let cgroup_version = leave_cgroup(&hooked.shrink_state)?;
    let replayed = replayed?;
    if let (Some(guard), Some(path)) = (started.profiler, &spec.flamegraph) {
        write_flamegraph(&guard, path)?;
    }
    let measured = Measured {
        label: started.label,
        contender: spec.contender,
        plan: plan.as_ref(),
        quota: started.quota,
        detected: &started.detected,
        scale: spec.scale,
        corpus_path: &spec.corpus_path,
        corpus,
        threads: probed.threads,
        cpu_seconds: probed.cpu_seconds,
        wall,
        feeder: feeder_log,
        cgroup_version,
        own_cgroup,
        posture: posture_counters,
        perf,
        perf_per_thread,
        load_average: started.load_average,
        other_cpus: probed.other_cpus,
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
        cotenant: probed.cotenant,
        contend: spec.contend,
        contend_class: spec.contend_class,
        sim_io_mean_late_us: probed.sim_io_mean_late_us,
        interval_us: spec.interval_us.unwrap_or(corpus.header.cycle_interval_us),
    };
    let mut artifacts = build_report(measured, replayed, streamed);
    artifacts.extras.push(ExtraFile {
        name: "metrics.prom".into(),
        bytes: started.metrics.render().into_bytes(),
    });
    drop(started.operator);
    Ok(artifacts)
}

/// A fleet's census, its lent reserve's figures and the plan it ran (a
/// lending plan runs unlent where the process may not take a thread back
/// from the idle class); all `None` for a baseline.
fn fleet_figures(
    fleet: Option<&Fleet>,
) -> (
    Option<Vec<fleet::census::CensusRow>>,
    Option<fleet_bindings::LentReserve>,
    Option<Plan>,
) {
    (
        fleet.map(|f| f.census()),
        fleet.and_then(|f| f.lent_reserve()),
        fleet.map(|f| f.plan().clone()),
    )
}

/// The feeder's log, or why there was no feeder (no cgroup `cpu.stat` to
/// sample).
fn feeder_log(feeder: Option<Feeder>, sampler_error: Option<String>) -> FeederLog {
    feeder.map(|f| f.finish()).unwrap_or_else(|| FeederLog {
        error: Some(format!(
            "no cgroup cpu.stat to sample: {}",
            sampler_error.unwrap_or_default()
        )),
        ..Default::default()
    })
}

/// Leaves the run's cgroup (the process moves back, the cgroup is removed)
/// and says which cgroup version it was.
///
/// Errors: [`LabError`] when the process cannot move back.
fn leave_cgroup(
    shrink: &hooks::ShrinkState,
) -> Result<Option<crate::probe::cgroup::CgroupVersion>, LabError> {
    let (cg, _, _) = std::mem::take(&mut *shrink.lock());
    let cgroup_version = cg.as_ref().map(|c| c.version());
    if let Some(cg) = cg {
        cg.leave()?;
    }
    Ok(cgroup_version)
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
