//! Prices, politeness, trust and verification settlement beyond the
//! golden vectors.

use routing::politeness::{Bucket, Level, PolitenessError, MAX_CRAWL_DELAY_S};
use routing::prices::{Pool, PriceError};
use routing::trust::{self, State};
use routing::verify::{Verification, VerifyConfig, VerifyError};

#[test]
fn prices_hold_on_non_finite_usage_and_clamp() {
    assert!(matches!(
        Pool::new(-1.0, 0.1, 1e6),
        Err(PriceError::BadCapacity(_))
    ));
    assert!(matches!(
        Pool::new(1.0, 0.0, 1e6),
        Err(PriceError::BadAlpha(_))
    ));
    assert!(matches!(
        Pool::new(1.0, 0.1, f64::NAN),
        Err(PriceError::BadLambdaMax(_))
    ));
    let mut p = Pool::new(10.0, 0.1, 5.0).unwrap();
    assert_eq!(p.tick(&[20.0, 10.0]), 2.0);
    assert_eq!(p.tick(&[f64::NAN, 1.0]), 2.0);
    assert_eq!(p.tick(&[f64::INFINITY]), 2.0);
    assert_eq!(p.tick(&[1000.0]), 5.0); // λ_max
    let mut q = Pool::with_cap(10.0).unwrap();
    assert_eq!(q.tick(&[]), 0.0); // never below 0
}

#[test]
fn price_sum_is_order_independent() {
    let usages = [1e16, 1.0, -1e16, 3.5, 0.25, 7.0];
    let mut rev = usages;
    rev.reverse();
    let mut a = Pool::with_cap(0.0).unwrap();
    let mut b = Pool::with_cap(0.0).unwrap();
    assert_eq!(a.tick(&usages).to_bits(), b.tick(&rev).to_bits());
}

#[test]
fn a_crawl_delay_spaces_requests_with_no_burst_until_it_lifts() {
    // Five tokens held, two a second: a burst of five is the bucket's right.
    let mut b = Bucket::new(5.0, 2.0).unwrap();
    b.crawl_delay(20.0).unwrap();
    assert_eq!(b.rate(), 1.0 / 20.0);
    // One request now, and never two within one delay, however long idle.
    let admitted = |b: &mut Bucket, from: f64, to: f64| {
        let mut at = Vec::new();
        let mut t = from;
        while t < to {
            if b.admit(t).unwrap() {
                at.push(t);
            }
            t += 0.5;
        }
        at
    };
    assert_eq!(admitted(&mut b, 0.0, 19.9), vec![0.0]);
    // Polled up to 19.5 s: the next token is due at 20 s.
    assert!((b.next_admit_s(19.5) - 0.5).abs() < 1e-9);
    assert_eq!(admitted(&mut b, 20.0, 20.1), vec![20.0]);
    // After 500 s idle the bucket holds one token, not five.
    assert_eq!(admitted(&mut b, 520.0, 539.9), vec![520.0]);
    assert!(!b.is_full_at(1e6), "a spaced bucket is not a new one");
    // Lifted: the old rate, and the burst refills to the capacity.
    b.lift_crawl_delay(2.0).unwrap();
    assert!(!b.spaced());
    assert_eq!(admitted(&mut b, 600.0, 600.1).len(), 1);
    let burst = (0..6).filter(|_| b.admit(700.0).unwrap()).count();
    assert_eq!(burst, 5, "five at one instant after 100 s idle");
    assert!(matches!(
        b.lift_crawl_delay(f64::NAN),
        Err(PolitenessError::BadRate(_))
    ));
    // A delay of 0 changes nothing.
    let mut c = Bucket::new(3.0, 1.0).unwrap();
    c.crawl_delay(0.0).unwrap();
    assert!(!c.spaced() && c.rate() == 1.0);
}

