//! Verification bookkeeping of one row: open verifications with a cap and a
//! TTL, votes, and the settlement rule (a trusted device settles alone,
//! otherwise a quorum of unweighted agreeing votes from unrelated
//! identities).
//! Source: `ROUTING.md` §3 Assignment policy, step 2; relatedness:
//! [`crate::trust::Origin`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::trust::{independent, Origin, Relation};

/// Verification constants (configuration; defaults from the brief).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerifyConfig {
    /// τ at or above which one vote settles a row (τ_hi, default 0.8; a value
    /// above 1 turns the trusted path off, leaving the quorum).
    pub tau_hi: f64,
    /// Agreeing votes from distinct devices that settle a row (k, default 3).
    pub quorum: u32,
    /// Verifications that may be open at once per row (default 2).
    pub max_open: u32,
    /// Seconds after which an open verification expires (default 3,600).
    pub ttl_s: f64,
    /// Which voters count as one identity ([`Relation`]: the burst window
    /// and hold, default 60 s and 1 h); also the rule for trust and for
    /// corroborating reports.
    #[serde(default)]
    pub relation: Relation,
    /// Distinct registration credentials a quorum needs among its
    /// unrelated voters (default 1; a router that holds several
    /// credentials sets 2, so one credential's identities never settle a
    /// row alone).
    #[serde(default = "default_quorum_credentials")]
    pub quorum_credentials: u32,
}

fn default_quorum_credentials() -> u32 {
    1
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            tau_hi: 0.8,
            quorum: 3,
            max_open: 2,
            ttl_s: 3600.0,
            relation: Relation::default(),
            quorum_credentials: 1,
        }
    }
}

impl VerifyConfig {
    /// Checks the ranges: τ_hi > 0 (above 1 no single vote settles a row:
    /// a fixed quorum), quorum ≥ 1, max_open ≥ 1, TTL finite and > 0,
    /// the relation's windows finite and ≥ 0, 1 ≤ quorum credentials ≤
    /// quorum.
    pub fn check(&self) -> Result<(), VerifyError> {
        let ok = self.tau_hi > 0.0
            && self.quorum >= 1
            && self.max_open >= 1
            && self.ttl_s.is_finite()
            && self.ttl_s > 0.0
            && self.relation.is_valid()
            && (1..=self.quorum).contains(&self.quorum_credentials);
        if ok {
            Ok(())
        } else {
            Err(VerifyError::BadConfig)
        }
    }
}

/// Why a verification could not be opened or a vote not counted.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum VerifyError {
    /// The row is already settled.
    #[error("row already settled")]
    Settled,
    /// `max_open` verifications are already open.
    #[error("too many open verifications")]
    Full,
    /// This device already voted or holds an open verification of the row.
    #[error("device already verifies this row")]
    AlreadyInvolved,
    /// A time that is not finite.
    #[error("time must be finite")]
    BadTime,
    /// Configuration out of range.
    #[error("verification configuration out of range")]
    BadConfig,
}

/// How a row got settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettledBy {
    /// One vote from a device with τ ≥ τ_hi.
    Trusted,
    /// `quorum` agreeing votes.
    Quorum,
    /// A truth-inference model outside this type decided
    /// ([`Verification::settle_inferred`]).
    Inferred,
}

/// The result of one vote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum VoteOutcome {
    /// The row is settled on `hash`.
    Settled {
        /// The content hash agreed on.
        hash: String,
        /// The rule that settled it.
        by: SettledBy,
    },
    /// Not settled yet: `agreeing` unrelated votes share this vote's hash.
    Pending {
        /// Unrelated votes agreeing with this one, itself included.
        agreeing: u32,
    },
}

/// One vote on a row's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    /// Device id (shared with whoever else holds the same name: the
    /// router's observations of the same device).
    pub device: Arc<str>,
    /// Content hash it observed (shared with whoever else holds the same
    /// observation's hash: the router's observation and the settled row).
    pub hash: Arc<str>,
    /// Its τ when it voted.
    pub tau: f64,
    /// Where its identity came from (`None`: unknown, related to no other
    /// voter).
    #[serde(default)]
    pub origin: Option<Origin>,
}

/// The verification state of one row: none until its first vote or open
/// verification, then held out of line. A router holds one per target
/// and most targets never have one, so an untouched row costs one
/// pointer, not the 72 bytes of its vectors (docs/router.md, "The small
/// box"). Serialized as the state itself (an untouched row as the empty
/// state), as it always was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verification(Option<Box<State>>);

/// What a row holds once touched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct State {
    votes: Vec<Vote>,
    open: Vec<(Arc<str>, f64)>,
    settled: Option<Arc<str>>,
}

/// The state of an untouched row.
static UNTOUCHED: State = State {
    votes: Vec::new(),
    open: Vec::new(),
    settled: None,
};

impl State {
    fn is_untouched(&self) -> bool {
        self.votes.is_empty() && self.open.is_empty() && self.settled.is_none()
    }
}

