//! What a replica does after each campaign: a pure function of what it
//! is now, what the campaign answered and its own clock, so every case is
//! a table row. Source: `docs/decisions/0020-replicas-over-one-postgresql.md`.

use std::time::{Duration, Instant};

use crate::store::Leadership;

/// What the replica is when the campaign answers (its role, without the
/// shell it may hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Now {
    /// It knows of no lead (at start, or the store unreachable).
    Unknown,
    /// It forwards to the replica that leads under this term.
    Following(i64),
    /// It leads under this term, serving until the local deadline.
    Leading(i64, Instant),
}

/// The replica's next step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// It leads under the same term: push the local deadline to this.
    Renew(Instant),
    /// It won a new term: drop any shell it has, open one fenced by this
    /// lead, and serve until the deadline.
    Take(Leadership, Instant),
    /// Another replica leads: drop any shell and forward there.
    Follow(Leadership),
    /// The lead lapsed with no holder this replica can trust, or it led
    /// and its deadline passed without a renewal: drop any shell and
    /// answer `no_leader` until a campaign says more.
    Unknown,
    /// Nothing changes (a failed campaign while following or while the
    /// local deadline has not passed).
    Keep,
}

/// The local deadline of a lead with `remaining` on the server's clock,
/// reported by a campaign sent at `sent`: nine tenths of the time left,
/// counted from before the statement left (the server's expiry is later
/// than `sent + remaining`), so the replica stops serving before any other
/// replica can take over, even with clocks that run up to 10 % apart.
pub fn deadline(sent: Instant, remaining: Duration) -> Instant {
    sent + remaining.mul_f64(0.9)
}

/// The step after a campaign sent at `sent` that answered `outcome`
/// (`None`: it failed), for the replica holding as `me`, at `now`.
pub fn decide(
    current: Now,
    outcome: Option<&Leadership>,
    me: &str,
    sent: Instant,
    now: Instant,
) -> Step {
    match outcome {
        Some(l) if l.holder == me && !l.remaining.is_zero() => {
            let until = deadline(sent, l.remaining);
            match current {
                Now::Leading(term, _) if term == l.term => Step::Renew(until),
                _ => Step::Take(l.clone(), until),
            }
        }
        Some(l) if l.holder != me && !l.remaining.is_zero() => match current {
            Now::Following(term) if term == l.term => Step::Keep,
            _ => Step::Follow(l.clone()),
        },
        // Lapsed, whoever held it: the next campaign takes it or sees who did.
        Some(_) => match current {
            Now::Unknown => Step::Keep,
            _ => Step::Unknown,
        },
        None => match current {
            Now::Leading(_, until) if now >= until => Step::Unknown,
            _ => Step::Keep,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(term: i64, holder: &str, left_s: f64) -> Leadership {
        Leadership {
            term,
            holder: holder.into(),
            url: format!("http://{holder}"),
            remaining: Duration::from_secs_f64(left_s),
        }
    }

    /// Every (role, outcome) pair, with the step it must give.
    #[test]
    fn every_role_and_outcome_has_its_step() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(1);
        let until = deadline(t0, Duration::from_secs(3));
        assert_eq!(until, t0 + Duration::from_millis(2700));
        let passed = t0; // a deadline the clock has reached
        let roles = [
            Now::Unknown,
            Now::Following(4),
            Now::Following(5),
            Now::Leading(5, until),
            Now::Leading(4, until),
            Now::Leading(5, passed),
        ];
        let outcomes = [
            Some(lead(5, "me", 3.0)),
            Some(lead(5, "other", 3.0)),
            Some(lead(5, "me", 0.0)),
            Some(lead(5, "other", 0.0)),
            None,
        ];
        for role in roles {
            for o in &outcomes {
                let got = decide(role, o.as_ref(), "me", t0, later);
                let want = match (
                    role,
                    o.as_ref()
                        .map(|l| (l.holder.as_str(), l.remaining.is_zero())),
                ) {
                    (Now::Leading(5, _), Some(("me", false))) => Step::Renew(until),
                    (_, Some(("me", false))) => Step::Take(lead(5, "me", 3.0), until),
                    (Now::Following(5), Some(("other", false))) => Step::Keep,
                    (_, Some(("other", false))) => Step::Follow(lead(5, "other", 3.0)),
                    (Now::Unknown, Some((_, true))) => Step::Keep,
                    (_, Some((_, true))) => Step::Unknown,
                    (Now::Leading(_, u), None) if later >= u => Step::Unknown,
                    (_, None) => Step::Keep,
                    _ => unreachable!(),
                };
                assert_eq!(got, want, "{role:?} after {o:?}");
            }
        }
    }

    /// A failed campaign ends a lead exactly when its local deadline passes.
    #[test]
    fn a_failed_campaign_keeps_a_lead_only_until_its_deadline() {
        let t0 = Instant::now();
        let until = t0 + Duration::from_secs(2);
        let just_before = until - Duration::from_nanos(1);
        assert_eq!(
            decide(Now::Leading(1, until), None, "me", t0, just_before),
            Step::Keep
        );
        assert_eq!(
            decide(Now::Leading(1, until), None, "me", t0, until),
            Step::Unknown
        );
    }

    /// The local deadline is always before the server's expiry: a lead is
    /// never served past the point where another replica may take it.
    #[test]
    fn the_local_deadline_comes_before_the_servers_expiry() {
        let sent = Instant::now();
        for ms in [1u64, 10, 999, 3_000, 10_000, 3_600_000] {
            let rem = Duration::from_millis(ms);
            // The statement ran no earlier than `sent`: the server's expiry
            // is at least sent + rem.
            assert!(deadline(sent, rem) < sent + rem, "{ms} ms");
        }
    }
}
