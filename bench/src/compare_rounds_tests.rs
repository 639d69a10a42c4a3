use super::*;
use crate::compare_gate::tests::{budget, run};

/// A round with the fleet at `fleet_p99` ms against a pile at 55 and plain
/// Tokio at 45.
fn round(fleet_p99: f64) -> Vec<RunReport> {
    vec![
        run("fleet auto", false, fleet_p99, 100.0),
        run("pile of pools", true, 55.0, 900.0),
        run("plain tokio", true, 45.0, 1500.0),
    ]
}

fn names(b: &[Breach]) -> Vec<&'static str> {
    b.iter().map(|b| b.budget).collect()
}

#[test]
fn rotation_puts_every_contender_in_every_position_once_over_n_rounds() {
    let items = ["a", "b", "c", "d"];
    assert_eq!(rotated(&items, 0), items);
    assert_eq!(rotated(&items, 1), ["b", "c", "d", "a"]);
    assert_eq!(rotated(&items, 5), rotated(&items, 1));
    for (i, item) in items.iter().enumerate() {
        let positions: std::collections::BTreeSet<usize> = (0..4)
            .map(|r| rotated(&items, r).iter().position(|x| x == item).unwrap())
            .collect();
        assert_eq!(positions.len(), 4, "item {i}");
    }
    assert!(rotated::<u8>(&[], 3).is_empty());
}

#[test]
fn spreads_are_medians_with_their_extremes() {
    let s = spread(&[3.0, 1.0, 2.0, f64::NAN]).unwrap();
    assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
    assert_eq!(spread(&[4.0, 1.0]).unwrap().median, 2.5);
    assert!(spread(&[]).is_none());
    assert_eq!(
        format!("{:.1}", spread(&[1.0, 2.0, 4.0]).unwrap()),
        "2.0 (1.0–4.0)"
    );
}

#[test]
fn one_slow_round_does_not_fail_the_gate_and_every_round_slow_does() {
    let b = budget();
    let mut rounds: Vec<_> = (0..5).map(|_| round(50.0)).collect();
    rounds[2] = round(200.0);
    assert!(check_rounds(&rounds, &b, 0.1, "stress").is_empty());
    // Four of five over the limit: P(K ≥ 4 | 5) = 0.1875 > 0.05, still a pass.
    let rounds: Vec<_> = (0..5)
        .map(|i| round(if i == 0 { 50.0 } else { 90.0 }))
        .collect();
    assert!(check_rounds(&rounds, &b, 0.1, "stress").is_empty());
    let rounds: Vec<_> = (0..5).map(|_| round(90.0)).collect();
    let v = check_rounds(&rounds, &b, 0.1, "stress");
    assert_eq!(
        names(&v),
        [
            "makespan_p99_over_best_baseline_max",
            "makespan_p99_over_pile_max"
        ]
    );
    assert!(v[0].detail.contains("in 5 of 5 rounds"), "{}", v[0].detail);
}

#[test]
fn a_deterministic_breach_in_any_round_fails_once_by_name() {
    let b = budget();
    let mut rounds: Vec<_> = (0..5).map(|_| round(50.0)).collect();
    rounds[3][0].threads.created_during_run = 7;
    rounds[4][0].threads.created_during_run = 7;
    rounds[1][2].parity = false;
    let v = check_rounds(&rounds, &b, 0.1, "stress");
    assert_eq!(names(&v), ["parity", "threads_created_per_cycle_max"]);
    assert!(v[0].detail.starts_with("round 2: "), "{}", v[0].detail);
    assert!(v[1].detail.starts_with("round 4: "), "{}", v[1].detail);
    assert_eq!(names(&check_rounds(&[], &b, 0.1, "stress")), ["contenders"]);
}

#[test]
fn a_sampled_runnable_peak_fails_only_when_every_round_is_over() {
    let b = budget();
    // ⌊Q⌋ 2 + 1: a peak of 4 is over the limit.
    let mut rounds: Vec<_> = (0..5).map(|_| round(50.0)).collect();
    rounds[4][0].threads.peak_runnable = 4;
    assert!(check_rounds(&rounds, &b, 0.1, "stress").is_empty());
    for r in rounds.iter_mut() {
        r[0].threads.peak_runnable = 4;
    }
    let v = check_rounds(&rounds, &b, 0.1, "stress");
    assert_eq!(names(&v), ["peak_runnable_over_floor_quota_max"]);
    assert!(v[0].detail.contains("in 5 of 5 rounds"), "{}", v[0].detail);
    assert!(v[0].detail.contains("peaked at 4"), "{}", v[0].detail);
}

