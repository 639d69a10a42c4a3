//! The policy's verification rule between identities (decision 0028): a
//! row's verification goes only to an identity whose vote can count.

use std::collections::BTreeMap;

use routing::policy::{lease, Pass, Tier};
use routing::trust::Origin;
use routing::verify::{Verification, VerifyConfig, VerifyError};

use crate::policy::{cand, config, device, field};

/// A verification is not offered to an identity related to one that voted
/// on the row (decision 0028): its vote could only replace that one. An
/// unrelated identity, one of unknown origin and one whose τ alone
/// settles the row are offered it.
#[test]
fn a_verification_is_not_offered_to_an_identity_related_to_a_voter() {
    let f = field();
    let a = f.parse("s/api/t1").unwrap();
    let vc = VerifyConfig::default();
    let origin = |network: &str, at: f64| Origin {
        credential: "site".into(),
        network: Some(network.into()),
        registered_at_s: at,
    };
    let first = origin("v4:10.0.0.0/24", 0.0);
    let mut v = Verification::new();
    v.vote_from("first", "h", 0.5, Some(first.clone()), 10.0, &vc)
        .unwrap();
    let caps: Vec<String> = vec![];
    let mut c = cand("row", "h1", &a, Tier::Verification);
    c.verification = Some(&v);
    let cands = vec![c];
    let same_network = origin("v4:10.0.0.0/24", 5_000.0);
    let other_network = origin("v4:10.0.9.0/24", 5_000.0);
    let same_burst = origin("v4:10.0.9.0/24", 30.0);
    for (who, tau, from, offered) in [
        ("same network", 0.5, Some(&same_network), false),
        ("same burst", 0.5, Some(&same_burst), false),
        ("same network, trusted", 0.9, Some(&same_network), true),
        ("other network, apart", 0.5, Some(&other_network), true),
        ("unknown origin", 0.5, None, true),
    ] {
        let mut dev = device("v", tau, false, &caps);
        dev.origin = from;
        let mut buckets = BTreeMap::new();
        let d = lease(&f, &dev, &cands, &mut buckets, 100.0, &config(2)).unwrap();
        assert_eq!(d.grants.len(), usize::from(offered), "{who}");
        if !offered {
            assert_eq!(
                d.passed,
                vec![(
                    "row".to_string(),
                    Pass::Verify(VerifyError::AlreadyInvolved)
                )],
                "{who}"
            );
        }
    }
}
