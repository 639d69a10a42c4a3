//! A world as a file: the plan [`crate::World::build`] follows beyond the
//! run's size and seed. The seven shipped scenarios are such files, in
//! `route-lab/worlds/` (embedded in the binary); `fleet-lab route sim
//! --world FILE.toml` runs any other. Source: `ROUTING.md` §5;
//! docs/routing-lab.md ("Worlds as files") documents every key.
//!
//! What a file can say today: the sources (how many, targets each, how
//! many arrival waves), the share of browsers that lie, and three timed
//! events (browsers' drought, a source's regime change for one archetype,
//! an adapter version that scrapes one source wrongly, rolled out to a
//! share of devices at once), and budget caps as a share of the fleet's
//! demand. Times are fractions of the run, written as a number or as
//! `"a/b"` (kept exact: `"1/3"` is the end divided by 3).

use serde::{Deserialize, Deserializer, Serialize};

use super::archetype::ARCHETYPES;

/// Most sources a world may have.
pub const MAX_SOURCES: usize = 10_000;
/// Most targets per source.
pub const MAX_TARGETS_PER_SOURCE: usize = 1_000;

/// Why a world file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// Not TOML, an unknown key, or a value of the wrong type (the TOML
    /// parser's message names the key and the line).
    #[error("world file: {0}")]
    Parse(String),
    /// A value out of range, or two that contradict each other.
    #[error("world file: {key}: {reason}")]
    Key {
        /// The key, dotted (`events.drought.to`).
        key: &'static str,
        /// What is wrong and what is accepted.
        reason: String,
    },
}

fn bad(key: &'static str, reason: impl Into<String>) -> PlanError {
    PlanError::Key {
        key,
        reason: reason.into(),
    }
}

/// A fraction of the run, `num / den`, kept as written so `"1/3"` of the
/// run's end is `end / 3` exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fraction {
    /// Numerator.
    pub num: f64,
    /// Denominator (> 0).
    pub den: f64,
}

impl Fraction {
    /// `num / den` of the plain value `v`.
    pub const fn of(num: f64, den: f64) -> Fraction {
        Fraction { num, den }
    }

    /// The fraction's value.
    pub fn value(self) -> f64 {
        self.num / self.den
    }

    /// This fraction of `end`: `end * num / den` (`end / den` when num is 1).
    pub fn of_end(self, end: f64) -> f64 {
        if self.num == 1.0 {
            end / self.den
        } else {
            end * self.num / self.den
        }
    }

    fn check(self, key: &'static str) -> Result<f64, PlanError> {
        let v = self.value();
        if self.num.is_finite()
            && self.den.is_finite()
            && self.den > 0.0
            && (0.0..=1.0).contains(&v)
        {
            Ok(v)
        } else {
            Err(bad(
                key,
                format!("{v} is not a fraction of the run in [0, 1]"),
            ))
        }
    }
}

impl Serialize for Fraction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.den == 1.0 {
            s.serialize_f64(self.num)
        } else {
            s.serialize_str(&format!("{}/{}", self.num, self.den))
        }
    }
}

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(v) => Ok(Fraction::of(v, 1.0)),
            Raw::Text(t) => {
                let (a, b) = t.split_once('/').ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{t:?} is not a fraction: write 0.25 or \"1/4\""
                    ))
                })?;
                let num: f64 = a.trim().parse().map_err(serde::de::Error::custom)?;
                let den: f64 = b.trim().parse().map_err(serde::de::Error::custom)?;
                Ok(Fraction::of(num, den))
            }
        }
    }
}

/// The sources.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourcesPlan {
    /// How many (1..=[`MAX_SOURCES`]; at least 2: `src-0` and `src-1` are
    /// the sources where browsers shine, where the events act).
    pub count: usize,
    /// Targets per source (1..=[`MAX_TARGETS_PER_SOURCE`]).
    pub targets_per_source: usize,
    /// The sources arrive in this many equal waves over the run, the first
    /// at the start (1..=count; default 1: all at the start).
    #[serde(default = "one")]
    pub arrival_waves: usize,
}

fn one() -> usize {
    1
}

/// The devices beyond the fixed archetype mix.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopulationPlan {
    /// Share of browsers that write one forged hash (the same for all of
    /// them) on every success, in [0, 1] (default 0).
    #[serde(default)]
    pub liar_share_of_browsers: f64,
}

/// Browsers offline from `from` to `to` (fractions of the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drought {
    /// Start.
    pub from: Fraction,
    /// End (after `from`).
    pub to: Fraction,
}

/// From `at`, `source` refuses `archetype` with plain failures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegimeChange {
    /// Source index (below `sources.count`).
    pub source: usize,
    /// Archetype name.
    pub archetype: String,
    /// When.
    pub at: Fraction,
}

