//! The unit hand-off round trip per binding (criterion): submit a unit
//! through `FleetHandle::submit`, the pump admits and grants it, a seat
//! starts it, its receipt resolves, the submitting thread wakes.
//!
//! The unit body does nothing, so the figure is the fleet's own overhead
//! per unit: pump enqueue, grant, the seat's wake-up, the body's future, the
//! receipt, the submitter's wake-up (`DESIGN.md` §3 "Lanes, hosts and the
//! pump", §4 for the bindings). Both bindings are booted from a plan for an
//! 8-core quota (`pinned`: one thread per seat; `serial`: one cycle thread),
//! without core pinning, on whatever this host has.
//!
//! ```text
//! cargo bench -p fleet-bench --bench handoff
//! ```

use criterion::{criterion_group, criterion_main, Criterion};
use fleet::plan::{Plan, Profile};
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
#[allow(dead_code)]
#[path = "support/profiler.rs"]
mod profiler;
use fleet_bindings::{boot, unit_body, BootOptions, FleetHandle, PinCores};
use profiler::FlamegraphProfiler;
use std::hint::black_box;

/// The quota both fleets are planned for, cores.
const QUOTA_CPUS: f64 = 8.0;

/// Submits one empty unit of `role` (with `key`) and waits for its value.
fn round_trip(fleet: &FleetHandle, role: WorkerRole, key: Option<u32>) -> UnitValue {
    let body = unit_body(|_ctx| async { Box::new(7u64) as UnitValue });
    let receipt = fleet
        .submit(role, key, body)
        .unwrap_or_else(|e| panic!("the fleet refused a {role} unit: {e}"));
    receipt
        .wait()
        .unwrap_or_else(|r| panic!("the {role} unit resolved terminally: {r}"))
}

fn handoff(c: &mut Criterion) {
    let mut g = c.benchmark_group("handoff");
    for (name, profile) in [("pinned", Profile::Pinned), ("serial", Profile::Serial)] {
        let plan =
            Plan::resolve(QUOTA_CPUS, profile, &Default::default()).expect("a plan for Q = 8");
        let mut opts = BootOptions::for_plan(&plan);
        opts.pin_cores = PinCores::Off;
        opts.host_name = format!("bench-{name}");
        let fleet = boot(&plan, opts).unwrap_or_else(|e| panic!("boot {name}: {e}"));
        let handle = fleet.handle();
        // A first unit proves the wiring before anything is timed.
        let v = round_trip(&handle, WorkerRole::Resolve, None);
        assert_eq!(
            v.downcast_ref::<u64>(),
            Some(&7),
            "{name}: the body's value comes back"
        );
        g.bench_function(format!("{name}/resolve"), |b| {
            b.iter(|| black_box(round_trip(&handle, WorkerRole::Resolve, None)))
        });
        g.bench_function(format!("{name}/solver_bin_3"), |b| {
            b.iter(|| black_box(round_trip(&handle, WorkerRole::Solver, Some(3))))
        });
        drop(handle);
        fleet
            .shutdown()
            .unwrap_or_else(|e| panic!("shutdown {name}: {e}"));
    }
    g.finish();
}

criterion_group! {
    name = handoffs;
    config = Criterion::default().with_profiler(FlamegraphProfiler::default());
    targets = handoff
}
criterion_main!(handoffs);
