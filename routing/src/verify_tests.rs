//! Tests of [`super::Verification`]: the rules and the compact row.

use super::*;

#[test]
fn an_outside_model_records_votes_and_settles() {
    let mut v = Verification::new();
    let c = VerifyConfig::default();
    v.begin("a", 0.0, &c).unwrap();
    v.record("a", "h1", 0.99).unwrap();
    // Recording applies no rule: a τ above τ_hi does not settle.
    assert_eq!(v.settled(), None);
    assert!(v.open().is_empty(), "the vote closes its verification");
    assert_eq!(v.record("a", "h2", 0.5), Err(VerifyError::AlreadyInvolved));
    v.record("b", "h1", f64::NAN).unwrap();
    assert_eq!(v.votes()[1].tau, 0.5);
    assert_eq!(
        v.settle_inferred("h1"),
        Ok(VoteOutcome::Settled {
            hash: "h1".into(),
            by: SettledBy::Inferred
        })
    );
    assert_eq!(v.settled(), Some("h1"));
    assert_eq!(v.settle_inferred("h2"), Err(VerifyError::Settled));
    assert_eq!(v.record("c", "h1", 0.5), Err(VerifyError::Settled));
    v.reopen();
    assert!(v.votes().is_empty() && v.settled().is_none());
}

#[test]
fn an_untouched_row_holds_nothing_out_of_line_and_its_json_is_unchanged() {
    let c = VerifyConfig::default();
    let json = serde_json::to_string(&Verification::new()).unwrap();
    assert_eq!(json, r#"{"votes":[],"open":[],"settled":null}"#);
    assert_eq!(
        serde_json::from_str::<Verification>(&json).unwrap(),
        Verification::new()
    );
    // Opened, then released or expired: untouched again.
    let mut v = Verification::new();
    v.begin("a", 0.0, &c).unwrap();
    assert_ne!(v, Verification::new());
    v.release("a");
    assert_eq!(v, Verification::new());
    v.begin("a", 0.0, &c).unwrap();
    assert_eq!(v.expire(c.ttl_s), 1);
    assert_eq!(v, Verification::new());
    // A refused opening or vote leaves nothing behind.
    assert_eq!(v.begin("a", f64::NAN, &c), Err(VerifyError::BadTime));
    assert_eq!(v, Verification::new());
    let bad = VerifyConfig { quorum: 0, ..c };
    assert_eq!(v.vote("a", "h", 0.5, &bad), Err(VerifyError::BadConfig));
    assert_eq!(v, Verification::new());
    // A touched row round-trips through its JSON.
    v.vote("a", "h", 0.5, &c).unwrap();
    let back: Verification = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
    assert_eq!(back, v);
    assert_eq!(back.votes().len(), 1);
}

fn from(network: &str, at: f64) -> Option<Origin> {
    Some(Origin {
        credential: "default".into(),
        network: Some(network.into()),
        registered_at_s: at,
    })
}

/// A hundred identities of one network leave one vote on the row, the
/// newest; an unrelated one adds its own.
#[test]
fn related_voters_keep_one_vote_per_row() {
    let vc = VerifyConfig::default();
    let mut v = Verification::new();
    for i in 0..100 {
        let out = v.vote_from(format!("d{i}"), "forged", 0.5, from("n1", 0.0), 10.0, &vc);
        assert_eq!(out, Ok(VoteOutcome::Pending { agreeing: 1 }));
    }
    assert_eq!(v.votes().len(), 1);
    assert_eq!(&*v.votes()[0].device, "d99");
    let out = v.vote_from("far", "forged", 0.5, from("n2", 1000.0), 1001.0, &vc);
    assert_eq!(out, Ok(VoteOutcome::Pending { agreeing: 2 }));
    assert_eq!(v.votes().len(), 2);
    // Votes of unknown origin (in process) are each their own.
    v.vote("x", "forged", 0.5, &vc).unwrap();
    assert!(v.settled().is_some(), "three unrelated voters settle");
}
