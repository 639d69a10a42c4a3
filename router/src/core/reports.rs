//! Device reports as evidence, not commands (docs/router.md "Threat
//! model"; `ROUTING.md` §3 Politeness, Gates are learned too).
//!
//! A deposit's `retry_after_s`, `crawl_delay_s` and gate-class failure
//! (`cors`, `js_required`, `antibot`) are one device's claims about a host
//! or a source. Alone, a claim holds back only the reporting device's own
//! next work there (a [`Hold`], at most [`HOLD_MAX_S`]). It moves the
//! shared politeness or gate only once corroborated: another device
//! reports the same subject within [`WINDOW_S`], or the reporter is trusted
//! (its trust at or above the verification rule's τ_hi). The shared value
//! is the least the corroborating claims agree on, capped: a pause at
//! [`MAX_SHARED_PAUSE_S`], a crawl delay at routing's
//! `MAX_CRAWL_DELAY_S`. A shared crawl delay and a shared closed gate
//! lapse [`DECAY_S`] after the last corroboration ([`Reports::lapsed`]); a
//! pause ends by itself.
//!
//! Pure: time is an argument, nothing reads a clock.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Seconds a claim waits for corroboration before it is forgotten.
pub const WINDOW_S: f64 = 600.0;
/// Longest shared pause a corroborated `retry_after_s` sets, seconds.
pub const MAX_SHARED_PAUSE_S: f64 = 300.0;
/// Longest hold one device's own claim puts on its own work, seconds.
pub const HOLD_MAX_S: f64 = 3_600.0;
/// Seconds a device's own gate-class failure holds it off the source.
pub const GATE_HOLD_S: f64 = 600.0;
/// Seconds after its last corroboration a shared crawl delay or closed
/// gate lapses.
pub const DECAY_S: f64 = 3_600.0;
/// Most holds kept per device (the oldest go first).
pub const HOLDS_PER_DEVICE: usize = 64;

/// What a claim is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Subject {
    /// A host's `Retry-After`.
    Pause(String),
    /// A host's robots crawl delay.
    CrawlDelay(String),
    /// A gate-class failure of (source, archetype).
    Gate(String, String),
}

impl Subject {
    fn key(&self) -> String {
        match self {
            Subject::Pause(h) => format!("pause\u{1f}{h}"),
            Subject::CrawlDelay(h) => format!("crawl_delay\u{1f}{h}"),
            Subject::Gate(s, a) => format!("gate\u{1f}{s}\u{1f}{a}"),
        }
    }

    /// The scope a device's own uncorroborated claim holds it off.
    fn scope(&self) -> Scope {
        match self {
            Subject::Pause(h) | Subject::CrawlDelay(h) => Scope::Host(h.clone()),
            Subject::Gate(s, _) => Scope::Source(s.clone()),
        }
    }

    /// The cap on the shared value.
    fn cap(&self) -> f64 {
        match self {
            Subject::Pause(_) => MAX_SHARED_PAUSE_S,
            Subject::CrawlDelay(_) => routing::politeness::MAX_CRAWL_DELAY_S,
            Subject::Gate(..) => f64::INFINITY,
        }
    }
}

/// One device's claim, waiting for corroboration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// The reporting device.
    pub device: String,
    /// When, router-clock seconds.
    pub t_s: f64,
    /// The reported seconds (0 for a gate).
    pub value: f64,
}

/// Where a hold keeps a device's work away from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scope {
    /// Every target on the host.
    Host(String),
    /// Every target of the source.
    Source(String),
}

/// A device's own work held back from a scope until `until_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    /// What is held.
    pub scope: Scope,
    /// Until when, router-clock seconds.
    pub until_s: f64,
}

/// A shared effect that lapses at `at_s`; `restore` is what to put back
/// (a crawl delay's bucket rate before it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lapse {
    /// The corroborated subject.
    pub subject: Subject,
    /// When it lapses, router-clock seconds.
    pub at_s: f64,
    /// The value to restore (a bucket's refill rate), where one applies.
    pub restore: Option<f64>,
}

/// The claims, the holds and the shared effects' lapses (kept in the
/// snapshot: a restart neither forgets a hold nor keeps a gate shut).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reports {
    claims: BTreeMap<String, Vec<Claim>>,
    holds: BTreeMap<String, Vec<Hold>>,
    lapses: Vec<Lapse>,
}

/// What a claim did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Held back the reporter's own work only.
    Own,
    /// Corroborated: apply this value (capped) to everyone.
    Shared(f64),
}

