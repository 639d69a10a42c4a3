//! The host floor: the host's own work (the co-tenant) on a run's arrival
//! schedule with no contender at all.
//!
//! A contender's co-tenant lateness is the host's wake-up latency plus
//! what the contender adds. On a VM whose idle vCPUs halt (cpuidle driver
//! `none`), waking a halted vCPU is up to milliseconds of the
//! hypervisor's time, whoever runs in the guest (decision 0033): a 1 ms
//! probe alone had a p99 of 1.6–2.1 ms there, and 30–55 µs with the vCPUs
//! kept busy. The floor measures that part alone, in the same process,
//! with the same probes beside it (the co-tenant, the thread monitor's
//! 2 ms samples, the `--contend` process), for the span of a run: one
//! arrival every `interval × scale`, the reserve burst fired at each, and
//! nothing else. A contender whose co-tenant figures sit at the floor
//! adds nothing the host does not.

use std::time::{Duration, Instant};

use fleet_workloads::Corpus;

use crate::lab::cotenant::CoTenantFigures;
use crate::lab::probes::Probes;
use crate::lab::spec::{LabError, RunSpec};

/// The floor's label in a comparison's output.
pub const FLOOR_LABEL: &str = "host floor";

/// What the floor measured: the co-tenant's figures and other processes'
/// CPUs over its span.
#[derive(Debug, Clone, Default)]
pub struct FloorFigures {
    /// The co-tenant's lateness (probe and reserve load) and CPU.
    pub cotenant: CoTenantFigures,
    /// Other processes' CPUs over the floor's span (`None` where
    /// `/proc/stat` could not be read).
    pub other_cpus: Option<f64>,
    /// How long it ran, seconds.
    pub wall_s: f64,
}

/// The arrivals a run of `spec` replays: its `--cycles`, at most the
/// corpus's, and the time between them (the interval at scale 1 × scale).
pub fn arrivals(spec: &RunSpec, corpus: &Corpus) -> (usize, Duration) {
    let n = spec.cycles.map_or(corpus.cycles.len(), |c| {
        (c as usize).min(corpus.cycles.len())
    });
    let interval_us =
        spec.interval_us.unwrap_or(corpus.header.cycle_interval_us) as f64 * spec.scale;
    (n, Duration::from_secs_f64(interval_us.max(0.0) / 1e6))
}

/// Runs the co-tenant of `spec` alone over the arrivals of a run of
/// `spec` (see the module doc) and returns its figures; the contender of
/// `spec` is not started.
///
/// Errors: a scale that is not a positive finite number
/// ([`LabError::BadScale`]); the co-tenant or the contention process
/// cannot start ([`LabError::Harness`]).
pub fn host_floor(spec: &RunSpec, corpus: &Corpus) -> Result<FloorFigures, LabError> {
    if !(spec.scale.is_finite() && spec.scale > 0.0) {
        return Err(LabError::BadScale(spec.scale));
    }
    let host_load = crate::probe::hostload::HostLoad::start().ok();
    let probes = Probes::start(spec, corpus, 0)?;
    let trigger = probes.trigger();
    let (n, interval) = arrivals(spec, corpus);
    let t0 = Instant::now();
    for i in 0..n {
        sleep_until(t0 + interval * i as u32);
        trigger.cycle_start();
    }
    // The last arrival's cycle: one more interval, as a run that keeps up
    // ends before the next arrival would be due.
    sleep_until(t0 + interval * n as u32);
    let wall_s = t0.elapsed().as_secs_f64();
    let probed = probes.finish(0, host_load.as_ref(), FLOOR_LABEL);
    Ok(FloorFigures {
        cotenant: probed.cotenant,
        other_cpus: probed.other_cpus,
        wall_s,
    })
}

fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::{CoTenantMode, Contender};
    use fleet::plan::Profile;

    fn corpus() -> Corpus {
        Corpus::load(crate::cmd::corpus::default_corpus_path()).expect("the shipped corpus")
    }

    fn spec(cotenant: CoTenantMode, cycles: Option<u32>, scale: f64) -> RunSpec {
        let mut s = RunSpec::new(Contender::Fleet(Profile::Auto), "corpus".into(), scale);
        s.cotenant = cotenant;
        s.cycles = cycles;
        s.interval_us = Some(10_000);
        s
    }

    #[test]
    fn the_arrivals_are_the_runs_cycles_at_the_scaled_interval() {
        let c = corpus();
        let all = c.cycles.len();
        assert!(all > 2);
        let (n, gap) = arrivals(&spec(CoTenantMode::On, None, 0.5), &c);
        assert_eq!((n, gap), (all, Duration::from_millis(5)));
        let (n, _) = arrivals(&spec(CoTenantMode::On, Some(2), 0.5), &c);
        assert_eq!(n, 2);
        let (n, _) = arrivals(&spec(CoTenantMode::On, Some(all as u32 + 9), 0.5), &c);
        assert_eq!(n, all, "never more cycles than the corpus has");
        let mut live = spec(CoTenantMode::On, None, 0.1);
        live.interval_us = None;
        let (_, gap) = arrivals(&live, &c);
        assert_eq!(
            gap,
            Duration::from_secs_f64(c.header.cycle_interval_us as f64 * 0.1 / 1e6)
        );
    }

    #[test]
    fn the_floor_runs_the_cotenant_alone_and_fires_one_burst_per_arrival() {
        let c = corpus();
        let f = host_floor(&spec(CoTenantMode::On, Some(4), 0.5), &c).unwrap();
        let probe = f.cotenant.probe.expect("the probe ran");
        assert!(probe.count > 0, "the probe woke");
        let reserve = f.cotenant.reserve.expect("the reserve load ran");
        assert_eq!(reserve.count, 4, "one burst per arrival");
        assert!(f.wall_s >= 0.02, "it lasts the run's span: {}", f.wall_s);
        let off = host_floor(&spec(CoTenantMode::Off, Some(4), 0.5), &c).unwrap();
        assert!(off.cotenant.probe.is_none() && off.cotenant.reserve.is_none());
    }

    #[test]
    fn a_bad_scale_is_refused_before_anything_starts() {
        let c = corpus();
        for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                host_floor(&spec(CoTenantMode::On, None, scale), &c),
                Err(LabError::BadScale(_))
            ));
        }
    }
}
