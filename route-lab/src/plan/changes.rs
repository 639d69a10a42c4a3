//! Sources that change mid-run: `[[events.source_change]]` entries. From
//! its time on, an entry replaces parts of one source's truth (its
//! archetypes' success and latency, its walls, which archetypes it refuses
//! outright) or its host's politeness (crawl delay, Retry-After). Changes
//! of one source stack in time order; what an entry does not write keeps
//! its value from before. The operator is told nothing: the router must
//! find each change from outcomes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sources::{check_range, check_shares, shared_host};
use super::{archetype_index, bad, Fraction, PerArchetype, PlanError};

/// One change of one source at one time (`[[events.source_change]]`).
/// Every key but `source` and `at` is optional; an entry must write at
/// least one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceChange {
    /// The source's index (below `sources.count`).
    pub source: usize,
    /// When, a fraction of the run.
    pub at: Fraction,
    /// Each archetype's success probability from now on, each in [0, 1].
    #[serde(default)]
    pub success: Option<PerArchetype<f64>>,
    /// Each archetype's median latency from now on, seconds (in (0, 3,600]).
    #[serde(default)]
    pub latency_s: Option<PerArchetype<f64>>,
    /// Needs JavaScript from now on (or no longer): refuses
    /// `container_plain` with the `js_required` gate class.
    #[serde(default)]
    pub needs_js: Option<bool>,
    /// CORS closed (or opened): refuses `browser` with `cors`.
    #[serde(default)]
    pub cors_closed: Option<bool>,
    /// An antibot family turned on (or off): refuses both containers with
    /// `antibot`.
    #[serde(default)]
    pub antibot: Option<bool>,
    /// Residential addresses preferred (or no longer).
    #[serde(default)]
    pub residential: Option<bool>,
    /// Archetypes the source starts refusing with plain failures (HTTP 403,
    /// no gate class to learn from), as the regime change does.
    #[serde(default)]
    pub refuses: Vec<String>,
    /// Archetypes whose plain refusal (an earlier entry's `refuses`) ends.
    #[serde(default)]
    pub allows: Vec<String>,
    /// The host's robots.txt crawl delay from now on, seconds (in
    /// [0, 300]; 0: the host drops it). Applies to every source on the host.
    #[serde(default)]
    pub crawl_delay_s: Option<f64>,
    /// The host's Retry-After on a request over its true limit from now
    /// on, seconds (in [0, 3,600]; 0: the host serves such requests again).
    /// Applies to every source on the host.
    #[serde(default)]
    pub retry_after_s: Option<f64>,
}

impl SourceChange {
    /// Whether the entry says anything of its host's politeness.
    pub fn sets_host(&self) -> bool {
        self.crawl_delay_s.is_some() || self.retry_after_s.is_some()
    }

    /// Whether the entry writes anything at all.
    fn writes_something(&self) -> bool {
        self.success.is_some()
            || self.latency_s.is_some()
            || self.needs_js.is_some()
            || self.cors_closed.is_some()
            || self.antibot.is_some()
            || self.residential.is_some()
            || !self.refuses.is_empty()
            || !self.allows.is_empty()
            || self.sets_host()
    }

    /// The archetype indexes of `refuses` and `allows`, checked: each a
    /// known archetype, none in both. Errors: [`PlanError::Key`].
    pub fn refusals(&self) -> Result<(Vec<usize>, Vec<usize>), PlanError> {
        let mut refuses = Vec::new();
        for name in &self.refuses {
            refuses.push(archetype_index(name, "events.source_change.refuses")?);
        }
        let mut allows = Vec::new();
        for name in &self.allows {
            let a = archetype_index(name, "events.source_change.allows")?;
            if refuses.contains(&a) {
                return Err(bad(
                    "events.source_change.allows",
                    format!("{name:?} is also in refuses: an entry refuses or allows it, not both"),
                ));
            }
            allows.push(a);
        }
        Ok((refuses, allows))
    }

    fn check(&self, count: usize) -> Result<f64, PlanError> {
        if self.source >= count {
            return Err(bad(
                "events.source_change.source",
                format!("{} but sources.count is {count}", self.source),
            ));
        }
        let at = self.at.check("events.source_change.at")?;
        if !self.writes_something() {
            return Err(bad(
                "events.source_change",
                format!(
                    "the change of source {} at {at} writes nothing: give at least one key besides source and at",
                    self.source
                ),
            ));
        }
        check_shares(self.success, "events.source_change.success")?;
        if let Some(l) = self.latency_s {
            for x in l.values() {
                check_range(x, (0.0, 3600.0), false, "events.source_change.latency_s")?;
            }
        }
        if let Some(c) = self.crawl_delay_s {
            check_range(c, (0.0, 300.0), true, "events.source_change.crawl_delay_s")?;
        }
        if let Some(r) = self.retry_after_s {
            check_range(r, (0.0, 3600.0), true, "events.source_change.retry_after_s")?;
        }
        self.refusals()?;
        Ok(at)
    }
}

/// Checks every entry against `count` sources: in range, writing something,
/// no source changed twice at one time, and no host's politeness changed
/// twice at one time (two sources on one host share its limit). Errors:
/// [`PlanError::Key`].
pub(super) fn check_changes(changes: &[SourceChange], count: usize) -> Result<(), PlanError> {
    let mut seen = BTreeMap::new();
    let mut hosts = BTreeMap::new();
    for c in changes {
        let at = c.check(count)?;
        if seen.insert((c.source, at.to_bits()), ()).is_some() {
            return Err(bad(
                "events.source_change.at",
                format!("source {} changes twice at {at}: write one entry", c.source),
            ));
        }
        if c.sets_host() {
            let host = shared_host(c.source);
            if let Some(other) = hosts.insert((host, at.to_bits()), c.source) {
                return Err(bad(
                    "events.source_change.crawl_delay_s",
                    format!(
                        "sources {other} and {} share host-{host}.example: change its politeness once at {at}",
                        c.source
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "changes_tests.rs"]
mod tests;