impl Reports {
    /// Records `device`'s claim on `subject` at `t_s` among devices no
    /// two of which are related: [`Reports::claim_among`] with no relation.
    pub fn claim(
        &mut self,
        subject: &Subject,
        device: &str,
        trusted: bool,
        t_s: f64,
        value: f64,
    ) -> Verdict {
        self.claim_among(subject, device, trusted, t_s, value, |_, _| false)
    }

    /// Records `device`'s claim on `subject` at `t_s` (its `value` in
    /// seconds, 0 for a gate; `trusted`: the device's trust is at or above
    /// τ_hi). A device's newer claim on a subject replaces its older one,
    /// so no device corroborates itself, and a claim from a device
    /// `related` to this one (one credential from one network or one
    /// registration burst, decision 0014) does not corroborate it either.
    /// Non-finite or negative values are taken as 0 (the deposit's
    /// validation refuses them first).
    pub fn claim_among(
        &mut self,
        subject: &Subject,
        device: &str,
        trusted: bool,
        t_s: f64,
        value: f64,
        related: impl Fn(&str, &str) -> bool,
    ) -> Verdict {
        let value = if value.is_finite() {
            value.max(0.0)
        } else {
            0.0
        };
        let claims = self.claims.entry(subject.key()).or_default();
        claims.retain(|c| c.device != device && c.t_s > t_s - WINDOW_S);
        claims.push(Claim {
            device: device.to_string(),
            t_s,
            value,
        });
        let corroborated = claims
            .iter()
            .any(|c| c.device != device && !related(&c.device, device));
        if !(trusted || corroborated) {
            let until_s = t_s
                + match subject {
                    Subject::Gate(..) => GATE_HOLD_S,
                    _ => value.min(HOLD_MAX_S),
                };
            self.hold(device, subject.scope(), until_s, t_s);
            return Verdict::Own;
        }
        let agreed = if trusted {
            value
        } else {
            claims.iter().map(|c| c.value).fold(f64::INFINITY, f64::min)
        };
        Verdict::Shared(agreed.min(subject.cap()))
    }

    /// Schedules the lapse of a corroborated crawl delay or gate at
    /// `t_s + DECAY_S`; `restore` is kept from the first schedule while
    /// one is pending (a second delay does not make the first one's
    /// lowered rate the one to restore).
    pub fn schedule_lapse(&mut self, subject: &Subject, t_s: f64, restore: Option<f64>) {
        let at_s = t_s + DECAY_S;
        match self.lapses.iter_mut().find(|l| &l.subject == subject) {
            Some(l) => l.at_s = l.at_s.max(at_s),
            None => self.lapses.push(Lapse {
                subject: subject.clone(),
                at_s,
                restore,
            }),
        }
    }

    /// Removes and returns the lapses due at `now_s`; forgets claims past
    /// their window and holds past their end.
    pub fn lapsed(&mut self, now_s: f64) -> Vec<Lapse> {
        let (due, keep): (Vec<Lapse>, Vec<Lapse>) =
            self.lapses.drain(..).partition(|l| l.at_s <= now_s);
        self.lapses = keep;
        self.claims.retain(|_, v| {
            v.retain(|c| c.t_s > now_s - WINDOW_S);
            !v.is_empty()
        });
        self.holds.retain(|_, v| {
            v.retain(|h| h.until_s > now_s);
            !v.is_empty()
        });
        due
    }

    /// Whether `device`'s own work on `host` or `source` is held at `now_s`.
    pub fn held(&self, device: &str, host: &str, source: &str, now_s: f64) -> bool {
        self.holds.get(device).is_some_and(|v| {
            v.iter().any(|h| {
                h.until_s > now_s
                    && match &h.scope {
                        Scope::Host(x) => x == host,
                        Scope::Source(x) => x == source,
                    }
            })
        })
    }

    /// Whether `device` holds anything at `now_s` (a lease skips the scan
    /// for devices that hold nothing).
    pub fn holds_any(&self, device: &str, now_s: f64) -> bool {
        self.holds
            .get(device)
            .is_some_and(|v| v.iter().any(|h| h.until_s > now_s))
    }

    /// Claims waiting for corroboration (for `/metrics`).
    pub fn waiting(&self) -> usize {
        self.claims.values().map(Vec::len).sum()
    }

