//! A world as a file: the plan [`crate::World::build`] follows beyond the
//! run's size and seed. The seven shipped scenarios are such files, in
//! `route-lab/worlds/` (embedded in the binary); `fleet-lab route sim
//! --world FILE.toml` runs any other. Source: `ROUTING.md` §5;
//! docs/routing-lab.md ("Worlds as files") documents every key.
//!
//! What a file can say: the sources (how many, targets each, how many
//! arrival waves); the population (the archetypes' shares and session
//! processes, the share of browsers that lie); timed events (browsers'
//! drought, a source's regime change for one archetype, an adapter version
//! that scrapes one source wrongly and up to eight that scrape correctly,
//! each rolled out to a share of devices at once or gradually, populations that drop out for a while, populations
//! that register in a burst, sources whose walls, refusals and politeness
//! change at any time); sources written out rather than drawn
//! (`[[sources.set]]`: success, latency, walls, change rate, politeness,
//! crawl delay, Retry-After); and budget caps as a share of the fleet's
//! demand. Times are fractions of the run, written as a number or as
//! `"a/b"` (kept exact: `"1/3"` is the end divided by 3).

use serde::{Deserialize, Serialize};

use super::archetype::ARCHETYPES;

mod changes;
mod events;
mod fraction;
mod sources;

pub use changes::SourceChange;
pub use events::{
    AdapterBug, AdapterRollout, Burst, Dropout, Drought, EventsPlan, RegimeChange, MAX_BURST,
    MAX_ROLLOUTS,
};
pub use fraction::Fraction;
pub use sources::{shared_host, BucketPlan, SourceSet};

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
    /// Sources written out rather than drawn (`[[sources.set]]`).
    #[serde(default)]
    pub set: Vec<SourceSet>,
}

fn one() -> usize {
    1
}

/// One value per archetype.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerArchetype<T> {
    /// Browsers.
    pub browser: T,
    /// Desktop apps.
    pub desktop: T,
    /// Containers that render.
    pub container_render: T,
    /// Plain containers.
    pub container_plain: T,
}

impl<T: Copy> PerArchetype<T> {
    /// The values in [`ARCHETYPES`] order.
    pub fn values(&self) -> [T; 4] {
        [
            self.browser,
            self.desktop,
            self.container_render,
            self.container_plain,
        ]
    }
}

/// An archetype's sessions: online for an exponential time of mean `on_h`
/// hours, then offline for one of mean `off_h` hours, and so on, starting
/// online with probability 3/4. `off_h = 0`: online the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Mean hours online (> 0).
    pub on_h: f64,
    /// Mean hours offline (≥ 0; 0: never offline).
    pub off_h: f64,
}

/// The session processes of the archetypes (the defaults: browsers 3 h on,
/// 1 h off; desktops 8 h on, 1 h off; containers always online).
pub const DEFAULT_SESSIONS: [Session; 4] = [
    Session {
        on_h: 3.0,
        off_h: 1.0,
    },
    Session {
        on_h: 8.0,
        off_h: 1.0,
    },
    Session {
        on_h: 1.0,
        off_h: 0.0,
    },
    Session {
        on_h: 1.0,
        off_h: 0.0,
    },
];

/// The population.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopulationPlan {
    /// Share of browsers that write one forged hash (the same for all of
    /// them) on every success, in [0, 1] (default 0).
    #[serde(default)]
    pub liar_share_of_browsers: f64,
    /// Share of each archetype in the run's devices, each in [0, 1],
    /// summing to 1 (default 0.55, 0.20, 0.10, 0.15).
    #[serde(default)]
    pub shares: Option<PerArchetype<f64>>,
    /// Each archetype's sessions (default [`DEFAULT_SESSIONS`]).
    #[serde(default)]
    pub sessions: Option<PerArchetype<Session>>,
}

impl PopulationPlan {
    /// The archetype shares.
    pub fn shares(&self) -> [f64; 4] {
        self.shares
            .map(|s| s.values())
            .unwrap_or(crate::archetype::ARCH_SHARE)
    }

    /// The session processes.
    pub fn sessions(&self) -> [Session; 4] {
        self.sessions
            .map(|s| s.values())
            .unwrap_or(DEFAULT_SESSIONS)
    }
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
        sources::check_sets(&s.set, s.count)?;
        let liars = self.population.liar_share_of_browsers;
        if !(0.0..=1.0).contains(&liars) {
            return Err(bad(
                "population.liar_share_of_browsers",
                format!("{liars} outside [0, 1]"),
            ));
        }
        self.events.check(s.count)?;
        self.check_population()?;
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

    /// The buggy adapter's upgrade: its start, the share that upgrades and
    /// how long the rollout takes.
    pub fn upgrade(&self) -> Option<(Fraction, f64, Option<Fraction>)> {
        self.events.upgrade()
    }

    fn check_population(&self) -> Result<(), PlanError> {
        if let Some(shares) = self.population.shares {
            let v = shares.values();
            if v.iter().any(|x| !(0.0..=1.0).contains(x))
                || (v.iter().sum::<f64>() - 1.0).abs() > 1e-9
            {
                return Err(bad(
                    "population.shares",
                    format!("{v:?}: each in [0, 1], summing to 1"),
                ));
            }
        }
        if let Some(sessions) = self.population.sessions {
            for s in sessions.values() {
                let ok =
                    s.on_h.is_finite() && s.on_h > 0.0 && s.off_h.is_finite() && s.off_h >= 0.0;
                if !ok {
                    return Err(bad(
                        "population.sessions",
                        format!("{s:?}: on_h > 0 and off_h ≥ 0 hours, both finite"),
                    ));
                }
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

/// The index of archetype `name`. Errors: [`PlanError::Key`] at `key`.
pub fn archetype_index(name: &str, key: &'static str) -> Result<usize, PlanError> {
    ARCHETYPES
        .iter()
        .position(|a| *a == name)
        .ok_or_else(|| bad(key, format!("{name:?}: use {}", ARCHETYPES.join(", "))))
}

#[cfg(test)]
mod tests;