#[test]
fn a_redeclared_bucket_keeps_its_tokens_pause_and_crawl_delay() {
    let mut b = Bucket::new(5.0, 2.0).unwrap();
    for _ in 0..5 {
        assert!(b.admit(0.0).unwrap());
    }
    // The same limit again: no refill gift, nothing else changes.
    let before = b.clone();
    b.redeclare(5.0, 2.0).unwrap();
    assert_eq!(b, before);
    assert!(!b.admit(0.0).unwrap());
    // A pause and a crawl delay survive a new limit.
    b.pause(0.0, 30.0).unwrap();
    b.crawl_delay(20.0).unwrap();
    b.redeclare(8.0, 4.0).unwrap();
    assert!(b.spaced());
    assert_eq!(b.rate(), 1.0 / 20.0);
    assert!(!b.admit(29.0).unwrap(), "paused until 30 s");
    assert!(b.admit(30.0).unwrap());
    assert!(!b.admit(31.0).unwrap(), "one per 20 s");
    // Lifted: the newly declared rate and capacity.
    b.lift_crawl_delay(2.0).unwrap();
    assert_eq!(b.rate(), 4.0);
    let burst = (0..9).filter(|_| b.admit(1000.0).unwrap()).count();
    assert_eq!(burst, 8);
    // A smaller capacity caps what is held; a bad limit changes nothing.
    b.redeclare(2.0, 4.0).unwrap();
    assert!(b.tokens() <= 2.0);
    let kept = b.clone();
    assert!(matches!(
        b.redeclare(0.5, 1.0),
        Err(PolitenessError::BadCapacity(_))
    ));
    assert!(matches!(
        b.redeclare(3.0, f64::NAN),
        Err(PolitenessError::BadRate(_))
    ));
    assert_eq!(b, kept);
}

#[test]
fn bucket_pause_and_crawl_delay() {
    assert!(matches!(
        Bucket::new(0.5, 1.0),
        Err(PolitenessError::BadCapacity(_))
    ));
    assert!(matches!(
        Bucket::new(1.0, -1.0),
        Err(PolitenessError::BadRate(_))
    ));
    let mut b = Bucket::new(2.0, 1.0).unwrap();
    assert!(matches!(
        b.admit(f64::NAN),
        Err(PolitenessError::BadTime(_))
    ));
    b.pause(0.0, 10.0).unwrap();
    assert!(!b.admit(5.0).unwrap());
    assert!(b.admit(10.0).unwrap());
    assert!(matches!(
        b.pause(0.0, -1.0),
        Err(PolitenessError::BadDuration(_))
    ));
    b.crawl_delay(10_000.0).unwrap();
    assert_eq!(b.rate(), 1.0 / MAX_CRAWL_DELAY_S);
    assert!(b.spaced());
    // A lapsed crawl delay restores the rate; the pause is read apart.
    b.set_rate(1.0).unwrap();
    assert_eq!(b.rate(), 1.0);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(b.set_rate(bad), Err(PolitenessError::BadRate(_))));
    }
    assert_eq!(b.rate(), 1.0, "a refused rate changes nothing");
    b.pause(20.0, 5.0).unwrap();
    assert!(b.paused_at(24.9) && !b.paused_at(25.0) && !b.paused_at(f64::NAN));
}

#[test]
fn trust_freshness_clamp_and_states() {
    // Δt = 48 h halves the step: 0.5 + 0.02·0.5·0.5 = 0.505.
    let (a, _) = trust::pairwise(0.5, 0.5, true, 48.0, 0.0);
    assert!((a - 0.505).abs() < 1e-12);
    let (a, b) = trust::pairwise(f64::NAN, 2.0, true, 0.0, 0.0);
    // NaN reads as 0.5, 2.0 clamps to 1: 0.5 + 0.02·1 = 0.52; 1 + 0.01 → 1.
    assert!((a - 0.52).abs() < 1e-12);
    assert_eq!(b, 1.0);
    assert_eq!(State::classify(State::Normal, 0.8), State::Trusted);
    assert_eq!(State::classify(State::Normal, 0.29), State::Limited);
    assert_eq!(State::classify(State::Trusted, 0.5), State::Normal);
    assert_eq!(State::classify(State::Revoked, 0.95), State::Revoked);
    assert_eq!(State::classify(State::Suspended, 0.1), State::Suspended);
}

#[test]
fn next_admit_names_when_a_bucket_admits_again() {
    let mut b = Bucket::new(2.0, 0.5).unwrap();
    assert_eq!(b.next_admit_s(0.0), 0.0, "a full bucket admits now");
    assert!(b.admit(0.0).unwrap() && b.admit(0.0).unwrap());
    assert!(!b.admit(0.0).unwrap());
    // Empty at t = 0, half a token per second: one token at t = 2.
    assert!((b.next_admit_s(0.0) - 2.0).abs() < 1e-12);
    assert!((b.next_admit_s(1.5) - 0.5).abs() < 1e-12);
    assert_eq!(b.next_admit_s(3.0), 0.0);
    // The hint is exact: admit fails just before it and succeeds at it.
    let mut probe = b.clone();
    assert!(!probe.admit(1.999).unwrap());
    let mut probe = b.clone();
    assert!(probe.admit(2.0).unwrap());
    // A pause longer than the refill wins; reading changes nothing.
    b.pause(0.0, 10.0).unwrap();
    assert!((b.next_admit_s(1.0) - 9.0).abs() < 1e-12);
    assert_eq!(b.next_admit_s(f64::NAN), f64::INFINITY);
    assert!(!b.admit(9.99).unwrap());
    assert!(b.admit(10.0).unwrap());
}