    fn hold(&mut self, device: &str, scope: Scope, until_s: f64, now_s: f64) {
        let v = self.holds.entry(device.to_string()).or_default();
        v.retain(|h| h.until_s > now_s);
        match v.iter_mut().find(|h| h.scope == scope) {
            Some(h) => h.until_s = h.until_s.max(until_s),
            None => {
                if v.len() >= HOLDS_PER_DEVICE {
                    v.remove(0);
                }
                v.push(Hold { scope, until_s });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(h: &str) -> Subject {
        Subject::Pause(h.into())
    }

    #[test]
    fn one_device_alone_holds_only_itself() {
        let mut r = Reports::default();
        assert_eq!(
            r.claim(&pause("h"), "a", false, 0.0, 86_400.0),
            Verdict::Own
        );
        assert!(r.held("a", "h", "s", 10.0));
        assert!(!r.held("b", "h", "s", 10.0), "nobody else");
        // Its hold is capped and ends.
        assert!(r.held("a", "h", "s", HOLD_MAX_S - 1.0));
        assert!(!r.held("a", "h", "s", HOLD_MAX_S));
        // Repeating itself never corroborates.
        for i in 1..10 {
            assert_eq!(
                r.claim(&pause("h"), "a", false, i as f64, 100.0),
                Verdict::Own
            );
        }
    }

    #[test]
    fn a_second_device_corroborates_at_the_least_agreed_value_capped() {
        let mut r = Reports::default();
        r.claim(&pause("h"), "a", false, 0.0, 86_400.0);
        assert_eq!(
            r.claim(&pause("h"), "b", false, 5.0, 120.0),
            Verdict::Shared(120.0)
        );
        let mut r = Reports::default();
        r.claim(&pause("h"), "a", false, 0.0, 86_400.0);
        assert_eq!(
            r.claim(&pause("h"), "b", false, 5.0, 86_400.0),
            Verdict::Shared(MAX_SHARED_PAUSE_S)
        );
        // Another subject is not corroborated by it.
        assert_eq!(
            r.claim(&Subject::CrawlDelay("h".into()), "c", false, 6.0, 9.0),
            Verdict::Own
        );
    }

    #[test]
    fn a_claim_past_its_window_corroborates_nothing() {
        let mut r = Reports::default();
        r.claim(&pause("h"), "a", false, 0.0, 60.0);
        assert_eq!(
            r.claim(&pause("h"), "b", false, WINDOW_S, 60.0),
            Verdict::Own
        );
        assert_eq!(
            r.claim(&pause("h"), "a", false, WINDOW_S + 1.0, 60.0),
            Verdict::Shared(60.0)
        );
    }

    #[test]
    fn a_trusted_reporter_is_corroboration_enough() {
        let mut r = Reports::default();
        assert_eq!(
            r.claim(&Subject::CrawlDelay("h".into()), "t", true, 0.0, 1_000.0),
            Verdict::Shared(routing::politeness::MAX_CRAWL_DELAY_S)
        );
    }

    #[test]
    fn a_gate_claim_holds_the_source_and_lapses_once_shared() {
        let mut r = Reports::default();
        let g = Subject::Gate("board".into(), "desktop".into());
        assert_eq!(r.claim(&g, "a", false, 0.0, 0.0), Verdict::Own);
        assert!(r.held("a", "other-host", "board", 1.0));
        assert!(!r.held("a", "h", "other-source", 1.0));
        assert!(!r.held("a", "h", "board", GATE_HOLD_S));
        assert_eq!(r.claim(&g, "b", false, 2.0, 0.0), Verdict::Shared(0.0));
        r.schedule_lapse(&g, 2.0, None);
        assert!(r.lapsed(DECAY_S).is_empty());
        let due = r.lapsed(DECAY_S + 2.0);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].subject, g);
    }

    #[test]
    fn a_second_lapse_keeps_the_first_restore_and_the_later_time() {
        let mut r = Reports::default();
        let c = Subject::CrawlDelay("h".into());
        r.schedule_lapse(&c, 0.0, Some(4.0));
        r.schedule_lapse(&c, 100.0, Some(0.1));
        let due = r.lapsed(DECAY_S + 100.0);
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].restore, due[0].at_s), (Some(4.0), DECAY_S + 100.0));
    }

    #[test]
    fn holds_per_device_are_bounded_and_expired_state_is_forgotten() {
        let mut r = Reports::default();
        for i in 0..(HOLDS_PER_DEVICE + 10) {
            r.claim(&pause(&format!("h{i}")), "a", false, 0.0, 100.0);
        }
        assert_eq!(r.holds["a"].len(), HOLDS_PER_DEVICE);
        assert!(!r.held("a", "h0", "s", 1.0), "the oldest went first");
        assert!(r.holds_any("a", 1.0));
        r.lapsed(WINDOW_S + 100.0);
        assert!(!r.holds_any("a", 1.0));
        assert_eq!(r.waiting(), 0);
    }

    #[test]
    fn bad_values_count_as_zero() {
        let mut r = Reports::default();
        r.claim(&pause("h"), "a", false, 0.0, f64::NAN);
        assert_eq!(
            r.claim(&pause("h"), "b", false, 1.0, 50.0),
            Verdict::Shared(0.0)
        );
    }
}
