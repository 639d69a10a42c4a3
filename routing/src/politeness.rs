//! Per-host token bucket: rate limit, Retry-After pause, capped crawl-delay.
//!
//! tokens ← min(capacity, tokens + rate·(t − t_last)), t_last ← max(t_last, t);
//! starts full; admitting costs one token. Source: `ROUTING.md` §3 Politeness.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest robots crawl-delay honoured, in seconds. Source: `ROUTING.md` §3 Politeness.
pub const MAX_CRAWL_DELAY_S: f64 = 300.0;

/// Errors of bucket configuration.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PolitenessError {
    /// Capacity must be finite and ≥ 1 (one request must fit).
    #[error("capacity must be finite and >= 1, got {0}")]
    BadCapacity(f64),
    /// Refill rate must be finite and > 0.
    #[error("refill rate must be finite and > 0, got {0}")]
    BadRate(f64),
    /// A duration (pause, crawl-delay) must be finite and ≥ 0.
    #[error("duration must be finite and >= 0, got {0}")]
    BadDuration(f64),
    /// A time must be finite.
    #[error("time must be finite, got {0}")]
    BadTime(f64),
}

/// The token bucket of one source host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    capacity: f64,
    rate: f64,
    tokens: f64,
    t_last: Option<f64>,
    paused_until: f64,
    /// A crawl delay is in force: one request per delay, no burst (the
    /// bucket holds at most one token until [`Bucket::lift_crawl_delay`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    spaced: bool,
    /// The rate declared again while a crawl delay held the refill lower:
    /// the rate [`Bucket::lift_crawl_delay`] restores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    declared_rate: Option<f64>,
}

/// A bucket's level: the tokens it held at its last refill and that
/// refill's time (seconds; `None`: never refilled). With the capacity and
/// rate it is all a bucket that was never paused, spaced or declared
/// again holds, so a holder of many such buckets of one capacity and rate
/// keeps their levels (24 bytes each) and one template
/// ([`Bucket::level`], [`Bucket::at_level`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Tokens held after the last refill.
    pub tokens: f64,
    /// Time of the last refill, seconds.
    pub t_last: Option<f64>,
}

impl Bucket {
    /// This bucket's level (see [`Level`]).
    pub fn level(&self) -> Level {
        Level {
            tokens: self.tokens,
            t_last: self.t_last,
        }
    }

    /// A copy of this bucket at `level`: its capacity, rate, pause and
    /// crawl delay, with the tokens and last refill of `level` (tokens
    /// above the ceiling are cut to it).
    pub fn at_level(&self, level: Level) -> Bucket {
        Bucket {
            tokens: level.tokens.min(self.ceiling()),
            t_last: level.t_last,
            ..self.clone()
        }
    }

    /// A full bucket of `capacity` tokens (finite, ≥ 1) refilling at `rate`
    /// tokens per second (finite, > 0). Errors: [`PolitenessError`].
    pub fn new(capacity: f64, rate: f64) -> Result<Bucket, PolitenessError> {
        if !(capacity.is_finite() && capacity >= 1.0) {
            return Err(PolitenessError::BadCapacity(capacity));
        }
        if !(rate.is_finite() && rate > 0.0) {
            return Err(PolitenessError::BadRate(rate));
        }
        Ok(Bucket {
            capacity,
            rate,
            tokens: capacity,
            t_last: None,
            paused_until: f64::MIN,
            spaced: false,
            declared_rate: None,
        })
    }

    /// Tokens now held (after the last refill).
    pub fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Refill rate in tokens per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Whether a pause holds admission at `t` (the refill aside). A
    /// non-finite `t` gives `false`.
    pub fn paused_at(&self, t: f64) -> bool {
        t.is_finite() && t < self.paused_until
    }

