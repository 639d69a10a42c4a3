use super::*;
use crate::Scenario;

#[test]
fn same_seed_same_world_and_a_drought_empties_the_night() {
    let spec = SimSpec::new(Scenario::Drought, 200, 12.0, 7);
    let a = World::build(&spec).unwrap();
    assert_eq!(a, World::build(&spec).unwrap());
    let (from, to) = a.drought.unwrap();
    let mid = (from + to) / 2.0;
    for (i, d) in a.devices.iter().enumerate() {
        if d.archetype == BROWSER {
            assert!(!a.online(i, mid));
        }
    }
    assert!((0..a.devices.len()).any(|i| a.online(i, mid)));
}

#[test]
fn gates_zero_the_truth_and_fail_with_their_class() {
    let w = World::build(&SimSpec::new(Scenario::Steady, 50, 1.0, 1)).unwrap();
    for s in 0..w.sources.len() {
        for a in 0..4 {
            if let Some(c) = w.gate_class(s, a, 0.0) {
                assert_eq!(w.p_success(s, a, 0.0), 0.0);
                let d = w.devices.iter().position(|d| d.archetype == a).unwrap();
                let t = w.sources[s].targets.start;
                let at = w.attempt(d, t, 0.0, 0);
                assert!(!at.ok);
                assert!(at.error_class == Some(c) || at.error_class == Some("network"));
            }
        }
    }
}

#[test]
fn liars_and_bugs_write_hashes_that_are_not_genuine() {
    let w = World::build(&SimSpec::new(Scenario::Liars, 100, 1.0, 3)).unwrap();
    let liar = w.devices.iter().position(|d| d.liar).unwrap();
    let honest = w.devices.iter().position(|d| !d.liar).unwrap();
    let h = w.observed(honest, 5, 100.0, ADAPTER_OK);
    assert!(w.genuine(5, &h, 100.0));
    let f = w.observed(liar, 5, 100.0, ADAPTER_OK);
    assert!(!w.genuine(5, &f, 100.0));
    assert_eq!(
        w.devices.iter().filter(|d| d.liar).count(),
        (w.devices.iter().filter(|d| d.archetype == BROWSER).count() as f64 * 0.2).round() as usize
    );
}

#[test]
fn the_control_world_differs_only_in_the_bugs_hash() {
    let w = World::build(&SimSpec::new(Scenario::AdapterBug, 60, 1.0, 5)).unwrap();
    let c = w.without_bug();
    let (bs, from) = w.bug.unwrap();
    let target = w.targets.iter().position(|t| t.source == bs).unwrap();
    let d = 0;
    let t = from + 1.0;
    assert_eq!(w.hash_kind(d, target, ADAPTER_BUGGY), HashKind::Buggy);
    assert_eq!(c.hash_kind(d, target, ADAPTER_BUGGY), HashKind::Genuine);
    assert_eq!(
        c.observed(d, target, t, ADAPTER_BUGGY),
        w.observed(d, target, t, ADAPTER_OK)
    );
    assert_eq!(
        World {
            bug_fixed: false,
            ..c
        },
        w
    );
}