impl Serialize for Verification {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.st().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Verification {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let st = State::deserialize(d)?;
        Ok(Verification((!st.is_untouched()).then(|| Box::new(st))))
    }
}

impl Verification {
    /// A row with no votes.
    pub fn new() -> Verification {
        Verification::default()
    }

    fn st(&self) -> &State {
        self.0.as_deref().unwrap_or(&UNTOUCHED)
    }

    /// Applies `f` to the state, held out of line while it is touched and
    /// dropped again once it is back to untouched.
    fn edit<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> R {
        let st = self.0.get_or_insert_with(Default::default);
        let r = f(st);
        if st.is_untouched() {
            self.0 = None;
        }
        r
    }

    /// The settled hash, if any.
    pub fn settled(&self) -> Option<&str> {
        self.st().settled.as_deref()
    }

    /// Votes so far (the first observation counts as a vote).
    pub fn votes(&self) -> &[Vote] {
        &self.st().votes
    }

    /// Open verifications: (device, expires at, seconds).
    pub fn open(&self) -> &[(Arc<str>, f64)] {
        &self.st().open
    }

    /// Drops open verifications whose expiry is ≤ `now_s`; returns how many
    /// expired (so verification always terminates).
    pub fn expire(&mut self, now_s: f64) -> usize {
        if self.0.is_none() {
            return 0;
        }
        self.edit(|s| s.expire(now_s))
    }

    /// Whether `device` may open a verification now: not settled, fewer than
    /// `max_open` open (after expiry at `now_s`), and the device neither
    /// voted nor holds one. Reads only.
    pub fn can_open(&self, device: &str, now_s: f64, config: &VerifyConfig) -> bool {
        self.st().check_open(device, now_s, config).is_ok()
    }

    /// Opens a verification for `device` at `now_s`, expiring after the TTL.
    /// Errors: [`VerifyError`] (nothing changed).
    pub fn begin(
        &mut self,
        device: impl Into<Arc<str>>,
        now_s: f64,
        config: &VerifyConfig,
    ) -> Result<(), VerifyError> {
        let device = device.into();
        // A refusal leaves an untouched row untouched (`edit` drops the
        // empty state again).
        self.edit(|s| s.begin(&device, now_s, config))
    }

    /// Releases `device`'s open verification without a vote (a protest).
    pub fn release(&mut self, device: &str) {
        if self.0.is_some() {
            self.edit(|s| s.release(device));
        }
    }

    /// Counts `device`'s vote for `hash` (its τ `tau`) from an identity of
    /// unknown origin: [`Verification::vote_from`] with `None`.
    pub fn vote(
        &mut self,
        device: impl Into<Arc<str>>,
        hash: impl Into<Arc<str>>,
        tau: f64,
        config: &VerifyConfig,
    ) -> Result<VoteOutcome, VerifyError> {
        self.vote_from(device, hash, tau, None, 0.0, config)
    }

    /// Counts `device`'s vote for `hash` (its τ `tau`, its identity's
    /// `origin`, relatedness judged at `now_s`), closing its open
    /// verification if any; it replaces the votes of identities related
    /// to it (one voter, its newest vote). τ ≥ τ_hi settles
    /// alone; otherwise the agreeing votes settle when `quorum` of them
    /// are from unrelated identities ([`crate::trust::independent`]) that
    /// hold at least `quorum_credentials` credentials between them
    /// (unweighted: trust raises the quorum demanded, never a vote's
    /// weight). Errors: [`VerifyError::Settled`],
    /// [`VerifyError::AlreadyInvolved`] for a second vote,
    /// [`VerifyError::BadConfig`] (nothing changed on any error).
    pub fn vote_from(
        &mut self,
        device: impl Into<Arc<str>>,
        hash: impl Into<Arc<str>>,
        tau: f64,
        origin: Option<Origin>,
        now_s: f64,
        config: &VerifyConfig,
    ) -> Result<VoteOutcome, VerifyError> {
        let (device, hash) = (device.into(), hash.into());
        self.edit(|s| s.vote_from(&device, &hash, tau, origin, now_s, config))
    }

    /// Records `device`'s vote for `hash` without applying the settlement
    /// rule (a model outside this type decides, then calls
    /// [`Verification::settle_inferred`]) and closes its open verification.
    /// Errors: [`VerifyError::Settled`], [`VerifyError::AlreadyInvolved`]
    /// (nothing changed).
    pub fn record(
        &mut self,
        device: impl Into<Arc<str>>,
        hash: impl Into<Arc<str>>,
        tau: f64,
    ) -> Result<(), VerifyError> {
        let (device, hash) = (device.into(), hash.into());
        self.edit(|s| s.record(&device, &hash, tau))
    }

    /// Settles the open row on `hash` by an outside model's decision
    /// ([`SettledBy::Inferred`]). Errors: [`VerifyError::Settled`].
    pub fn settle_inferred(
        &mut self,
        hash: impl Into<Arc<str>>,
    ) -> Result<VoteOutcome, VerifyError> {
        let hash = hash.into();
        self.edit(|s| s.settle_inferred(&hash))
    }