    /// Sets the refill rate (a lapsed crawl delay restores the rate it
    /// lowered); the tokens held and the pause stay. Errors:
    /// [`PolitenessError::BadRate`] for a rate that is not finite and > 0.
    pub fn set_rate(&mut self, rate: f64) -> Result<(), PolitenessError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(PolitenessError::BadRate(rate));
        }
        self.rate = rate;
        Ok(())
    }

    /// The most tokens held: the capacity, or one while a crawl delay is
    /// in force.
    fn ceiling(&self) -> f64 {
        if self.spaced {
            1.0
        } else {
            self.capacity
        }
    }

    fn refill(&mut self, t: f64) {
        let last = self.t_last.unwrap_or(t);
        let dt = (t - last).max(0.0);
        self.tokens = (self.tokens + self.rate * dt).min(self.ceiling());
        self.t_last = Some(last.max(t));
    }

    /// Asks to admit one request at time `t` (seconds, finite): refills, then
    /// admits if not paused and one token is held. Time running backwards
    /// refunds nothing. Errors: [`PolitenessError::BadTime`].
    pub fn admit(&mut self, t: f64) -> Result<bool, PolitenessError> {
        if !t.is_finite() {
            return Err(PolitenessError::BadTime(t));
        }
        self.refill(t);
        if t < self.paused_until || self.tokens < 1.0 {
            return Ok(false);
        }
        self.tokens -= 1.0;
        Ok(true)
    }

    /// Seconds from `t` until [`Bucket::admit`] could next succeed (0 when
    /// it would now): the later of the pause's end and the refill of one
    /// token. Reads only. A non-finite `t` gives +∞.
    pub fn next_admit_s(&self, t: f64) -> f64 {
        if !t.is_finite() {
            return f64::INFINITY;
        }
        let last = self.t_last.unwrap_or(t);
        let tokens = (self.tokens + self.rate * (t - last).max(0.0)).min(self.ceiling());
        let refill = ((1.0 - tokens) / self.rate).max(0.0);
        refill.max(self.paused_until - t).max(0.0)
    }

    /// Whether the bucket would hold its full capacity at `t` and is not
    /// paused then: it behaves exactly as a new bucket of the same
    /// capacity and rate would (a holder of many buckets may drop it and
    /// make a new one when next needed, losing nothing). Reads only; a
    /// non-finite `t` gives `false`.
    pub fn is_full_at(&self, t: f64) -> bool {
        if !t.is_finite() {
            return false;
        }
        let last = self.t_last.unwrap_or(t);
        let tokens = self.tokens + self.rate * (t - last).max(0.0);
        tokens >= self.capacity && t >= self.paused_until && !self.spaced
    }

    /// A `Retry-After` (or 429) reported at time `t`: no admission before
    /// `t + seconds`. Errors: [`PolitenessError::BadTime`], [`PolitenessError::BadDuration`].
    pub fn pause(&mut self, t: f64, seconds: f64) -> Result<(), PolitenessError> {
        if !t.is_finite() {
            return Err(PolitenessError::BadTime(t));
        }
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(PolitenessError::BadDuration(seconds));
        }
        self.paused_until = self.paused_until.max(t + seconds);
        Ok(())
    }

    /// A robots crawl-delay of `seconds` (capped at [`MAX_CRAWL_DELAY_S`])
    /// spaces requests at least that far apart: the refill rate falls to at
    /// most one token per delay and the bucket holds at most one token (a
    /// full bucket's burst would put several requests inside one delay;
    /// `docs/decisions/0023-a-crawl-delay-allows-no-burst.md`), until
    /// [`Bucket::lift_crawl_delay`]. 0 changes nothing. Errors:
    /// [`PolitenessError::BadDuration`].
    pub fn crawl_delay(&mut self, seconds: f64) -> Result<(), PolitenessError> {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(PolitenessError::BadDuration(seconds));
        }
        let d = seconds.min(MAX_CRAWL_DELAY_S);
        if d > 0.0 {
            self.rate = self.rate.min(1.0 / d);
            self.spaced = true;
            self.tokens = self.tokens.min(1.0);
        }
        Ok(())
    }

    /// Ends a crawl delay: the refill rate becomes `rate` (the one the delay
    /// lowered), or the rate declared since ([`Bucket::redeclare`]), and
    /// the bucket may fill to its capacity again. Errors:
    /// [`PolitenessError::BadRate`] (nothing changed).
    pub fn lift_crawl_delay(&mut self, rate: f64) -> Result<(), PolitenessError> {
        self.set_rate(self.declared_rate.unwrap_or(rate))?;
        self.spaced = false;
        self.declared_rate = None;
        Ok(())
    }

    /// The operator declares the host's limit again: `capacity` and `rate`
    /// as in [`Bucket::new`], but the tokens held (at most the new
    /// capacity: a redeclaration refills nothing), a Retry-After pause and
    /// a crawl delay in force stay (under a delay the refill stays at the
    /// lower of the new rate and the delay's, and the new rate is the one
    /// restored when the delay lifts). Redeclaring the same limit changes
    /// nothing. Errors: [`PolitenessError`] (nothing changed).
    pub fn redeclare(&mut self, capacity: f64, rate: f64) -> Result<(), PolitenessError> {
        Bucket::new(capacity, rate)?;
        self.capacity = capacity;
        self.tokens = self.tokens.min(capacity);
        if self.spaced {
            self.rate = self.rate.min(rate);
            self.declared_rate = Some(rate);
        } else {
            self.rate = rate;
        }
        Ok(())
    }

    /// Whether a crawl delay is in force ([`Bucket::crawl_delay`]).
    pub fn spaced(&self) -> bool {
        self.spaced
    }
}
