//! Core pinning on this machine, and the tier the plan picks here.
//!
//! The pinned binding runs with pinning forced on (each solver seat sees only
//! its CPU: the k-th CPU of the mask captured at boot) and off (each seat
//! sees the whole mask). A forced `pinned` profile on this small machine
//! runs, marked oversubscribed in the status and the census; `auto` runs
//! serial.

use crate::common::*;
use fleet::census::CensusBinding;
use fleet::ledger::SharedLedger;
use fleet::plan::{Binding, Profile};
use fleet::receipt::UnitValue;
use fleet::WorkerRole;
use fleet_bindings::{boot, unit_body, AffinityMask, BootOptions, Fleet, PinCores};

/// Each solver seat's own allowed CPUs, read on the seat thread.
fn solver_seat_masks(fleet: &Fleet) -> Vec<(String, Vec<usize>)> {
    let h = fleet.handle();
    let receipts: Vec<_> = (0..BINS)
        .map(|k| {
            let body = unit_body(move |ctx| async move {
                let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
                let mask = AffinityMask::from_status(&status).unwrap();
                Box::new((
                    std::thread::current().name().unwrap().to_string(),
                    ctx.seat.index,
                    mask.cpus().to_vec(),
                )) as UnitValue
            });
            h.submit(WorkerRole::Solver, Some(k), body)
                .expect("admitted")
        })
        .collect();
    receipts
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            let (name, seat, cpus) = *wait(r)
                .unwrap()
                .downcast::<(String, u32, Vec<usize>)>()
                .unwrap();
            assert_eq!(seat, k as u32, "bin key k lands on solver seat k");
            (name, cpus)
        })
        .collect()
}

fn one_exact_cycle(fleet: &Fleet) {
    let (fuse, trips) = recording_fuse();
    let ledger = SharedLedger::new(fuse);
    assert!(run_cycle(&fleet.handle(), &ledger, 1, CycleOpts::default())
        .merged
        .is_ok());
    assert!(trips.lock().unwrap().is_empty());
}

#[test]
fn pinned_binding_runs_with_pinning_forced_on() {
    let plan = plan(8.0, Profile::Pinned);
    let mut opts = BootOptions::for_plan(&plan);
    opts.pin_cores = PinCores::On;
    let fleet = boot(&plan, opts).expect("boot");
    let mask = AffinityMask::capture().unwrap();
    assert!(fleet.pins().decision.pins());
    for (k, (name, cpus)) in solver_seat_masks(&fleet).into_iter().enumerate() {
        assert_eq!(name, format!("work-fleet-solver-{k}"));
        assert_eq!(
            cpus,
            vec![mask.cpu_for_seat(k)],
            "solver seat {k} is pinned to the {k}-th allowed CPU"
        );
    }
    let layout = plan.seat_layout();
    let census = fleet.census();
    for (k, seat) in layout.seats.iter().enumerate() {
        let row = census
            .iter()
            .find(|r| r.thread_name == seat.thread_name)
            .expect("a row per seat");
        assert_eq!(
            row.pinned_cpu,
            Some(mask.cpu_for_seat(k)),
            "{}",
            seat.thread_name
        );
        assert_eq!(row.binding, CensusBinding::Pinned);
    }
    one_exact_cycle(&fleet);
    fleet.shutdown().unwrap();
}

#[test]
fn pinned_binding_runs_with_pinning_off() {
    let plan = plan(8.0, Profile::Pinned);
    let mut opts = BootOptions::for_plan(&plan);
    opts.pin_cores = PinCores::Off;
    let fleet = boot(&plan, opts).expect("boot");
    let mask = AffinityMask::capture().unwrap();
    assert!(!fleet.pins().decision.pins());
    for (name, cpus) in solver_seat_masks(&fleet) {
        assert_eq!(cpus, mask.cpus(), "{name} keeps the whole mask");
    }
    assert!(fleet.census().iter().all(|r| r.pinned_cpu.is_none()));
    one_exact_cycle(&fleet);
    fleet.shutdown().unwrap();
}

#[test]
fn forced_pinned_on_this_machine_runs_marked_oversubscribed() {
    let quota = fleet::quota::detect_live();
    let q = quota.effective_cpus();
    let plan = plan(q, Profile::Pinned);
    assert_eq!(plan.binding, Binding::Pinned);
    if q >= 6.0 {
        eprintln!("this machine has {q} cores: the pinned tier fits, nothing is oversubscribed");
        assert!(!plan.oversubscribed);
        return;
    }
    assert!(
        plan.oversubscribed,
        "{q} cores cannot host the pinned roles"
    );
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    let status = fleet.status(&quota);
    assert!(status.fleet_booted);
    assert!(status.plan.oversubscribed);
    assert!(
        status.census.iter().all(|r| r.oversubscribed),
        "every census row carries the mark"
    );
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["plan"]["oversubscribed"], true);
    assert_eq!(json["plan"]["binding"], "pinned");
    one_exact_cycle(&fleet);
    fleet.shutdown().unwrap();
}

#[test]
fn auto_on_this_machine_runs_serial() {
    let quota = fleet::quota::detect_live();
    let q = quota.effective_cpus();
    let plan = plan(q, Profile::Auto);
    if q >= 6.0 {
        eprintln!("this machine has {q} cores: auto resolves pinned here");
        assert_eq!(plan.binding, Binding::Pinned);
        return;
    }
    assert_eq!(plan.binding, Binding::Serial);
    let fleet = boot(&plan, BootOptions::for_plan(&plan)).expect("boot");
    assert!(!fleet.plan().oversubscribed);
    let census = fleet.census();
    for row in census.iter().filter(|r| r.role.is_some()) {
        assert_eq!(row.binding, CensusBinding::Logical, "{}", row.name);
        assert!(
            row.thread_name.starts_with("work-fleet-serial-"),
            "{}: {}",
            row.name,
            row.thread_name
        );
    }
    let json = serde_json::to_value(fleet.status(&quota)).unwrap();
    assert_eq!(json["plan"]["binding"], "serial");
    assert!(json["census"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["binding"] == "logical"));
    one_exact_cycle(&fleet);
    fleet.shutdown().unwrap();
}
