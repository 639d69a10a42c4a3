//! What colluding identities of one credential can earn (decision 0014):
//! deposits folded straight from the log, so each agreement is exactly one
//! pairwise trust event. Source: `ROUTING.md` §3 Trust.

use super::trust_tests::{observe, router};
use crate::api::RegisterRequest;
use crate::config::RouterConfig;
use crate::Router;

/// Registers a desktop `id` from `address` at `now_s`.
fn register_from(r: &mut Router, id: &str, address: &str, now_s: f64) {
    r.register_from(
        &RegisterRequest {
            device_id: id.into(),
            archetype: "desktop".into(),
            capabilities: vec![],
            adapter_version: "1.0".into(),
            registration_token: RouterConfig::default().registration_token,
            device_secret: None,
        },
        now_s,
        Some(address),
    )
    .unwrap();
}

/// Two colluders agree on a fabricated hash `rounds` times (each round:
/// a observes a target, b observes it the same; a pairwise event each
/// time b folds, and each time a folds on a target b saw before).
/// Returns the agreement events until both were trusted (τ ≥ 0.8), if
/// they got there, whether any row settled, and the events in all.
fn collude(r: &mut Router, rounds: usize) -> (Option<usize>, bool, usize) {
    let mut seq = 100;
    let mut trusted_at = None;
    let mut events = 0;
    for i in 0..rounds {
        let k = i % super::trust_tests::TARGETS;
        observe(r, &mut seq, "a", "1.0", k, "forged");
        observe(r, &mut seq, "b", "1.0", k, "forged");
        events += if i < super::trust_tests::TARGETS {
            1
        } else {
            2
        };
        let both = r.trust("a").unwrap() >= 0.8 && r.trust("b").unwrap() >= 0.8;
        if both && trusted_at.is_none() {
            trusted_at = Some(events);
        }
    }
    let settled = r.settled_rows() > 0;
    (trusted_at, settled, events)
}

/// Two identities from one network: 200 agreeing rounds move no trust
/// and settle nothing (it took about 30 deposits to reach trusted before).
#[test]
fn colluders_from_one_network_never_earn_trust() {
    let mut r = router();
    register_from(&mut r, "a", "10.0.0.1", 0.0);
    register_from(&mut r, "b", "10.0.0.77", 90.0);
    let (trusted_at, settled, events) = collude(&mut r, 200);
    assert_eq!(trusted_at, None);
    assert!(!settled);
    assert_eq!(r.trust("a"), Some(0.5));
    assert_eq!(r.trust("b"), Some(0.5));
    assert_eq!(r.counters().related_agreements, events as u64);
}

/// Two networks in one burst: no trust while the burst hold lasts (the
/// folds run at seconds 101..=500, inside the hour).
#[test]
fn colluders_of_one_burst_earn_nothing_within_the_hold() {
    let mut r = router();
    register_from(&mut r, "a", "10.0.1.1", 0.0);
    register_from(&mut r, "b", "10.0.2.1", 30.0);
    let (trusted_at, settled, _) = collude(&mut r, 200);
    assert_eq!((trusted_at, settled), (None, false));
    assert_eq!(r.trust("a"), Some(0.5));
}

/// The cost that remains, pinned so a change to it is seen: identities of
/// one credential from two networks registered a burst window apart are
/// unrelated, and reach trusted after 24 agreement events (τ grows by
/// 2 % of the other's τ per event: 0.5 · 1.02^24 ≥ 0.8), then settle
/// rows alone.
#[test]
fn unrelated_colluders_reach_trusted_after_24_agreements() {
    let mut r = router();
    register_from(&mut r, "a", "10.0.1.1", 0.0);
    register_from(&mut r, "b", "10.0.2.1", 61.0);
    let (trusted_at, settled, _) = collude(&mut r, 200);
    assert_eq!(trusted_at, Some(24));
    assert!(
        !settled,
        "each row's two votes came before either was trusted"
    );
    // A new row: one trusted colluder's fabricated hash settles it alone.
    let mut facts = super::trust_tests::facts();
    facts.targets.push(crate::config::TargetFact {
        target: format!("ad-{}", super::trust_tests::TARGETS),
        source: "board".into(),
        listing: false,
    });
    r.put_facts(&facts, 1000.0).unwrap();
    let mut seq = 1000;
    observe(
        &mut r,
        &mut seq,
        "a",
        "1.0",
        super::trust_tests::TARGETS,
        "forged",
    );
    assert_eq!(r.settled_rows(), 1);
}
