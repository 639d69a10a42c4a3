//! One measured run: boot the contender, drive the replay beside the
//! co-tenant and the probes, build the report (what it is asked to do is in
//! [`super::spec`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::plan::{Binding, Plan};
use fleet::posture::PostureOwner;
use fleet::quota::{QuotaReport, ThrottleSampler};
use fleet_bindings::{boot, BootOptions};
use fleet_workloads::replay::{replay, CycleHost, FleetHost, ReplayOptions, ReplayResult};
use fleet_workloads::Corpus;

use crate::baseline::{PileOfPools, PlainTokio, RayonTokio};
use crate::lab::build::{build_report, Measured};
use crate::lab::feeder::{Feeder, FeederLog};
use crate::lab::requota::QuotaWatch;
use crate::lab::spec::{Contender, LabError, RunSpec};
use crate::probe::cgroup::ChildCgroup;
use crate::probe::perf::{RunCounters, ThreadCounters};
use crate::probe::threads::ThreadMonitor;
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

fn rusage_cpu_seconds() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `spec` over `corpus`.
pub fn run(spec: &RunSpec, corpus: &Corpus) -> Result<RunArtifacts, LabError> {
    if !(spec.scale.is_finite() && spec.scale > 0.0) {
        return Err(LabError::BadScale(spec.scale));
    }
    let boot_detected = fleet::quota::detect_live();
    let load_average = load_average();
    // Other processes' load is measured over this run only, with the run's
    // own CPU taken out: the load average would count the lab's earlier
    // runs (compare, parity) as other work.
    let host_load = crate::probe::hostload::HostLoad::start().ok();
    let label = spec.label.clone().unwrap_or_else(|| spec.contender.label());
    // A shrink needs a real cgroup: without --cgroup-quota, one with the
    // host's CPUs as its quota, restored to that after the shrink.
    let cgroup_quota = spec.cgroup_quota.or(spec
        .quota_shrinks
        .first()
        .map(|_| boot_detected.affinity_cpus as f64));
    let mut cgroup = match cgroup_quota {
        Some(cores) => Some(ChildCgroup::enter(cores)?),
        None => None,
    };
    // Inside the run's cgroup the quota is what it grants: detect again, so
    // the plan is for the quota the process now has. (On a refused plan the
    // cgroup guard moves the process back and removes the cgroup.)
    let detected = match cgroup {
        Some(_) => fleet::quota::detect_live(),
        None => boot_detected,
    };
    let quota = spec.quota.unwrap_or_else(|| detected.effective_cpus());
    let plan = match spec.contender {
        Contender::Fleet(profile) => {
            let plan =
                Plan::resolve(quota, profile, &Default::default()).map_err(|source| {
                    match (&cgroup, spec.quota) {
                        (Some(_), None) => LabError::CgroupPlan {
                            cores: quota,
                            source,
                        },
                        _ => LabError::Plan(source),
                    }
                })?;
            // The serial tier lends its reserved cores at the idle class
            // where the quota can never throttle the process (decision 0009).
            Some(if spec.lend_reserve {
                plan.lend_reserve(&detected)
            } else {
                plan
            })
        }
        _ => None,
    };
    // Throttling is counted where the limit is: the child cgroup made for
    // the run, else the limiting ancestor detection found (a leaf with no
    // limit of its own reports no throttle events), with the leaf's v2
    // `cpu.stat.local` where present.
    let sampler = throttle_sampler(cgroup.as_ref().map(|c| c.dir()), &detected);
    let t0 = Instant::now();
    let counters = RunCounters::start();
    let profiler = match &spec.flamegraph {
        Some(path) => Some(
            pprof::ProfilerGuardBuilder::default()
                .frequency(499)
                .blocklist(&["libc", "libgcc", "pthread", "vdso"])
                .build()
                .map_err(|e| LabError::Flamegraph {
                    path: path.clone(),
                    reason: e.to_string(),
                })?,
        ),
        None => None,
    };

    let sim_cap = plan.as_ref().map_or(4, |p| p.seat_layout().sim_slot_cap);
    let posture = Arc::new(PostureOwner::new(spec.posture, sim_cap));
    let mut fleet = None;
    let host: Box<dyn CycleHost> =
        match spec.contender {
            Contender::Fleet(_) => {
                let plan = plan.as_ref().expect("a fleet run has a plan");
                let mut opts = BootOptions::new(posture.clone());
                opts.pump = spec.pump;
                opts.pin_cores = spec.pin_cores;
                let f = boot(plan, opts)?;
                let h = Box::new(FleetHost::new(f.handle()));
                fleet = Some(f);
                h
            }
            Contender::PileOfPools => Box::new(PileOfPools::new(spec.scale, 6).map_err(
                |source| LabError::Baseline {
                    which: "pile of pools".into(),
                    source,
                },
            )?),
            Contender::PlainTokio => {
                Box::new(PlainTokio::new().map_err(|source| LabError::Baseline {
                    which: "plain tokio".into(),
                    source,
                })?)
            }
            Contender::RayonTokio => {
                Box::new(RayonTokio::new().map_err(|source| LabError::Baseline {
                    which: "rayon + tokio".into(),
                    source,
                })?)
            }
        };
    let host: Box<dyn CycleHost> = if spec.injection.any() {
        Box::new(crate::lab::inject::InjectedHost::new(host, spec.injection))
    } else {
        host
    };
    let metrics = crate::ops::metrics::install(spec.metrics_addr)
        .map_err(|e| LabError::Ops(e.to_string()))?;
    if let Some(plan) = plan.as_ref() {
        fleet::telemetry::record_profile(plan);
    }
    let operator = match spec.operator_addr {
        Some(addr) => Some(
            crate::ops::operator::serve(addr, posture.clone())
                .map_err(|e| LabError::Ops(e.to_string()))?,
        ),
        None => None,
    };
    if let Some(op) = &operator {
        eprintln!(
            "fleet-lab: posture operator channel on http://{}/posture",
            op.local_addr()
        );
    }
    if let Some(addr) = metrics.local_addr() {
        eprintln!("fleet-lab: metrics on http://{addr}/metrics");
    }
    let (feeder, sampler_error) = match sampler {
        Ok(sampler) => (
            Some(Feeder::start(
                sampler,
                Duration::from_millis(spec.sample_period_ms.max(1)),
                posture.clone(),
                fleet.as_ref().map(|f| f.waker()),
                t0,
            )),
            None,
        ),
        Err(e) => (None, Some(e.to_string())),
    };
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
    fleet_workloads::simio::start();
    let simio0 = fleet_workloads::simio::lateness();
    let cotenant = start_cotenant(spec, corpus)?;
    let trigger = cotenant.trigger();
    let contention = match spec.contend {
        0 => None,
        n => Some(
            std::env::current_exe()
                .and_then(|exe| crate::lab::contend::Contention::start(&exe, n))
                .map_err(|source| LabError::Harness {
                    what: "contention process (fleet-lab spin)",
                    source,
                })?,
        ),
    };
    let spawned_before = host_spawned(&*host);
    let monitor = ThreadMonitor::start(Duration::from_millis(2)).ok();
    let cpu0 = rusage_cpu_seconds();

    let cores_granted = cores_granted(
        fleet.as_ref().map(|f| f.plan()).or(plan.as_ref()),
        quota,
        &detected,
    );
    let mut opts = ReplayOptions::new(spec.scale);
    opts.cycles = spec.cycles;
    opts.cores_granted = cores_granted;
    opts.cores_process = detected.effective_cpus().max(1.0);
    opts.interval_us = spec.interval_us;
    opts.crawl_units_per_cycle = spec.crawl_units_per_cycle;
    opts.unit_deadline = spec.unit_deadline;
    let total = spec.cycles.map_or(corpus.cycles.len(), |c| {
        (c as usize).min(corpus.cycles.len())
    });
    let progress = spec
        .progress
        .then(|| crate::lab::build::progress_bar(total as u64, &spec.contender.label()));
    let pb = progress.clone();
    let streamed = match &spec.stream_to {
        Some(dir) => Some(Arc::new(parking_lot::Mutex::new(open_stream(dir)?))),
        None => None,
    };
    if let Some(stats) = &streamed {
        opts.retain = false;
        let stats = stats.clone();
        opts.on_outcomes = Some(Box::new(move |rows| stats.lock().outcomes(rows)));
    }
    let stream_rows = streamed.clone();
    let heap_events = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut heap_release = spec
        .release_heap
        .then(|| {
            fleet.as_ref().map(|f| {
                crate::lab::release::HeapRelease::new(
                    f.handle(),
                    posture.clone(),
                    t0,
                    heap_events.clone(),
                )
            })
        })
        .flatten();
    opts.on_cycle_end = Some(Box::new(move |rec| {
        if let Some(h) = heap_release.as_mut() {
            h.at_cycle_end(rec.cycle);
        }
        if let Some(stats) = &stream_rows {
            stats.lock().cycle(rec);
        }
        if let Some(pb) = &pb {
            pb.inc(1);
            pb.set_message(format!(
                "cycle {} {:.1} ms",
                rec.cycle,
                rec.makespan_us() as f64 / 1e3
            ));
        }
        for b in &rec.bins {
            fleet::telemetry::record_bin_makespan(b.bin, Duration::from_micros(b.walk_us));
        }
    }));
    let shrink_state = Arc::new(parking_lot::Mutex::new((
        cgroup.take(),
        spec.quota_shrinks.clone(),
        cgroup_quota,
    )));
    let shrink_cb = shrink_state.clone();
    let boundary = watch.clone();
    let fleet_handle = fleet.as_ref().map(|f| f.handle());
    opts.on_cycle_start = Some(Box::new(move |cycle| {
        trigger.cycle_start();
        let mut st = shrink_cb.lock();
        let (cg, shrinks, base) = &mut *st;
        if let Some(cg) = cg.as_mut() {
            for s in shrinks.iter() {
                if cycle == s.at_cycle {
                    let _ = cg.set_quota(s.cores);
                } else if let (true, Some(restore)) =
                    (cycle == s.at_cycle.saturating_add(s.cycles), *base)
                {
                    let _ = cg.set_quota(restore);
                }
            }
        }
        // Every cycle start is an epoch boundary (pins are re-keyed only here).
        match (&boundary, &fleet_handle) {
            (Some(w), _) => w.boundary(u64::from(cycle)),
            (None, Some(h)) => h.epoch_boundary(u64::from(cycle)),
            _ => {}
        }
    }));

    let replayed = replay(&*host, corpus, opts);
    // The replay dropped its hooks: this is the last handle on the figures.
    let streamed = streamed.map(|s| match Arc::try_unwrap(s) {
        Ok(m) => m.into_inner(),
        Err(_) => unreachable!("the replay's hooks are dropped when it returns"),
    });
    let (plan_changes, quota_events) = match watch.map(Arc::try_unwrap) {
        Some(Ok(w)) => w.finish(),
        _ => Default::default(),
    };
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    let cotenant = cotenant.finish();
    let simio1 = fleet_workloads::simio::lateness();
    let sim_io_fired = simio1.1.saturating_sub(simio0.1);
    let sim_io_mean_late_us = (sim_io_fired > 0)
        .then(|| simio1.0.saturating_sub(simio0.0) as f64 / sim_io_fired as f64 / 1e3);
    if let Some(c) = contention {
        c.stop();
    }
    let cpu_total = rusage_cpu_seconds() - cpu0;
    let other_cpus = host_load.as_ref().and_then(|h| h.other_cpus_since().ok());
    if let (Some(other), Some(h)) = (other_cpus, host_load.as_ref()) {
        if let Some(w) = crate::probe::hostload::busy_warning(&label, other, h.cpus()) {
            eprintln!("fleet-lab: warning: {w}");
        }
    }
    let wall = t0.elapsed();
    let mut threads = monitor.map(|m| m.finish()).unwrap_or_default();
    // The sampler's own CPU is the lab's, not the contender's.
    let cpu_seconds = (cpu_total - threads.own_cpu_seconds - cotenant.cpu_seconds).max(0.0);
    let self_spawned = host_spawned(&*host).saturating_sub(spawned_before);
    threads.created_during_run = threads.created_during_run.max(self_spawned as u32);
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
    let (cg, _, _) = std::mem::take(&mut *shrink_state.lock());
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
            .chain(std::mem::take(&mut *heap_events.lock()))
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

/// Starts the run's co-tenant; its reserve burst runs on the corpus's
/// first path over its pools.
fn start_cotenant(
    spec: &RunSpec,
    corpus: &Corpus,
) -> Result<crate::lab::cotenant::CoTenant, LabError> {
    let hops = corpus
        .cycles
        .iter()
        .flat_map(|c| c.paths.first())
        .next()
        .map(|p| p.hops.clone())
        .unwrap_or_default();
    crate::lab::cotenant::CoTenant::start(
        spec.cotenant,
        spec.scale,
        Arc::new(corpus.pools.clone()),
        hops,
    )
    .map_err(|source| LabError::Harness {
        what: "co-tenant",
        source,
    })
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

/// Creates `dir` (if missing) and its `cycles.jsonl` and `outcomes.jsonl`
/// (replacing files of those names) for a streamed run.
fn open_stream(dir: &std::path::Path) -> Result<crate::lab::build::CycleStats, LabError> {
    let err = |path: PathBuf| move |source| LabError::Stream { path, source };
    std::fs::create_dir_all(dir).map_err(err(dir.to_path_buf()))?;
    let file = |name: &str| -> Result<Box<dyn std::io::Write + Send>, LabError> {
        let path = dir.join(name);
        let f = std::fs::File::create(&path).map_err(err(path))?;
        Ok(Box::new(std::io::BufWriter::new(f)))
    };
    Ok(crate::lab::build::CycleStats::streamed(
        file("cycles.jsonl")?,
        file("outcomes.jsonl")?,
    ))
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

fn host_spawned(host: &dyn CycleHost) -> u64 {
    host.threads_spawned()
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