/// At `at`, a share of devices upgrade to an adapter that scrapes
/// `source` to a wrong hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterBug {
    /// Source index (below `sources.count`).
    pub source: usize,
    /// When.
    pub at: Fraction,
    /// Share of all devices that upgrade, in (0, 1].
    pub upgrade_share: f64,
}

/// Timed events (each at most once).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsPlan {
    /// Every browser offline for a while.
    #[serde(default)]
    pub drought: Option<Drought>,
    /// A source turns one archetype away.
    #[serde(default)]
    pub regime_change: Option<RegimeChange>,
    /// A buggy adapter version rolls out.
    #[serde(default)]
    pub adapter_bug: Option<AdapterBug>,
}

/// Budget caps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetPlan {
    /// Database and object-store caps per price window as this share of
    /// what the fleet would spend uncapped, in (0, 1] (absent: uncapped).
    #[serde(default)]
    pub caps_share_of_demand: Option<f64>,
}

/// A world's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldPlan {
    /// Its name in reports.
    pub name: String,
    /// One sentence on what it does.
    pub description: String,
    /// The sources.
    pub sources: SourcesPlan,
    /// The population.
    #[serde(default)]
    pub population: PopulationPlan,
    /// Timed events.
    #[serde(default)]
    pub events: EventsPlan,
    /// Budget caps.
    #[serde(default)]
    pub budget: BudgetPlan,
}

impl WorldPlan {
    /// Parses and checks a world file. Errors: [`PlanError`] naming the key.
    pub fn parse(text: &str) -> Result<WorldPlan, PlanError> {
        let plan: WorldPlan = toml::from_str(text).map_err(|e| PlanError::Parse(e.to_string()))?;
        plan.check()?;
        Ok(plan)
    }

    /// Checks every range and that the values agree with each other.
    /// Errors: [`PlanError::Key`].
    pub fn check(&self) -> Result<(), PlanError> {
        if self.name.trim().is_empty() || self.name.len() > 64 {
            return Err(bad("name", "1 to 64 characters"));
        }
        let s = &self.sources;
        if !(2..=MAX_SOURCES).contains(&s.count) {
            return Err(bad(
                "sources.count",
                format!("{} outside 2..={MAX_SOURCES}", s.count),
            ));
        }
        if !(1..=MAX_TARGETS_PER_SOURCE).contains(&s.targets_per_source) {
            return Err(bad(
                "sources.targets_per_source",
                format!(
                    "{} outside 1..={MAX_TARGETS_PER_SOURCE}",
                    s.targets_per_source
                ),
            ));
        }
        if !(1..=s.count).contains(&s.arrival_waves) {
            return Err(bad(
                "sources.arrival_waves",
                format!(
                    "{} outside 1..=sources.count ({})",
                    s.arrival_waves, s.count
                ),
            ));
        }
        let liars = self.population.liar_share_of_browsers;
        if !(0.0..=1.0).contains(&liars) {
            return Err(bad(
                "population.liar_share_of_browsers",
                format!("{liars} outside [0, 1]"),
            ));
        }
        if let Some(d) = &self.events.drought {
            let from = d.from.check("events.drought.from")?;
            let to = d.to.check("events.drought.to")?;
            if to <= from {
                return Err(bad(
                    "events.drought.to",
                    format!("{to} must come after from ({from})"),
                ));
            }
        }
        if let Some(r) = &self.events.regime_change {
            r.at.check("events.regime_change.at")?;
            if r.source >= s.count {
                return Err(bad(
                    "events.regime_change.source",
                    format!("{} but sources.count is {}", r.source, s.count),
                ));
            }
            if !ARCHETYPES.contains(&r.archetype.as_str()) {
                return Err(bad(
                    "events.regime_change.archetype",
                    format!("{:?}: use {}", r.archetype, ARCHETYPES.join(", ")),
                ));
            }
        }
        if let Some(b) = &self.events.adapter_bug {
            b.at.check("events.adapter_bug.at")?;
            if b.source >= s.count {
                return Err(bad(
                    "events.adapter_bug.source",
                    format!("{} but sources.count is {}", b.source, s.count),
                ));
            }
            if !(b.upgrade_share > 0.0 && b.upgrade_share <= 1.0) {
                return Err(bad(
                    "events.adapter_bug.upgrade_share",
                    format!("{} outside (0, 1]", b.upgrade_share),
                ));
            }
        }
        if let Some(c) = self.budget.caps_share_of_demand {
            if !(c > 0.0 && c <= 1.0) {
                return Err(bad(
                    "budget.caps_share_of_demand",
                    format!("{c} outside (0, 1]"),
                ));
            }
        }
        Ok(())
    }

    /// The archetype index of the regime change, if any.
    pub fn regime_archetype(&self) -> Option<usize> {
        let r = self.events.regime_change.as_ref()?;
        ARCHETYPES.iter().position(|a| *a == r.archetype)
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
