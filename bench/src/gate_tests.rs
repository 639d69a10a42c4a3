use super::*;
use crate::budgets::Budgets;
use crate::paired::{Arm, BlockFigures, Pair};
use std::path::Path;

fn budget() -> ProfileBudget {
    ProfileBudget {
        description: "t".into(),
        fleet_profile: "auto".into(),
        scale: 0.1,
        block_cycles: 12,
        pairs: 10,
        warmup_blocks: 1,
        slowdown_tolerance: 1.1,
        alpha: 0.02,
        cgroup_quota: Some(2.0),
        throttled_share_max: 0.05,
        threads_created_per_cycle_max: 0.0,
        parity: true,
        lend_reserve: false,
    }
}

fn block(mean_ms: f64) -> BlockFigures {
    BlockFigures {
        label: "fleet auto".into(),
        cycles: 12,
        makespan_mean_ms: mean_ms,
        makespan_p50_ms: mean_ms,
        makespan_max_ms: mean_ms * 1.2,
        over_lower_bound_mean: 1.2,
        parity: true,
        saturated: false,
        threads_created: 0,
        histograms_out_of_range: 0,
        throttled_share: Some(0.0),
        throttle_in_lab_cgroup: true,
        cotenant_p99_us: Some(300.0),
        cpu_seconds: 1.0,
        wall_seconds: 1.5,
    }
}

fn pairs(ratios: &[f64]) -> Vec<Pair> {
    ratios
        .iter()
        .enumerate()
        .map(|(i, r)| Pair {
            first: crate::paired::pair_order(i as u32)[0],
            candidate: block(66.0 * r),
            reference: block(66.0),
        })
        .collect()
}

fn names(b: &[Breach]) -> Vec<&'static str> {
    b.iter().map(|b| b.budget).collect()
}

#[test]
fn the_shipped_budgets_file_parses_and_every_profile_can_fail() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/budgets.toml");
    let b = Budgets::load(&path).unwrap();
    for name in ["A", "B"] {
        let p = b.profile(name, &path).unwrap();
        assert!(p.parity && p.threads_created_per_cycle_max == 0.0, "{name}");
        let n = p.pairs;
        let critical = crate::paired::sign::critical_count(n, p.alpha).unwrap();
        assert!(critical <= n, "{name}");
        // All pairs at 1.5× fail; all at 1.0× pass.
        let (slow, _) = check_pairs(&pairs(&vec![1.5; n as usize]), p, None);
        assert_eq!(names(&slow), ["paired_slowdown"], "{name}");
        let (same, _) = check_pairs(&pairs(&vec![1.0; n as usize]), p, None);
        assert!(same.is_empty(), "{name}: {same:?}");
    }
    assert_eq!(b.profile("A", &path).unwrap().cgroup_quota, Some(2.0));
    let c = b.compare.as_ref().expect("a [compare] table");
    assert!(c.threads_created_per_cycle_max == 0.0 && c.peak_runnable_over_floor_quota_max <= 1);
    assert!(c.rate == "live" || c.rate == "stress", "{}", c.rate);
    assert!(b
        .profile("C", &path)
        .unwrap_err()
        .to_string()
        .contains("A, B"));
}

#[test]
fn a_profile_that_could_never_fail_is_refused_naming_the_keys() {
    let mut p = budget();
    p.pairs = 5;
    assert!(p.validate("A").unwrap_err().contains("pairs 5"));
    let mut p = budget();
    p.slowdown_tolerance = 1.0;
    p.alpha = 1.0;
    let e = p.validate("A").unwrap_err();
    assert!(
        e.contains("slowdown_tolerance") && e.contains("alpha"),
        "{e}"
    );
    let mut p = budget();
    p.block_cycles = 0;
    p.cgroup_quota = Some(0.0);
    let e = p.validate("A").unwrap_err();
    assert!(
        e.contains("block_cycles") && e.contains("cgroup_quota"),
        "{e}"
    );
    assert!(budget().validate("A").is_ok());
}

#[test]
fn an_unknown_key_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.toml");
    std::fs::write(&p, "[profile.A]\nmakespan_p95 = 1\n").unwrap();
    let e = Budgets::load(&p).unwrap_err().to_string();
    assert!(e.contains("makespan_p95"), "{e}");
}

#[test]
fn the_timed_gate_fails_at_the_critical_count_of_pairs_above_the_tolerance() {
    let b = budget();
    for above in 0..=10usize {
        let r: Vec<f64> = (0..10)
            .map(|i| if i < above { 1.2 } else { 1.02 })
            .collect();
        let (breaches, v) = check_pairs(&pairs(&r), &b, None);
        assert_eq!(v.above as usize, above);
        assert_eq!(
            names(&breaches) == ["paired_slowdown"],
            above >= 9,
            "{above}: {breaches:?}"
        );
    }
}

#[test]
fn each_deterministic_breach_names_its_budget() {
    let b = budget();
    let mut p = pairs(&[1.0; 10]);
    p[2].candidate.parity = false;
    p[3].reference.parity = false;
    p[4].candidate.saturated = true;
    p[5].candidate.histograms_out_of_range = 2;
    p[6].candidate.threads_created = 1;
    p[7].candidate.throttled_share = Some(0.9);
    let (breaches, _) = check_pairs(&p, &b, None);
    assert_eq!(
        names(&breaches),
        [
            "parity",
            "reference",
            "saturation",
            "histogram_range",
            "threads_created_per_cycle_max",
            "throttled_share_max"
        ]
    );
    assert!(breaches[0].detail.contains("pair 3"), "{}", breaches[0]);
}

#[test]
fn a_throttle_figure_not_read_in_a_lab_cgroup_fails_unless_the_skip_is_allowed() {
    let b = budget();
    let mut p = pairs(&[1.0; 10]);
    p[0].candidate.throttle_in_lab_cgroup = false;
    p[0].candidate.throttled_share = None;
    let (breaches, _) = check_pairs(&p, &b, None);
    assert_eq!(names(&breaches), ["throttled_share_max"]);
    assert!(
        breaches[0].detail.contains("could not fail"),
        "{}",
        breaches[0]
    );
    let (breaches, _) = check_pairs(&p, &b, Some("allowed"));
    assert!(breaches.is_empty(), "{breaches:?}");
    let mut unquoted = b.clone();
    unquoted.cgroup_quota = None;
    assert!(check_pairs(&p, &unquoted, None).0.is_empty());
}

#[test]
fn the_first_arm_alternates_in_the_fixture_as_in_the_gate() {
    let p = pairs(&[1.0; 4]);
    let firsts: Vec<Arm> = p.iter().map(|p| p.first).collect();
    assert_eq!(
        firsts,
        [
            Arm::Candidate,
            Arm::Reference,
            Arm::Candidate,
            Arm::Reference
        ]
    );
}