    /// Reopens a settled row for a new round (its content changed: a
    /// re-observation disagreed). Votes are cleared; open ones stay.
    pub fn reopen(&mut self) {
        if self.0.is_some() {
            self.edit(State::reopen);
        }
    }
}

/// The rules, on a touched row (see [`Verification`]'s methods).
impl State {
    /// Grows the votes one slot at a time: a row holds a handful, and a
    /// vector's first push would reserve room for four.
    fn add_vote(&mut self, vote: Vote) {
        self.votes.reserve_exact(1);
        self.votes.push(vote);
    }

    fn expire(&mut self, now_s: f64) -> usize {
        let before = self.open.len();
        self.open.retain(|(_, at)| *at > now_s);
        before - self.open.len()
    }

    fn check_open(
        &self,
        device: &str,
        now_s: f64,
        config: &VerifyConfig,
    ) -> Result<(), VerifyError> {
        if !now_s.is_finite() {
            return Err(VerifyError::BadTime);
        }
        if self.settled.is_some() {
            return Err(VerifyError::Settled);
        }
        if self.votes.iter().any(|v| *v.device == *device)
            || self.open.iter().any(|(d, _)| **d == *device)
        {
            return Err(VerifyError::AlreadyInvolved);
        }
        let live = self.open.iter().filter(|(_, at)| *at > now_s).count();
        if live as u32 >= config.max_open {
            return Err(VerifyError::Full);
        }
        Ok(())
    }

    fn begin(
        &mut self,
        device: &Arc<str>,
        now_s: f64,
        config: &VerifyConfig,
    ) -> Result<(), VerifyError> {
        config.check()?;
        self.check_open(device, now_s, config)?;
        self.expire(now_s);
        self.open.reserve_exact(1);
        self.open.push((device.clone(), now_s + config.ttl_s));
        Ok(())
    }

    fn release(&mut self, device: &str) {
        self.open.retain(|(d, _)| **d != *device);
    }

    fn vote_from(
        &mut self,
        device: &Arc<str>,
        hash: &Arc<str>,
        tau: f64,
        origin: Option<Origin>,
        now_s: f64,
        config: &VerifyConfig,
    ) -> Result<VoteOutcome, VerifyError> {
        config.check()?;
        if self.settled.is_some() {
            return Err(VerifyError::Settled);
        }
        if self.votes.iter().any(|v| *v.device == **device) {
            return Err(VerifyError::AlreadyInvolved);
        }
        self.release(device);
        let tau = if tau.is_finite() {
            tau.clamp(0.0, 1.0)
        } else {
            0.5
        };
        // Related identities are one voter: its newest vote replaces its
        // older ones, so a row keeps at most one vote per unrelated voter
        // however many identities one owner sends.
        if let Some(o) = &origin {
            self.votes.retain(|v| {
                !v.origin
                    .as_ref()
                    .is_some_and(|w| w.related(o, &config.relation, now_s))
            });
        }
        self.add_vote(Vote {
            device: device.clone(),
            hash: hash.clone(),
            tau,
            origin,
        });
        if tau >= config.tau_hi {
            self.settled = Some(hash.clone());
            return Ok(VoteOutcome::Settled {
                hash: hash.to_string(),
                by: SettledBy::Trusted,
            });
        }
        let origins: Vec<Option<&Origin>> = self
            .votes
            .iter()
            .filter(|v| v.hash == *hash)
            .map(|v| v.origin.as_ref())
            .collect();
        let (agreeing, credentials) = independent(&origins, &config.relation, now_s);
        let agreeing = agreeing as u32;
        if agreeing >= config.quorum && credentials as u32 >= config.quorum_credentials {
            self.settled = Some(hash.clone());
            return Ok(VoteOutcome::Settled {
                hash: hash.to_string(),
                by: SettledBy::Quorum,
            });
        }
        Ok(VoteOutcome::Pending { agreeing })
    }

    fn record(&mut self, device: &Arc<str>, hash: &Arc<str>, tau: f64) -> Result<(), VerifyError> {
        if self.settled.is_some() {
            return Err(VerifyError::Settled);
        }
        if self.votes.iter().any(|v| *v.device == **device) {
            return Err(VerifyError::AlreadyInvolved);
        }
        self.release(device);
        self.add_vote(Vote {
            device: device.clone(),
            hash: hash.clone(),
            tau: if tau.is_finite() {
                tau.clamp(0.0, 1.0)
            } else {
                0.5
            },
            origin: None,
        });
        Ok(())
    }

    fn settle_inferred(&mut self, hash: &Arc<str>) -> Result<VoteOutcome, VerifyError> {
        if self.settled.is_some() {
            return Err(VerifyError::Settled);
        }
        self.settled = Some(hash.clone());
        Ok(VoteOutcome::Settled {
            hash: hash.to_string(),
            by: SettledBy::Inferred,
        })
    }

    fn reopen(&mut self) {
        self.settled = None;
        self.votes.clear();
    }
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
