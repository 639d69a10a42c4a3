//! Sources written out rather than drawn: `[[sources.set]]` entries that
//! replace parts of one source's drawn truth (its archetypes' success and
//! latency, its walls, how often its content changes, its host's
//! politeness). Everything not written keeps its draw, and every other
//! source is drawn exactly as without the entry.

use serde::{Deserialize, Serialize};

use super::{bad, PerArchetype, PlanError};

/// The host index of source `s`: sources 3 and 5 share the hosts of 2 and
/// 4 (`host-2.example`, `host-4.example`); every other source has its own.
pub fn shared_host(s: usize) -> usize {
    match s {
        3 => 2,
        5 => 4,
        _ => s,
    }
}

/// A host's politeness limit as the operator declares it: a token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketPlan {
    /// Capacity, requests (1..=1,000).
    pub capacity: f64,
    /// Refill, requests per second (in (0, 1,000]).
    pub per_s: f64,
}

/// One source written out (`[[sources.set]]`). Every key but `source` is
/// optional; an absent one keeps the draw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSet {
    /// The source's index (below `sources.count`), at most one entry each.
    pub source: usize,
    /// Each archetype's success probability, each in [0, 1], before the
    /// walls and the residential factor.
    #[serde(default)]
    pub success: Option<PerArchetype<f64>>,
    /// Each archetype's median latency, seconds (each in (0, 3,600]).
    #[serde(default)]
    pub latency_s: Option<PerArchetype<f64>>,
    /// Needs JavaScript: refuses `container_plain` (`js_required`).
    #[serde(default)]
    pub needs_js: Option<bool>,
    /// CORS closed: refuses `browser` (`cors`).
    #[serde(default)]
    pub cors_closed: Option<bool>,
    /// An antibot family: refuses both containers (`antibot`).
    #[serde(default)]
    pub antibot: Option<bool>,
    /// Residential addresses preferred: containers succeed 15 % as often.
    #[serde(default)]
    pub residential: Option<bool>,
    /// How often its content changes, hours (in (0, 8,760]); each target's
    /// period keeps its drawn spread (0.7–1.3 of this).
    #[serde(default)]
    pub change_timescale_h: Option<f64>,
    /// The politeness limit the operator declares for its host (and the
    /// host's true limit unless `crawl_delay_s` is stricter). Applies to
    /// every source on that host.
    #[serde(default)]
    pub bucket: Option<BucketPlan>,
    /// The host's robots.txt crawl delay, seconds (in (0, 300]): the true
    /// limit becomes one request per `crawl_delay_s` where that is stricter
    /// than the declared bucket, which the operator does not know; devices
    /// report it with every deposit on the host's sources.
    #[serde(default)]
    pub crawl_delay_s: Option<f64>,
    /// The host answers a request over its true limit with 429 and this
    /// Retry-After, seconds (in (0, 3,600]), which the device reports
    /// (absent: it serves it, counted only as a politeness violation).
    #[serde(default)]
    pub retry_after_s: Option<f64>,
}

impl SourceSet {
    /// Whether the entry says anything of its host's politeness.
    fn sets_host(&self) -> bool {
        self.bucket.is_some() || self.crawl_delay_s.is_some() || self.retry_after_s.is_some()
    }

    fn check(&self, count: usize) -> Result<(), PlanError> {
        if self.source >= count {
            return Err(bad(
                "sources.set.source",
                format!("{} but sources.count is {count}", self.source),
            ));
        }
        check_shares(self.success, "sources.set.success")?;
        if let Some(l) = self.latency_s {
            for x in l.values() {
                check_range(x, (0.0, 3600.0), false, "sources.set.latency_s")?;
            }
        }
        if let Some(h) = self.change_timescale_h {
            check_range(h, (0.0, 8760.0), false, "sources.set.change_timescale_h")?;
        }
        if let Some(b) = self.bucket {
            if !((1.0..=1000.0).contains(&b.capacity) && b.per_s > 0.0 && b.per_s <= 1000.0) {
                return Err(bad(
                    "sources.set.bucket",
                    format!("{b:?}: capacity in [1, 1000], per_s in (0, 1000]"),
                ));
            }
        }
        if let Some(c) = self.crawl_delay_s {
            check_range(c, (0.0, 300.0), false, "sources.set.crawl_delay_s")?;
        }
        if let Some(r) = self.retry_after_s {
            check_range(r, (0.0, 3600.0), false, "sources.set.retry_after_s")?;
        }
        Ok(())
    }
}

/// Checks that `x` lies in `(lo, hi]`, or `[lo, hi]` where `from_lo`.
/// Errors: [`PlanError::Key`] at `key`, giving the range.
pub(super) fn check_range(
    x: f64,
    (lo, hi): (f64, f64),
    from_lo: bool,
    key: &'static str,
) -> Result<(), PlanError> {
    let above = if from_lo { x >= lo } else { x > lo };
    if above && x <= hi {
        return Ok(());
    }
    let open = if from_lo { '[' } else { '(' };
    Err(bad(key, format!("{x} outside {open}{lo}, {hi}]")))
}

/// Checks that every archetype's success probability in `p` lies in
/// [0, 1]. Errors: [`PlanError::Key`] at `key`.
pub(super) fn check_shares(
    p: Option<PerArchetype<f64>>,
    key: &'static str,
) -> Result<(), PlanError> {
    match p {
        Some(p) if p.values().iter().any(|x| !(0.0..=1.0).contains(x)) => {
            Err(bad(key, format!("{:?}: each in [0, 1]", p.values())))
        }
        _ => Ok(()),
    }
}

/// Checks every entry against `count` sources: in range, each source once,
/// and at most one entry setting the politeness of each host (two sources
/// on one host share its limit). Errors: [`PlanError::Key`].
pub(super) fn check_sets(sets: &[SourceSet], count: usize) -> Result<(), PlanError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut hosts = std::collections::BTreeMap::new();
    for s in sets {
        s.check(count)?;
        if !seen.insert(s.source) {
            return Err(bad(
                "sources.set.source",
                format!("source {} is set twice", s.source),
            ));
        }
        if s.sets_host() {
            let host = shared_host(s.source);
            if let Some(other) = hosts.insert(host, s.source) {
                return Err(bad(
                    "sources.set.bucket",
                    format!(
                        "sources {other} and {} share host-{host}.example: set its politeness once",
                        s.source
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "sources_tests.rs"]
mod tests;