#[test]
fn a_bucket_is_full_again_only_once_refilled_and_unpaused() {
    let mut b = Bucket::new(2.0, 0.5).unwrap();
    assert!(b.is_full_at(0.0), "a new bucket is full");
    assert!(b.admit(0.0).unwrap());
    assert!(!b.is_full_at(0.0));
    assert!(!b.is_full_at(1.9), "0.95 tokens short of 2 before t = 2");
    assert!(b.is_full_at(2.0));
    b.pause(2.0, 10.0).unwrap();
    assert!(!b.is_full_at(5.0), "a paused bucket is not a new one");
    assert!(b.is_full_at(12.0));
    assert!(!b.is_full_at(f64::NAN));
}

#[test]
fn quorum_and_trusted_settlement() {
    let vc = VerifyConfig::default();
    let mut v = Verification::new();
    assert!(matches!(
        v.vote("a", "x", 0.5, &vc),
        Ok(routing::verify::VoteOutcome::Pending { agreeing: 1 })
    ));
    assert!(matches!(
        v.vote("b", "y", 0.5, &vc),
        Ok(routing::verify::VoteOutcome::Pending { agreeing: 1 })
    ));
    assert!(matches!(
        v.vote("c", "x", 0.5, &vc),
        Ok(routing::verify::VoteOutcome::Pending { agreeing: 2 })
    ));
    assert_eq!(
        v.vote("c", "x", 0.5, &vc),
        Err(VerifyError::AlreadyInvolved)
    );
    assert!(matches!(
        v.vote("d", "x", 0.79, &vc),
        Ok(routing::verify::VoteOutcome::Settled {
            by: routing::verify::SettledBy::Quorum,
            ..
        })
    ));
    assert_eq!(v.settled(), Some("x"));
    assert_eq!(v.vote("e", "x", 0.9, &vc), Err(VerifyError::Settled));
    assert_eq!(v.begin("e", 0.0, &vc), Err(VerifyError::Settled));
    let mut w = Verification::new();
    w.vote("a", "x", 0.5, &vc).unwrap();
    assert!(matches!(
        w.vote("t", "z", 0.8, &vc),
        Ok(routing::verify::VoteOutcome::Settled {
            by: routing::verify::SettledBy::Trusted,
            ..
        })
    ));
    assert_eq!(w.settled(), Some("z"));
    // Expiry terminates open verifications; a protest releases one.
    let mut o = Verification::new();
    o.begin("p", 0.0, &vc).unwrap();
    o.begin("q", 0.0, &vc).unwrap();
    o.release("p");
    assert_eq!(o.open().len(), 1);
    assert_eq!(o.expire(3599.0), 0);
    assert_eq!(o.expire(3600.0), 1);
    let bad = VerifyConfig { quorum: 0, ..vc };
    assert_eq!(o.begin("r", 0.0, &bad), Err(VerifyError::BadConfig));
    assert_eq!(o.begin("r", f64::NAN, &vc), Err(VerifyError::BadTime));
}

/// A bucket kept as its level and rebuilt from a template before each
/// request admits exactly when the whole bucket would, at every step.
#[test]
fn a_bucket_kept_as_its_level_admits_as_the_whole_bucket() {
    let template = Bucket::new(3.0, 0.5).unwrap();
    let mut whole = template.clone();
    let mut level = template.level();
    assert_eq!(
        template.at_level(level),
        template,
        "a fresh level is a new bucket"
    );
    // Bursts, idle gaps, a clock that steps back, and polls between.
    let times = [
        0.0, 0.0, 0.0, 0.0, 0.4, 1.9, 2.0, 2.1, 1.0, 9.0, 9.0, 9.0, 9.0, 30.0,
    ];
    let mut admitted = 0;
    for &t in &times {
        let mut b = template.at_level(level);
        assert_eq!(b.next_admit_s(t), whole.next_admit_s(t), "wait at {t}");
        assert_eq!(b.is_full_at(t), whole.is_full_at(t), "full at {t}");
        let got = b.admit(t).unwrap();
        assert_eq!(got, whole.admit(t).unwrap(), "admit at {t}");
        admitted += usize::from(got);
        level = b.level();
        assert_eq!(b, whole);
    }
    assert_eq!(
        admitted, 8,
        "three at 0 s, one at 2 s, three at 9 s, one at 30 s"
    );
    // Tokens above a template's ceiling are cut to it.
    let over = Level {
        tokens: 50.0,
        t_last: Some(0.0),
    };
    assert_eq!(template.at_level(over).tokens(), 3.0);
}
