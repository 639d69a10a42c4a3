use super::*;
use crate::ledger::{Loss, LowerDevice};
use crate::report::EventFigures;
use crate::Scenario;

fn contender(name: &str, regret: f64, attempts: u64) -> ContenderReport {
    ContenderReport {
        name: name.into(),
        regret_total: regret,
        attempts,
        ..Default::default()
    }
}

fn run(scenario: &str, seed: u64, contenders: Vec<ContenderReport>) -> SimReport {
    SimReport {
        scenario: scenario.into(),
        seed,
        devices: 150,
        hours: 6.0,
        contenders,
        ..Default::default()
    }
}

#[test]
fn every_scenario_has_headlines_in_report_order() {
    let mut order = Vec::new();
    for h in HEADLINES {
        let s = Scenario::parse(h.scenario).expect("a headline names a scenario");
        if order.last() != Some(&s) {
            assert!(!order.contains(&s), "{} split in the table", h.scenario);
            order.push(s);
        }
    }
    assert_eq!(
        order,
        Scenario::ALL,
        "one block per scenario, in report order"
    );
    // Each headline reads something from a default report or says it has
    // nothing: never a panic.
    for h in HEADLINES {
        let _ = (h.read)(&ContenderReport::default());
    }
}

#[test]
fn a_figure_over_seeds_has_its_median_range_and_paired_record() {
    // regret/k: router 2, 4, 9; flat 3, 3, 3 (per 1,000 attempts).
    let runs: Vec<SimReport> = [(1, 2.0, 3.0), (2, 4.0, 3.0), (3, 9.0, 3.0)]
        .into_iter()
        .map(|(seed, r, f)| {
            run(
                "steady",
                seed,
                vec![
                    contender("router", r, 1000),
                    contender("flat-thompson", f, 1000),
                ],
            )
        })
        .collect();
    let rows = rows(&runs);
    let regret = rows
        .iter()
        .find(|r| r.figure == "regret per 1,000 attempts")
        .unwrap();
    let router = regret.cells[0].spread.as_ref().unwrap();
    assert_eq!((router.median, router.min, router.max), (4.0, 2.0, 9.0));
    assert_eq!(regret.cells[0].paired, None);
    assert_eq!(
        regret.cells[1].paired,
        Some(Paired {
            router_better: 1,
            tied: 0,
            router_worse: 2
        })
    );
    assert_eq!(regret.best, ["flat-thompson"]);
    // Politeness: every value 0, both best, every seed tied.
    let polite = rows
        .iter()
        .find(|r| r.figure == "politeness violations")
        .unwrap();
    assert_eq!(polite.best, ["router", "flat-thompson"]);
    assert_eq!(polite.cells[1].paired.as_ref().unwrap().tied, 3);
    // Only steady ran: no other scenario's rows.
    assert!(rows.iter().all(|r| r.scenario == "steady"));
}

#[test]
fn higher_is_better_where_it_says_so_and_missing_figures_are_skipped() {
    let with_auc = |name: &str, auc: Option<f64>| ContenderReport {
        name: name.into(),
        trust_auc: auc,
        correct_fraction: 1.0,
        ..Default::default()
    };
    let runs = vec![
        run(
            "liars",
            1,
            vec![
                with_auc("router", Some(1.0)),
                with_auc("fixed-quorum", Some(0.5)),
            ],
        ),
        run(
            "liars",
            2,
            vec![
                with_auc("router", Some(0.9)),
                with_auc("fixed-quorum", None),
            ],
        ),
    ];
    let rows = rows(&runs);
    let auc = rows
        .iter()
        .find(|r| r.figure.starts_with("trust AUC"))
        .unwrap();
    assert_eq!(auc.better, Better::Higher);
    assert_eq!(auc.best, ["router"]);
    assert_eq!(auc.cells[1].spread.as_ref().unwrap().values, [0.5]);
    let p = auc.cells[1].paired.as_ref().unwrap();
    assert_eq!((p.router_better, p.tied, p.router_worse), (1, 0, 0));
}

fn bug_run(seed: u64, bug: Vec<f64>, control: Vec<f64>, bug_loss: bool) -> SimReport {
    let mut router = contender("router", 0.0, 1);
    router.event = EventFigures {
        devices_lower_than_before: Some(bug.iter().filter(|d| **d < 0.0).count()),
        trust_deltas: bug,
        lower_devices: if bug_loss {
            vec![LowerDevice {
                device: "dev-1".into(),
                before: 0.5,
                after: 0.4,
                losses: vec![Loss {
                    cause: crate::ledger::Cause::Bug,
                    amount: 0.1,
                    t_s: 10.0,
                }],
                online_at_end: true,
            }]
        } else {
            vec![]
        },
        ..Default::default()
    };
    let mut r = run("adapter-bug", seed, vec![router]);
    r.control = Some(EventFigures {
        devices_lower_than_before: Some(0),
        trust_deltas: control,
        ..Default::default()
    });
    r
}