#[test]
fn rounds_and_level_that_could_never_fail_are_refused() {
    let mut b = budget();
    assert!(validate(&b).is_ok());
    b.rounds = 4;
    assert!(validate(&b).unwrap_err().contains("rounds 4"));
    b.rounds = 5;
    b.alpha = 0.0;
    assert!(validate(&b).unwrap_err().contains("alpha"));
}

#[test]
fn the_median_round_and_the_rounds_table() {
    let rounds = vec![round(60.0), round(40.0), round(50.0)];
    assert_eq!(median_round(&rounds), 2);
    let order = vec![
        vec![
            "fleet auto".to_string(),
            "pile of pools".into(),
            "plain tokio".into(),
        ],
        vec![
            "pile of pools".to_string(),
            "plain tokio".into(),
            "fleet auto".into(),
        ],
        vec![
            "plain tokio".to_string(),
            "fleet auto".into(),
            "pile of pools".into(),
        ],
    ];
    let f = figures(&rounds, &order);
    assert_eq!(f.len(), 9);
    let fleet_positions: Vec<u32> = f
        .iter()
        .filter(|x| x.label == "fleet auto")
        .map(|x| x.position)
        .collect();
    assert_eq!(fleet_positions, [1, 3, 2]);
    let t = render_rounds(&rounds);
    assert!(t.contains("Rounds: 3"), "{t}");
    assert!(
        t.contains("fleet auto") && t.contains("50.0 (40.0–60.0)"),
        "{t}"
    );
    // fleet ÷ pile per round: 60/55, 40/55, 50/55.
    assert!(
        t.contains("÷ pile of pools") && t.contains("0.91 (0.73–1.09)"),
        "{t}"
    );
    // No round lent its reserve: no promotions line, none in the figures.
    assert!(!t.contains("promotions per round"), "{t}");
    assert!(f.iter().all(|x| x.lent_promotions.is_none()));
}

#[test]
fn each_rounds_lend_promotions_are_kept_and_shown() {
    let mut rounds = vec![round(60.0), round(40.0), round(50.0)];
    for (r, n) in rounds.iter_mut().zip([0u64, 3, 1]) {
        r[0].lent_reserve = Some(fleet_bindings::LentReserve {
            promotions: n,
            promoted: n > 0,
        });
    }
    // The third round's fleet did not lend (an unlent plan).
    rounds[2][0].lent_reserve = None;
    let order: Vec<Vec<String>> = (0..3)
        .map(|_| rounds[0].iter().map(|r| r.label.clone()).collect())
        .collect();
    let f = figures(&rounds, &order);
    let fleet: Vec<Option<u64>> = f
        .iter()
        .filter(|x| x.label == "fleet auto")
        .map(|x| x.lent_promotions)
        .collect();
    assert_eq!(fleet, [Some(0), Some(3), None]);
    assert!(f
        .iter()
        .filter(|x| x.label != "fleet auto")
        .all(|x| x.lent_promotions.is_none()));
    let t = render_rounds(&rounds);
    assert!(
        t.contains("promotions per round (decision 0022): 0, 3, -"),
        "{t}"
    );
    // An older compare.json without the key still reads.
    let old = r#"{"round":1,"position":1,"label":"fleet auto","makespan_p99_ms":1.0,"makespan_p50_ms":1.0,"cotenant_p99_us":null}"#;
    let back: RoundFigure = serde_json::from_str(old).unwrap();
    assert_eq!(back.lent_promotions, None);
}

#[test]
fn a_reported_standing_never_fails_and_everything_else_still_does() {
    let mut b = budget();
    let mut rounds: Vec<_> = (0..5).map(|_| round(80.0)).collect();
    rounds[2][0].threads.created_during_run = 7;
    let all = check_rounds(&rounds, &b, 0.1, "stress");
    assert!(names(&all).contains(&"makespan_p99_over_best_baseline_max"));
    let (fails, reported) = split_standing(all.clone(), &b);
    assert_eq!(fails, all, "gated: every breach fails");
    assert!(reported.is_empty());
    b.standing = Standing::Report;
    let (fails, reported) = split_standing(all, &b);
    assert_eq!(names(&fails), ["threads_created_per_cycle_max"]);
    assert!(!reported.is_empty());
    assert!(
        reported.iter().all(|r| STANDING.contains(&r.budget)),
        "{reported:?}"
    );
}
