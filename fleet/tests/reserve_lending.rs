//! Where the serial tier lends its reserved cores at the idle class, and the
//! layout that follows. Source: `docs/decisions/0009-reserve-lent-at-idle-class.md`.

use fleet::plan::{Binding, Plan, Profile};
use fleet::quota::{QuotaReport, QuotaSource};

fn report(source: QuotaSource, exact_cpus: Option<f64>, affinity_cpus: u32) -> QuotaReport {
    QuotaReport {
        exact_cpus,
        affinity_cpus,
        source,
        reason: String::new(),
        cgroup_dir: None,
        limiting_dir: None,
        affinity_list: (0..affinity_cpus as usize).collect(),
    }
}

fn unknown() -> QuotaSource {
    QuotaSource::Unknown {
        reason: "unreadable".into(),
    }
}

/// The whole table: detection × the plan's quota × profile. Lent only for
/// a serial plan whose quota covers every allowed CPU in a cgroup that can
/// never throttle the process.
#[test]
fn the_reserve_is_lent_only_where_the_quota_cannot_throttle() {
    // (source, cgroup quota, affinity CPUs, plan quota, profile, lent?)
    let rows: Vec<(QuotaSource, Option<f64>, u32, f64, Profile, bool)> = vec![
        // No cgroup limit; the plan is for every allowed CPU.
        (QuotaSource::Affinity, None, 2, 2.0, Profile::Auto, true),
        (QuotaSource::Affinity, None, 4, 4.0, Profile::Auto, true),
        (QuotaSource::Affinity, None, 5, 5.0, Profile::Serial, true),
        // A cgroup limit at (or above) the allowed CPUs cannot bind.
        (
            QuotaSource::CgroupV1,
            Some(2.0),
            2,
            2.0,
            Profile::Auto,
            true,
        ),
        (
            QuotaSource::CgroupV2,
            Some(3.0),
            3,
            3.0,
            Profile::Auto,
            true,
        ),
        (
            QuotaSource::CgroupV2,
            Some(4.0),
            3,
            3.0,
            Profile::Auto,
            true,
        ),
        // A cgroup limit below the allowed CPUs binds: an idle-class thread
        // would spend quota the host's own threads need.
        (
            QuotaSource::CgroupV1,
            Some(2.0),
            16,
            2.0,
            Profile::Auto,
            false,
        ),
        (
            QuotaSource::CgroupV2,
            Some(3.5),
            4,
            3.5,
            Profile::Auto,
            false,
        ),
        // The plan asks for fewer cores than the process may use.
        (QuotaSource::Affinity, None, 16, 2.0, Profile::Auto, false),
        // An unknown quota cannot be ruled out, nor an empty mask.
        (unknown(), None, 2, 2.0, Profile::Auto, false),
        (QuotaSource::Affinity, None, 0, 2.0, Profile::Auto, false),
        // The pinned binding has no reserve to lend this way.
        (QuotaSource::Affinity, None, 8, 8.0, Profile::Auto, false),
        (QuotaSource::Affinity, None, 2, 2.0, Profile::Pinned, false),
    ];
    for (source, exact, aff, q, profile, lent) in rows {
        let ctx = format!("{source:?} quota {exact:?} affinity {aff} plan {q} {profile:?}");
        let detection = report(source, exact, aff);
        let plan = Plan::resolve(q, profile, &Default::default()).unwrap();
        let after = plan.clone().lend_reserve(&detection);
        assert_eq!(after.reserve_lent, lent, "{ctx}");
        // Nothing else about the plan changes.
        assert_eq!(
            Plan {
                reserve_lent: false,
                ..after
            },
            plan,
            "{ctx}"
        );
    }
}

#[test]
fn cannot_throttle_reads_the_limit_against_the_mask() {
    assert!(report(QuotaSource::Affinity, None, 2).cannot_throttle());
    assert!(report(QuotaSource::CgroupV1, Some(2.0), 2).cannot_throttle());
    assert!(!report(QuotaSource::CgroupV1, Some(1.5), 2).cannot_throttle());
    assert!(!report(QuotaSource::CgroupV2, Some(2.0), 0).cannot_throttle());
    assert!(!report(unknown(), None, 2).cannot_throttle());
}

/// For every serial quota from 2 to 6: lending adds the reserved core's
/// cycle thread (⌊Q⌋ threads in all), every thread has seats, the census
/// has one row per thread and says which are lent; the budget itself (the
/// shares, summing to ⌊Q⌋) is untouched.
#[test]
fn a_lent_reserve_adds_its_cycle_threads_for_every_quota_from_2_to_6() {
    for q in [2.0f64, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 5.99] {
        let n = q.floor() as u32;
        let ctx = format!("Q={q}");
        let plain = Plan::resolve(q, Profile::Auto, &Default::default()).unwrap();
        assert_eq!(plain.binding, Binding::Serial, "{ctx}");
        let plan = plain
            .clone()
            .lend_reserve(&report(QuotaSource::Affinity, None, n));
        assert!(plan.reserve_lent, "{ctx}");
        assert_eq!(plan.budget, plain.budget, "{ctx}: the shares are the same");
        assert_eq!(plan.budget.integer_sum(), n, "{ctx}");
        let layout = plan.seat_layout();
        assert_eq!(
            layout.cycle_threads,
            plain.seat_layout().cycle_threads + plan.budget.reserve_cpus,
            "{ctx}"
        );
        assert_eq!(layout.cycle_threads, n, "{ctx}: one thread per core");
        assert_eq!(layout.seats.len(), plain.seat_layout().seats.len(), "{ctx}");
        let used: std::collections::BTreeSet<_> =
            layout.seats.iter().map(|s| s.thread_name.clone()).collect();
        assert_eq!(used.len() as u32, n, "{ctx}: every cycle thread has seats");
        let rows: Vec<_> = plan
            .census_projection()
            .into_iter()
            .filter(|r| r.role.is_none() && r.name.starts_with("serial-"))
            .collect();
        assert_eq!(rows.len() as u32, n, "{ctx}");
        let lent_rows = rows
            .iter()
            .filter(|r| r.sizing_rule.contains("reserved core lent"))
            .count() as u32;
        assert_eq!(lent_rows, plan.budget.reserve_cpus, "{ctx}");
    }
}

/// A re-plan keeps the lending: the cycle threads and their class are
/// fixed at boot.
#[test]
fn a_replan_keeps_the_lending() {
    let plan = Plan::resolve(3.0, Profile::Auto, &Default::default())
        .unwrap()
        .lend_reserve(&report(QuotaSource::Affinity, None, 3));
    assert!(plan.reserve_lent);
    let smaller = plan.replan(2.0).unwrap();
    assert!(smaller.reserve_lent);
    assert_eq!(smaller.binding, Binding::Serial);
}

/// An older plan file without the field reads as not lent.
#[test]
fn a_plan_without_the_field_is_not_lent() {
    let plan = Plan::resolve(2.0, Profile::Auto, &Default::default()).unwrap();
    let mut v = serde_json::to_value(&plan).unwrap();
    v.as_object_mut().unwrap().remove("reserve_lent");
    let back: Plan = serde_json::from_value(v).unwrap();
    assert!(!back.reserve_lent);
}