#[test]
fn the_adapter_check_compares_the_bug_world_with_its_control() {
    // The same changes in both worlds: no evidence, no loss: passes.
    let same: Vec<f64> = (0..40)
        .map(|i| if i % 7 == 0 { -0.04 } else { 0.0 })
        .collect();
    let runs: Vec<SimReport> = (1..=3)
        .map(|s| bug_run(s, same.clone(), same.clone(), false))
        .collect();
    let c = adapter_check(&runs).unwrap();
    assert_eq!(c.seeds, [1, 2, 3]);
    assert_eq!(c.bug_deltas.len(), 120);
    assert_eq!(c.bug_losses, 0);
    assert!(c.passes, "{c:?}");
    assert_eq!(c.lower_per_seed[0], (1, 6, 6));
    // Every device loses in the bug world: the test rejects.
    let worse: Vec<f64> = vec![-0.05; 40];
    let runs: Vec<SimReport> = (1..=3)
        .map(|s| bug_run(s, worse.clone(), same.clone(), false))
        .collect();
    let c = adapter_check(&runs).unwrap();
    assert!(c.test.as_ref().unwrap().p_less < 1e-6, "{:?}", c.test);
    assert!(!c.passes);
    // One loss the truth attributes to the bug fails it alone.
    let runs = vec![bug_run(1, same.clone(), same.clone(), true)];
    let c = adapter_check(&runs).unwrap();
    assert_eq!(c.bug_losses, 1);
    assert!(!c.passes);
    // No adapter-bug run, or one without its control: no check.
    assert!(adapter_check(&[run("steady", 1, vec![])]).is_none());
    let mut no_control = bug_run(1, same.clone(), same, false);
    no_control.control = None;
    assert!(adapter_check(&[no_control]).is_none());
}

#[test]
fn a_summary_carries_the_seeds_size_and_wall_time() {
    let mut a = contender("router", 1.0, 10);
    a.timing.wall_s = 2.0;
    let runs = vec![run("steady", 1, vec![a.clone()]), run("steady", 2, vec![a])];
    let s = SeedsSummary::of(&runs, &[1, 2]);
    assert_eq!(s.seeds, [1, 2]);
    assert_eq!((s.devices, s.hours), (150, 6.0));
    assert_eq!(s.wall_s["router"], 4.0);
    assert!(s.adapter_check.is_none());
}

#[test]
fn a_world_file_gets_the_worlds_headlines_after_the_scenarios() {
    let robots = |seed, router_violations, greedy_violations| {
        let mut r = contender("router", 5.0, 1000);
        r.politeness_violations = router_violations;
        let mut g = contender("greedy", 8.0, 1000);
        g.politeness_violations = greedy_violations;
        run("robots", seed, vec![r, g])
    };
    let runs = vec![
        robots(1, 2, 3),
        run("steady", 1, vec![contender("router", 4.0, 1000)]),
        robots(2, 1, 1),
    ];
    let rows = rows(&runs);
    let names: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.scenario.as_str(), r.figure.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("steady", "regret per 1,000 attempts"),
            ("steady", "politeness violations"),
            ("robots", "regret per 1,000 attempts"),
            ("robots", "politeness violations"),
            ("robots", "correct-row fraction"),
        ]
    );
    let polite = &rows[3];
    assert_eq!(polite.best, vec!["router".to_string()]);
    let greedy = &polite.cells[1];
    assert_eq!(
        greedy.spread.as_ref().map(|s| (s.min, s.max)),
        Some((1.0, 3.0))
    );
    let p = greedy.paired.as_ref().expect("paired with the router");
    assert_eq!((p.router_better, p.tied, p.router_worse), (1, 1, 0));
}

#[test]
fn a_world_with_source_changes_gets_their_two_rows() {
    use crate::report::{ChangeFigures, RegretParts};
    let with_changes = |seed, shut_after: u64, opened_after: u64| {
        let mut r = contender("router", 5.0, 1000);
        r.event.changes = vec![
            ChangeFigures {
                source: "src-6".into(),
                shut: vec!["container_render".into(), "container_plain".into()],
                // Attempts by the shut archetypes count; the others do not.
                after: [100, 7, shut_after, 1],
                regret_after: RegretParts {
                    failures: 2.0,
                    cost: 1.0,
                },
                ..ChangeFigures::default()
            },
            ChangeFigures {
                source: "src-6".into(),
                opened: vec!["container_render".into()],
                after: [0, 0, opened_after, 0],
                regret_after: RegretParts {
                    failures: 4.0,
                    cost: 0.5,
                },
                ..ChangeFigures::default()
            },
        ];
        run("walls", seed, vec![r])
    };
    let rows = rows(&[with_changes(1, 10, 500), with_changes(2, 30, 900)]);
    let figures: Vec<&str> = rows.iter().map(|r| r.figure.as_str()).collect();
    assert_eq!(
        &figures[3..],
        [
            "attempts by archetypes a source change shut, while shut",
            "regret on changed sources while the changes held"
        ]
    );
    let shut = rows[3].cells[0].spread.as_ref().expect("two seeds");
    assert_eq!((shut.min, shut.max), (11.0, 31.0));
    let regret = rows[4].cells[0].spread.as_ref().expect("two seeds");
    assert_eq!((regret.min, regret.max), (7.5, 7.5));
}
