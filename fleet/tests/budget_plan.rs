//! Budget algebra as properties, and the tier table row by row.
//! Source: `DESIGN.md` §3 "Budget authority", "Plan (host tiers)"; seed 000 §5, §14.

use fleet::budget::{ambient_share, BudgetError, BudgetOverrides, BudgetShape, FleetBudget};
use fleet::census::CensusBinding;
use fleet::plan::{Binding, Plan, PlanError, Profile, TierRefusal};
use fleet::role::WorkerRole;
use proptest::prelude::*;

const NONE: BudgetOverrides = BudgetOverrides {
    reserve_cpus: None,
    ambient_cpus: None,
    resolve_cpus: None,
    merge_cpus: None,
    solver_cpus: None,
    sim_slot_cap: None,
};

/// Quotas from 0.5 to 256: quarter steps plus arbitrary fractions.
fn quota() -> impl Strategy<Value = f64> {
    prop_oneof![(2u32..=1024).prop_map(|k| k as f64 / 4.0), 0.5f64..256.0]
}

fn overrides() -> impl Strategy<Value = BudgetOverrides> {
    let o = || proptest::option::of(0u32..6);
    (o(), o(), o(), o(), o(), o()).prop_map(|(h, a, r, m, s, c)| BudgetOverrides {
        reserve_cpus: h,
        ambient_cpus: a,
        resolve_cpus: r,
        merge_cpus: m,
        solver_cpus: s,
        sim_slot_cap: c,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn default_budget_algebra(q in quota()) {
        let n = q.floor() as u32;
        match FleetBudget::derive(q, &NONE) {
            Ok(b) => {
                prop_assert!(n >= 6);
                prop_assert!(b.integer_sum() <= n);
                prop_assert_eq!(b.integer_sum(), n, "defaults spend every whole core");
                prop_assert!(b.solver_cpus >= 2);
                prop_assert_eq!((b.reserve_cpus, b.resolve_cpus, b.merge_cpus), (1, 1, 1));
                prop_assert_eq!(b.ambient_cpus, ambient_share(n));
                prop_assert_eq!(b.ambient_cpus, (n / 4).max(1));
                prop_assert_eq!(b.solver_pins, 6);
                prop_assert_eq!(b.sim_slot_cap, 4);
                prop_assert!(b.fractional_cpus >= 0.0 && b.fractional_cpus < 1.0);
                prop_assert!((b.fractional_cpus - (q - n as f64)).abs() < 1e-12);
                prop_assert!(!b.oversubscribed);
                // Only I/O-bound consumers carry the fraction.
                for r in b.rows() {
                    if r.io_fraction > 0.0 {
                        prop_assert!(r.consumer == "sim_driver" || r.consumer == "ambient_io", "{}", r.consumer);
                    }
                }
                let row_sum: u32 = b.rows().iter().map(|r| r.cores).sum();
                prop_assert_eq!(row_sum, b.integer_sum());
            }
            Err(BudgetError::SolverShareTooSmall { solver_cpus, .. }) => {
                prop_assert!(n < 6);
                prop_assert!(solver_cpus < 2);
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn overrides_are_terminal_and_sum_checked(q in quota(), o in overrides()) {
        let n = q.floor() as u32;
        match FleetBudget::derive(q, &o) {
            Ok(b) => {
                prop_assert!(b.integer_sum() <= n);
                prop_assert!(b.solver_cpus >= 2);
                for (key, value) in o.set_keys() {
                    let got = match key {
                        "reserve_cpus" => b.reserve_cpus,
                        "ambient_cpus" => b.ambient_cpus,
                        "resolve_cpus" => b.resolve_cpus,
                        "merge_cpus" => b.merge_cpus,
                        "solver_cpus" => b.solver_cpus,
                        "sim_slot_cap" => b.sim_slot_cap,
                        _ => unreachable!(),
                    };
                    prop_assert_eq!(got, value, "override {} is terminal", key);
                }
            }
            Err(BudgetError::ZeroOverride { key }) => {
                prop_assert!(o.set_keys().contains(&(key, 0)));
            }
            Err(BudgetError::Oversubscribed { declared, quota_floor, .. }) => {
                prop_assert!(o.solver_cpus.is_some());
                prop_assert!(declared > quota_floor);
                prop_assert_eq!(quota_floor, n);
            }
            Err(BudgetError::SolverShareTooSmall { solver_cpus, .. }) => prop_assert!(solver_cpus < 2),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn every_plan_fits_or_is_marked(q in quota(), profile in prop_oneof![Just(Profile::Auto), Just(Profile::Pinned), Just(Profile::Serial)]) {
        let n = q.floor() as u32;
        match Plan::resolve(q, profile, &NONE) {
            Err(PlanError::BelowHostFloor { .. }) => prop_assert!(q < 2.0),
            Err(e) => prop_assert!(false, "unexpected error {e}"),
            Ok(plan) => {
                prop_assert!(q >= 2.0);
                prop_assert_eq!(plan.budget.oversubscribed, plan.oversubscribed);
                if plan.oversubscribed {
                    prop_assert_eq!(profile, Profile::Pinned);
                    prop_assert!(plan.budget.integer_sum() > n);
                    prop_assert!(plan.tier_refused.is_some());
                } else {
                    prop_assert!(plan.budget.integer_sum() <= n);
                }
                let expect = match profile {
                    Profile::Auto => if n >= 6 { Binding::Pinned } else { Binding::Serial },
                    Profile::Pinned => Binding::Pinned,
                    Profile::Serial => Binding::Serial,
                };
                prop_assert_eq!(plan.binding, expect);
                let layout = plan.seat_layout();
                prop_assert_eq!(layout.seats.len() as u32, 6 + plan.budget.sim_slot_cap + 6);
                prop_assert_eq!(plan.census_projection().len(), layout.seats.len() + 2 + layout.cycle_threads as usize);
            }
        }
    }
}

#[test]
fn overrides_above_the_quota_fail_at_derive_time() {
    let o = BudgetOverrides {
        solver_cpus: Some(6),
        ..NONE
    };
    let e = FleetBudget::derive(8.0, &o).unwrap_err();
    assert!(
        matches!(
            e,
            BudgetError::Oversubscribed {
                declared: 11,
                quota_floor: 8,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("solver_cpus=6"), "{e}");
    let o = BudgetOverrides {
        ambient_cpus: Some(0),
        ..NONE
    };
    assert_eq!(
        FleetBudget::derive(8.0, &o).unwrap_err(),
        BudgetError::ZeroOverride {
            key: "ambient_cpus"
        }
    );
    assert!(matches!(
        FleetBudget::derive(f64::NAN, &NONE),
        Err(BudgetError::InvalidQuota { .. })
    ));
    assert!(matches!(
        FleetBudget::derive(-1.0, &NONE),
        Err(BudgetError::InvalidQuota { .. })
    ));
}

#[test]
fn an_override_can_give_back_cores() {
    let o = BudgetOverrides {
        solver_cpus: Some(2),
        ..NONE
    };
    let b = FleetBudget::derive(16.0, &o).unwrap();
    assert_eq!((b.ambient_cpus, b.solver_cpus, b.integer_sum()), (4, 2, 9));
}

/// One row per tier-table case: (Q, profile) → (binding, oversubscribed,
/// refused, S or the serial cycle threads C, A).
#[test]
fn tier_table_row_by_row() {
    use Binding::*;
    use Profile as P;
    let rows: [(f64, Profile, Binding, bool, bool, u32, u32); 16] = [
        (2.0, P::Auto, Serial, false, true, 1, 0),
        (3.0, P::Auto, Serial, false, true, 2, 0),
        (4.5, P::Auto, Serial, false, true, 3, 0),
        (5.0, P::Auto, Serial, false, true, 4, 0),
        (5.99, P::Auto, Serial, false, true, 4, 0),
        (6.0, P::Auto, Pinned, false, false, 2, 1),
        (6.5, P::Auto, Pinned, false, false, 2, 1),
        (7.0, P::Auto, Pinned, false, false, 3, 1),
        (8.0, P::Auto, Pinned, false, false, 3, 2),
        (16.0, P::Auto, Pinned, false, false, 9, 4),
        (2.0, P::Pinned, Pinned, true, true, 2, 1),
        (5.0, P::Pinned, Pinned, true, true, 2, 1),
        (8.0, P::Pinned, Pinned, false, false, 3, 2),
        (2.0, P::Serial, Serial, false, false, 1, 0),
        (8.0, P::Serial, Serial, false, false, 6, 0),
        (64.0, P::Serial, Serial, false, false, 6, 0),
    ];
    for (q, profile, binding, over, refused, s, a) in rows {
        let plan =
            Plan::resolve(q, profile, &NONE).unwrap_or_else(|e| panic!("Q={q} {profile}: {e}"));
        let ctx = format!("Q={q} {profile}");
        assert_eq!(plan.binding, binding, "{ctx}");
        assert_eq!(plan.oversubscribed, over, "{ctx}");
        assert_eq!(plan.tier_refused.is_some(), refused, "{ctx}");
        assert_eq!(plan.budget.solver_cpus, s, "{ctx}");
        assert_eq!(plan.budget.ambient_cpus, a, "{ctx}");
        assert_eq!(plan.quota_cpus, q);
        let shape = if binding == Pinned {
            BudgetShape::Pinned
        } else {
            BudgetShape::Serial
        };
        assert_eq!(plan.budget.shape, shape, "{ctx}");
        if let Some(TierRefusal::QuotaTooSmallForPinnedRoles { needed_cpus, .. }) =
            plan.tier_refused
        {
            assert_eq!(needed_cpus, 6, "{ctx}");
        }
    }
    for q in [0.5, 1.0, 1.5, 1.99] {
        for p in [Profile::Auto, Profile::Pinned, Profile::Serial] {
            let e = Plan::resolve(q, p, &NONE).unwrap_err();
            assert!(
                matches!(e, PlanError::BelowHostFloor { .. }),
                "Q={q} {p}: {e}"
            );
            assert!(e.to_string().contains("BelowHostFloor"));
        }
    }
}

#[test]
fn fractional_quota_goes_to_io_only() {
    let plan = Plan::resolve(6.5, Profile::Auto, &NONE).unwrap();
    assert_eq!(plan.budget.integer_sum(), 6);
    assert_eq!(plan.budget.fractional_cpus, 0.5);
    let io: Vec<_> = plan
        .budget
        .rows()
        .into_iter()
        .filter(|r| r.io_fraction > 0.0)
        .map(|r| r.consumer)
        .collect();
    assert_eq!(io, ["ambient_io", "sim_driver"]);
}

#[test]
fn profile_parses() {
    assert_eq!("auto".parse::<Profile>().unwrap(), Profile::Auto);
    assert_eq!("Pinned".parse::<Profile>().unwrap(), Profile::Pinned);
    assert_eq!("serial".parse::<Profile>().unwrap(), Profile::Serial);
    assert!("legacy"
        .parse::<Profile>()
        .unwrap_err()
        .to_string()
        .contains("auto, pinned or serial"));
}

#[test]
fn pinned_layout_names_every_seat() {
    let plan = Plan::resolve(8.0, Profile::Auto, &NONE).unwrap();
    let l = plan.seat_layout();
    assert_eq!(l.binding, Binding::Pinned);
    assert_eq!(
        (l.walk_admission, l.sim_slot_cap, l.ambient_workers),
        (3, 4, 2)
    );
    let names: Vec<_> = l.seats.iter().map(|s| s.thread_name.as_str()).collect();
    let mut expect: Vec<String> = (0..6).map(|i| format!("work-fleet-solver-{i}")).collect();
    expect.extend((0..4).map(|i| format!("work-fleet-sim-{i}")));
    for label in [
        "resolve",
        "merge",
        "poolupd",
        "registrar",
        "verifier",
        "submitter",
    ] {
        expect.push(format!("work-fleet-{label}-0"));
    }
    assert_eq!(names, expect);
    let solver: Vec<u32> = l.seats_of(WorkerRole::Solver).map(|s| s.index).collect();
    assert_eq!(solver, [0, 1, 2, 3, 4, 5]);
    let census = plan.census_projection();
    assert!(census
        .iter()
        .filter(|r| r.role.is_some())
        .all(|r| r.binding == CensusBinding::Pinned));
    let ambient = census.iter().find(|r| r.name == "ambient_io").unwrap();
    assert_eq!((ambient.count, ambient.binding), (2, CensusBinding::Shared));
}

#[test]
fn serial_layout_has_the_same_shape_dealt_over_its_cycle_threads() {
    let pinned = Plan::resolve(8.0, Profile::Auto, &NONE)
        .unwrap()
        .seat_layout();
    let plan = Plan::resolve(4.0, Profile::Auto, &NONE).unwrap();
    let l = plan.seat_layout();
    assert_eq!(l.binding, Binding::Serial);
    assert_eq!(
        l.walk_admission, 6,
        "every bin may interleave at its sim waits"
    );
    let shape = |l: &fleet::plan::SeatLayout| {
        l.seats
            .iter()
            .map(|s| (s.role, s.index))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&l), shape(&pinned));
    // Q = 4: three cycle threads; seat k of the layout rides thread k mod 3,
    // so the six bins sit two to a thread.
    assert_eq!(l.cycle_threads, 3);
    for (k, s) in l.seats.iter().enumerate() {
        let t = (k % 3) as u32;
        assert_eq!(l.cycle_thread_of(s.role, s.index), Some(t));
        assert_eq!(s.thread_name, format!("work-fleet-serial-{t}"));
    }
    let bins_per_thread: Vec<usize> = (0..3)
        .map(|t| {
            l.seats_of(fleet::WorkerRole::Solver)
                .filter(|s| s.thread_name == format!("work-fleet-serial-{t}"))
                .count()
        })
        .collect();
    assert_eq!(bins_per_thread, vec![2, 2, 2]);
    assert_eq!(pinned.cycle_thread_of(fleet::WorkerRole::Solver, 0), None);
    let census = plan.census_projection();
    assert!(census
        .iter()
        .filter(|r| r.role.is_some())
        .all(|r| r.binding == CensusBinding::Logical));
    for t in 0..3 {
        let row = census
            .iter()
            .find(|r| r.thread_name == format!("work-fleet-serial-{t}") && r.role.is_none())
            .unwrap();
        assert_eq!(row.binding, CensusBinding::Pinned);
    }
}

/// Decision 0003: below the pinned tier the serial table spends every
/// whole core — the reserve H, and C cycle threads with A = 0 — so
/// C + A = ⌊Q⌋ − H exactly, and the layout runs C cycle threads (one
/// census row each). Before the decision the table stopped at H + 1 + A
/// (3 of 5 cores at Q = 5).
#[test]
fn the_serial_tier_spends_its_whole_budget_for_every_quota_from_2_to_6() {
    for q in [2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 5.99] {
        let plan = Plan::resolve(q, Profile::Auto, &NONE).unwrap();
        let n = q.floor() as u32;
        let b = &plan.budget;
        let ctx = format!("Q={q}");
        assert_eq!(plan.binding, Binding::Serial, "{ctx}");
        assert_eq!(b.reserve_cpus, 1, "{ctx}");
        assert_eq!(b.solver_cpus + b.ambient_cpus, n - b.reserve_cpus, "{ctx}");
        assert_eq!(b.integer_sum(), n, "{ctx}: the shares sum to ⌊Q⌋");
        let rows = b.rows();
        assert_eq!(rows.iter().map(|r| r.cores).sum::<u32>(), n, "{ctx}");
        let seat = rows.iter().find(|r| r.consumer == "serial_seat").unwrap();
        assert_eq!((seat.cores, seat.threads), (n - 1, n - 1), "{ctx}");
        let layout = plan.seat_layout();
        assert_eq!(layout.cycle_threads, n - 1, "{ctx}: one thread per core");
        let threads = plan
            .census_projection()
            .into_iter()
            .filter(|r| r.role.is_none() && r.name.starts_with("serial-"))
            .count() as u32;
        assert_eq!(threads, n - 1, "{ctx}: one census row per cycle thread");
        let used: std::collections::BTreeSet<_> =
            layout.seats.iter().map(|s| s.thread_name.clone()).collect();
        assert_eq!(
            used.len() as u32,
            n - 1,
            "{ctx}: every cycle thread has seats"
        );
    }
}

/// An ambient override in the serial table takes its cores from the cycle
/// threads; one that leaves none is refused at derive time.
#[test]
fn a_serial_ambient_override_comes_out_of_the_cycle_threads() {
    let o = BudgetOverrides {
        ambient_cpus: Some(2),
        ..NONE
    };
    let b = FleetBudget::derive_serial(5.0, &o).unwrap();
    assert_eq!((b.solver_cpus, b.ambient_cpus, b.integer_sum()), (2, 2, 5));
    let o = BudgetOverrides {
        ambient_cpus: Some(4),
        ..NONE
    };
    assert!(matches!(
        FleetBudget::derive_serial(5.0, &o),
        Err(BudgetError::Oversubscribed { .. })
    ));
}

#[test]
fn forced_pinned_on_a_small_host_marks_every_census_row() {
    let plan = Plan::resolve(2.0, Profile::Pinned, &NONE).unwrap();
    assert!(plan.oversubscribed);
    assert!(plan.census_projection().iter().all(|r| r.oversubscribed));
    // Oversubscribed: every bin is admitted (2 walks at a time idled the
    // cores while the admitted walks waited on their sims).
    assert_eq!(plan.seat_layout().walk_admission, 6);
    // Within budget the solver share bounds the walks.
    let fits = Plan::resolve(8.0, Profile::Pinned, &NONE).unwrap();
    assert!(!fits.oversubscribed);
    assert_eq!(fits.seat_layout().walk_admission, fits.budget.solver_cpus);
}
