//! The routing lab (`ROUTING.md` §5): a simulated fleet of crawling
//! devices, built deterministically from a seed, on which the real router
//! (in process, on a simulated clock) and the baselines that each replace
//! one part of it route the same work. Its figures are what
//! `fleet-lab route` prints and gates (docs/routing-lab.md).
//!
//! Modules, in the order a reader meets them:
//!
//! - [`rng`]: seeded randomness;
//! - [`archetype`]: the four device archetypes and one simulated device;
//! - [`world`]: hidden truths of sources, targets and devices;
//! - `population`: the devices, their sessions, liars and upgrades;
//! - [`scenario`]: the scenarios and the run specification;
//! - [`plan`]: a world as a file (the shipped scenarios are such files);
//! - [`baseline`]: the contenders and the baselines' choosers;
//! - [`dawid_skene`]: truth inference by EM, for the `dawid-skene` contender;
//! - [`store`]: the lab's lean store;
//! - [`ledger`]: trust moves tagged with the world's truth (the adapter
//!   bug's accounting);
//! - [`driver`]: one contender's run;
//! - [`service`]: the router as a service, `routerd` over loopback HTTP;
//! - [`report`]: the figures;
//! - [`stats`] and [`seeds`]: figures over several seeds, and the
//!   `adapter-bug` check against its control;
//! - [`render`]: the tables and the HTML page with its plots.
//!
//! [`simulate`] runs every asked contender on the same world and seed.

pub mod archetype;
pub mod baseline;
pub mod dawid_skene;
pub mod driver;
pub mod ledger;
pub mod plan;
mod population;
pub mod render;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod seeds;
pub mod service;
pub mod source;
pub mod stats;
pub mod store;
pub mod world;

pub use baseline::Contender;
pub use report::{ContenderReport, SimReport};
pub use scenario::{Scenario, SimSpec};
pub use service::ServiceSpec;
pub use world::World;

use world::ARCHETYPES;

/// What can go wrong setting up or running a simulation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// A scenario name that does not exist.
    #[error("unknown scenario {0:?}: use steady, drought, regime-change, liars, adapter-bug, budget-saturation or cold-start")]
    UnknownScenario(String),
    /// A run specification out of range.
    #[error("bad simulation spec: {0}")]
    BadSpec(String),
    /// The router refused to open, a fact, or a tick failed.
    #[error("router: {0}")]
    Router(String),
    /// routerd did not start, or stopped answering ([`service`]).
    #[error("routerd: {0}")]
    Service(String),
    /// A world file refused ([`plan::PlanError`], naming the key).
    #[error(transparent)]
    World(#[from] plan::PlanError),
}

/// How many runs [`simulate`] makes beyond one per contender: the control of
/// `adapter-bug` (the router on [`World::without_bug`]) when the router is
/// among `contenders`, else none.
pub fn control_runs(spec: &SimSpec, contenders: &[Contender]) -> usize {
    let bug = spec.plan().is_ok_and(|p| p.events.adapter_bug.is_some());
    usize::from(bug && contenders.contains(&Contender::Router))
}

/// Runs `contenders` on the world of `spec`, each on its own thread (at
/// most the host's parallelism at once); the reports keep the given order.
/// In `adapter-bug`, the router also runs on the control world, the same
/// world without the bug ([`SimReport::control`], see [`control_runs`]).
/// `progress(i, t_s)` is called at every sample of run `i` (the control is
/// `contenders.len()`). Errors: [`SimError`] (the first run's that failed).
pub fn simulate(
    spec: &SimSpec,
    contenders: &[Contender],
    progress: &(dyn Fn(usize, f64) + Sync),
) -> Result<SimReport, SimError> {
    simulate_over(spec, contenders, &Transport::InProcess, progress)
}

/// Where the router runs in a simulation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Transport {
    /// In this process, called directly on the simulated clock.
    #[default]
    InProcess,
    /// A `routerd` per run, over loopback HTTP on its manual clock
    /// ([`service`]); only [`Contender::Router`] runs this way.
    Service(service::ServiceSpec),
}

impl Transport {
    /// How reports name it: `in-process`, `routerd over HTTP (sqlite)` or
    /// `routerd over HTTP (postgres)`.
    pub fn label(&self) -> String {
        match self {
            Transport::InProcess => "in-process".into(),
            Transport::Service(s) => format!("routerd over HTTP ({})", s.store_name()),
        }
    }
}

