//! The stages a run is set up in, one function each: where it runs (its
//! cgroup, the quota detected inside it and the contender's plan), the
//! contender's cycle host, the operator-facing endpoints and the throttle
//! feeder. [`crate::lab::run`] calls them in order and tears them down in
//! reverse.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fleet::plan::Plan;
use fleet::posture::PostureOwner;
use fleet::quota::{QuotaReport, ThrottleSampler};
use fleet_bindings::{boot, BootOptions, Fleet};
use fleet_workloads::replay::{CycleHost, FleetHost};

use crate::baseline::{PileOfPools, PlainTokio, RayonTokio};
use crate::lab::feeder::Feeder;
use crate::lab::spec::{Contender, LabError, RunSpec};
use crate::ops::metrics::MetricsHandle;
use crate::ops::operator::OperatorServer;
use crate::probe::cgroup::ChildCgroup;

/// Where a run executes.
pub(crate) struct Placement {
    /// Cores of the cgroup made for the run (`--cgroup-quota`, or the
    /// host's CPUs where only a shrink asked for one); `None` without one.
    pub cgroup_quota: Option<f64>,
    /// The cgroup made for the run, entered; `None` without one.
    pub cgroup: Option<ChildCgroup>,
    /// The quota detected from inside the run's cgroup (or at start).
    pub detected: QuotaReport,
    /// Cores the run plans for: `--quota`, else the detected quota.
    pub quota: f64,
    /// The fleet's plan (lent where decision 0009 allows and the spec
    /// asks); `None` for a baseline.
    pub plan: Option<Plan>,
}

/// Enters the run's cgroup (if any), detects the quota inside it and
/// resolves the contender's plan. Errors: the cgroup cannot be made or
/// entered, or no tier fits the quota ([`LabError::CgroupPlan`] when the
/// quota is the cgroup's, else [`LabError::Plan`]); on a refused plan the
/// cgroup guard moves the process back and removes the cgroup.
pub(crate) fn place(spec: &RunSpec) -> Result<Placement, LabError> {
    let boot_detected = fleet::quota::detect_live();
    // A shrink needs a real cgroup: without --cgroup-quota, one with the
    // host's CPUs as its quota, restored to that after the shrink.
    let cgroup_quota = spec.cgroup_quota.or(spec
        .quota_shrinks
        .first()
        .map(|_| boot_detected.affinity_cpus as f64));
    let cgroup = match cgroup_quota {
        Some(cores) => Some(ChildCgroup::enter(cores)?),
        None => None,
    };
    // Inside the run's cgroup the quota is what it grants: detect again, so
    // the plan is for the quota the process now has.
    let detected = match cgroup {
        Some(_) => fleet::quota::detect_live(),
        None => boot_detected,
    };
    let quota = spec.quota.unwrap_or_else(|| detected.effective_cpus());
    let plan = match spec.contender {
        Contender::Fleet(profile) => {
            let plan = Plan::resolve(quota, profile, &spec.budget).map_err(|source| {
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
    Ok(Placement {
        cgroup_quota,
        cgroup,
        detected,
        quota,
        plan,
    })
}

/// The contender's cycle host, wrapped in the spec's fault injection when
/// it asks for any; for the fleet also the booted [`Fleet`] (shut down by
/// the caller after the host is dropped). Errors: boot or a baseline's
/// runtime failed.
pub(crate) fn start_host(
    spec: &RunSpec,
    plan: Option<&Plan>,
    posture: &Arc<PostureOwner>,
) -> Result<(Box<dyn CycleHost>, Option<Fleet>), LabError> {
    let baseline = |which: &str| {
        let which = which.to_string();
        move |source| LabError::Baseline { which, source }
    };
    let (host, fleet): (Box<dyn CycleHost>, _) = match spec.contender {
        Contender::Fleet(_) => {
            let plan = plan.expect("a fleet run has a plan");
            let mut opts = BootOptions::new(posture.clone());
            opts.pump = spec.pump;
            opts.pin_cores = spec.pin_cores;
            let f = boot(plan, opts)?;
            (Box::new(FleetHost::new(f.handle())), Some(f))
        }
        Contender::PileOfPools => (
            Box::new(PileOfPools::new(spec.scale, 6).map_err(baseline("pile of pools"))?),
            None,
        ),
        Contender::PlainTokio => (
            Box::new(PlainTokio::new().map_err(baseline("plain tokio"))?),
            None,
        ),
        Contender::RayonTokio => (
            Box::new(RayonTokio::new().map_err(baseline("rayon + tokio"))?),
            None,
        ),
    };
    let host: Box<dyn CycleHost> = if spec.injection.any() {
        Box::new(crate::lab::inject::InjectedHost::new(host, spec.injection))
    } else {
        host
    };
    Ok((host, fleet))
}

/// The metrics recorder (with its scrape endpoint where the spec names an
/// address) and the posture operator channel (where it names one); both
/// addresses are printed to stderr. Errors: an address cannot be bound or
/// another metrics recorder is installed ([`LabError::Ops`]).
pub(crate) fn start_ops(
    spec: &RunSpec,
    plan: Option<&Plan>,
    posture: &Arc<PostureOwner>,
) -> Result<(MetricsHandle, Option<OperatorServer>), LabError> {
    let metrics = crate::ops::metrics::install(spec.metrics_addr)
        .map_err(|e| LabError::Ops(e.to_string()))?;
    if let Some(plan) = plan {
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
    Ok((metrics, operator))
}

/// The throttle feeder on `sampler` at the spec's period, feeding
/// `posture` and waking the fleet's hosts; where there is no `cpu.stat` to
/// sample, no feeder and the reason.
pub(crate) fn start_feeder(
    sampler: Result<ThrottleSampler, fleet::quota::CpuStatError>,
    spec: &RunSpec,
    posture: &Arc<PostureOwner>,
    fleet: Option<&Fleet>,
    t0: Instant,
) -> (Option<Feeder>, Option<String>) {
    match sampler {
        Ok(sampler) => (
            Some(Feeder::start(
                sampler,
                Duration::from_millis(spec.sample_period_ms.max(1)),
                posture.clone(),
                fleet.map(|f| f.waker()),
                t0,
            )),
            None,
        ),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The run's CPU profiler where the spec asks for a flamegraph (499 Hz,
/// libc and vDSO frames left out). Errors: the profiler cannot start.
pub(crate) fn start_profiler(
    spec: &RunSpec,
) -> Result<Option<pprof::ProfilerGuard<'static>>, LabError> {
    let Some(path) = &spec.flamegraph else {
        return Ok(None);
    };
    pprof::ProfilerGuardBuilder::default()
        .frequency(499)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map(Some)
        .map_err(|e| LabError::Flamegraph {
            path: path.clone(),
            reason: e.to_string(),
        })
}