/// One run: `contender` on `world`, over `transport` (run `tag` names its
/// routerd's data directory and schema).
fn run_one(
    world: &World,
    contender: Contender,
    transport: &Transport,
    tag: usize,
    progress: impl FnMut(f64),
) -> Result<ContenderReport, SimError> {
    let driver = match transport {
        Transport::InProcess => driver::Driver::new(world, contender)?,
        Transport::Service(spec) => {
            if world.devices.len() > service::MAX_DEVICES {
                return Err(SimError::BadSpec(format!(
                    "over routerd at most {} devices (one loopback network each), not {}",
                    service::MAX_DEVICES,
                    world.devices.len()
                )));
            }
            let port = driver::port::Port::Service(Box::new(service::Service::start(spec, tag)?));
            driver::Driver::with_port(world, contender, port)?
        }
    };
    driver.run(progress)
}

/// [`simulate`] over `transport`: in process, or each run against a
/// `routerd` of its own ([`Transport::Service`]; then only the router).
/// Errors: as [`simulate`], and [`SimError::BadSpec`] for another
/// contender or too many devices over routerd, [`SimError::Service`] when
/// routerd does not start or stops answering.
pub fn simulate_over(
    spec: &SimSpec,
    contenders: &[Contender],
    transport: &Transport,
    progress: &(dyn Fn(usize, f64) + Sync),
) -> Result<SimReport, SimError> {
    if let (Transport::Service(_), Some(c)) = (
        transport,
        contenders.iter().find(|c| **c != Contender::Router),
    ) {
        return Err(SimError::BadSpec(format!(
            "over routerd only the router runs, not {}: routerd serves its own model",
            c.name()
        )));
    }
    let world = World::build(spec)?;
    let plan = spec.plan()?;
    // Built only when it runs: a clone of the world is not free at 100,000 devices.
    let control = (control_runs(spec, contenders) > 0).then(|| world.without_bug());
    let width = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1);
    let mut jobs: Vec<(usize, Contender, &World)> = contenders
        .iter()
        .copied()
        .enumerate()
        .map(|(i, c)| (i, c, &world))
        .collect();
    if let Some(control) = &control {
        jobs.push((contenders.len(), Contender::Router, control));
    }
    let mut slots: Vec<Option<Result<ContenderReport, SimError>>> = vec![None; jobs.len()];
    for chunk in jobs.chunks(width) {
        let done: Vec<(usize, Result<ContenderReport, SimError>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&(i, c, world)| {
                    scope.spawn(move || {
                        let r = run_one(world, c, transport, i, |t| progress(i, t));
                        (i, r)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        (
                            usize::MAX,
                            Err(SimError::Router("a contender's thread panicked".into())),
                        )
                    })
                })
                .collect()
        });
        for (i, r) in done {
            if i == usize::MAX {
                return Err(SimError::Router("a contender's thread panicked".into()));
            }
            slots[i] = Some(r);
        }
    }
    let mut reports = Vec::with_capacity(jobs.len());
    for s in slots {
        reports.push(s.unwrap_or_else(|| Err(SimError::Router("a contender did not run".into())))?);
    }
    let control = (reports.len() > contenders.len())
        .then(|| reports.pop())
        .flatten()
        .map(|r| r.event);
    Ok(SimReport {
        scenario: plan.name.clone(),
        description: plan.description.clone(),
        seed: spec.seed,
        devices: spec.devices,
        hours: spec.hours,
        tick_s: spec.tick_s,
        sample_s: spec.sample_s,
        world: world_summary(&world),
        contenders: reports,
        control,
        transport: transport.label(),
    })
}

/// The world in numbers, for the report.
fn world_summary(world: &World) -> report::WorldSummary {
    report::WorldSummary {
        sources: world.sources.len(),
        targets: world.targets.len(),
        devices: ARCHETYPES
            .iter()
            .enumerate()
            .map(|(a, n)| {
                (
                    n.to_string(),
                    world.devices.iter().filter(|d| d.archetype == a).count(),
                )
            })
            .collect(),
        liars: world.devices.iter().filter(|d| d.liar).count(),
        buggy: world
            .devices
            .iter()
            .filter(|d| d.upgrade_at.is_some())
            .count(),
        polite_rate: world.polite_rate(),
        caps: world.caps.clone(),
        event_s: world
            .drought
            .or(world.regime.map(|(_, _, f)| (f, world.spec.end_s())))
            .or(world.bug.map(|(_, f)| (f, world.spec.end_s()))),
    }
}
