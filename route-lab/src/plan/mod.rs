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
//! that scrapes one source wrongly (or one that scrapes correctly), rolled
//! out to a share of devices at once or gradually, populations that drop out for a while, populations
//! that register in a burst); sources written out rather than drawn
//! (`[[sources.set]]`: success, latency, walls, change rate, politeness,
//! crawl delay, Retry-After); and budget caps as a share of the fleet's
//! demand. Times are fractions of the run, written as a number or as
//! `"a/b"` (kept exact: `"1/3"` is the end divided by 3).

use serde::{Deserialize, Serialize};

use super::archetype::ARCHETYPES;

mod fraction;
mod sources;

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

/// From `at`, a share of devices upgrade to an adapter that scrapes
/// `source` to a wrong hash: all at once, or rolled out evenly over `over`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterBug {
    /// Source index (below `sources.count`).
    pub source: usize,
    /// When the rollout starts.
    pub at: Fraction,
    /// Share of the devices present from the start that upgrade, in (0, 1].
    pub upgrade_share: f64,
    /// How long the rollout takes, a fraction of the run (default 0: all
    /// at `at`); `at + over` at most the run's end.
    #[serde(default)]
    pub over: Option<Fraction>,
}

/// From `at`, a share of devices upgrade to an adapter version that scrapes
/// every source correctly: all at once, or rolled out evenly over `over`.
/// What the router must do with it: nothing (no adapter event, no trust
/// lost to the upgrade). Built as the adapter bug's control world is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterRollout {
    /// When the rollout starts.
    pub at: Fraction,
    /// Share of the devices present from the start that upgrade, in (0, 1].
    pub upgrade_share: f64,
    /// How long the rollout takes, a fraction of the run (default 0: all
    /// at `at`); `at + over` at most the run's end.
    #[serde(default)]
    pub over: Option<Fraction>,
}

/// A population drops out: `share` of the devices of `archetype` are
/// offline from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropout {
    /// Archetype name.
    pub archetype: String,
    /// Start.
    pub from: Fraction,
    /// End (after `from`).
    pub to: Fraction,
    /// Share of that archetype's devices, in (0, 1] (default 1).
    #[serde(default = "all")]
    pub share: f64,
}

fn all() -> f64 {
    1.0
}

/// A new population registers in a burst: `count` devices of `archetype`
/// come online within `within_s` seconds after `at`, then follow their
/// archetype's sessions; `liar_share` of them write the liars' forged hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    /// Archetype name.
    pub archetype: String,
    /// Devices (1..=[`MAX_BURST`]).
    pub count: usize,
    /// When.
    pub at: Fraction,
    /// Spread of the arrivals, seconds (0..=3,600; default 60).
    #[serde(default = "a_minute")]
    pub within_s: f64,
    /// Share of them that lie, in [0, 1] (default 0).
    #[serde(default)]
    pub liar_share: f64,
}

/// Most devices one burst brings.
pub const MAX_BURST: usize = 100_000;

fn a_minute() -> f64 {
    60.0
}

/// Timed events (the first three at most once).
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
    /// A correct adapter version rolls out (not with `adapter_bug`).
    #[serde(default)]
    pub adapter_rollout: Option<AdapterRollout>,
    /// Populations that drop out for a while (`[[events.dropout]]`).
    #[serde(default)]
    pub dropout: Vec<Dropout>,
    /// Populations that register in a burst (`[[events.burst]]`).
    #[serde(default)]
    pub burst: Vec<Burst>,
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
        self.check_rollout()?;
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
            if let Some(over) = b.over {
                let o = over.check("events.adapter_bug.over")?;
                if b.at.value() + o > 1.0 + 1e-12 {
                    return Err(bad(
                        "events.adapter_bug.over",
                        format!("at + over is {} (past the run's end)", b.at.value() + o),
                    ));
                }
            }
        }
        self.check_population()?;
        self.check_dropouts()?;
        self.check_bursts()?;
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

    fn check_rollout(&self) -> Result<(), PlanError> {
        let Some(r) = &self.events.adapter_rollout else {
            return Ok(());
        };
        if self.events.adapter_bug.is_some() {
            return Err(bad(
                "events.adapter_rollout",
                "a world rolls out one adapter version: adapter_bug or adapter_rollout, not both",
            ));
        }
        let at = r.at.check("events.adapter_rollout.at")?;
        if !(r.upgrade_share > 0.0 && r.upgrade_share <= 1.0) {
            return Err(bad(
                "events.adapter_rollout.upgrade_share",
                format!("{} outside (0, 1]", r.upgrade_share),
            ));
        }
        if let Some(over) = r.over {
            let o = over.check("events.adapter_rollout.over")?;
            if at + o > 1.0 + 1e-12 {
                return Err(bad(
                    "events.adapter_rollout.over",
                    format!("at + over is {} (past the run's end)", at + o),
                ));
            }
        }
        Ok(())
    }

    /// The adapter upgrade, buggy or correct: its start, the share that
    /// upgrades and how long the rollout takes.
    pub fn upgrade(&self) -> Option<(Fraction, f64, Option<Fraction>)> {
        let ev = &self.events;
        ev.adapter_bug
            .as_ref()
            .map(|b| (b.at, b.upgrade_share, b.over))
            .or(ev
                .adapter_rollout
                .as_ref()
                .map(|r| (r.at, r.upgrade_share, r.over)))
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

    fn check_dropouts(&self) -> Result<(), PlanError> {
        for d in &self.events.dropout {
            archetype_index(&d.archetype, "events.dropout.archetype")?;
            let from = d.from.check("events.dropout.from")?;
            let to = d.to.check("events.dropout.to")?;
            if to <= from {
                return Err(bad(
                    "events.dropout.to",
                    format!("{to} must come after from ({from})"),
                ));
            }
            if !(d.share > 0.0 && d.share <= 1.0) {
                return Err(bad(
                    "events.dropout.share",
                    format!("{} outside (0, 1]", d.share),
                ));
            }
        }
        Ok(())
    }

    fn check_bursts(&self) -> Result<(), PlanError> {
        for b in &self.events.burst {
            archetype_index(&b.archetype, "events.burst.archetype")?;
            b.at.check("events.burst.at")?;
            if !(1..=MAX_BURST).contains(&b.count) {
                return Err(bad(
                    "events.burst.count",
                    format!("{} outside 1..={MAX_BURST}", b.count),
                ));
            }
            if !(b.within_s.is_finite() && (0.0..=3600.0).contains(&b.within_s)) {
                return Err(bad(
                    "events.burst.within_s",
                    format!("{} outside [0, 3600] seconds", b.within_s),
                ));
            }
            if !(0.0..=1.0).contains(&b.liar_share) {
                return Err(bad(
                    "events.burst.liar_share",
                    format!("{} outside [0, 1]", b.liar_share),
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

/// The index of archetype `name`. Errors: [`PlanError::Key`] at `key`.
pub fn archetype_index(name: &str, key: &'static str) -> Result<usize, PlanError> {
    ARCHETYPES
        .iter()
        .position(|a| *a == name)
        .ok_or_else(|| bad(key, format!("{name:?}: use {}", ARCHETYPES.join(", "))))
}

#[cfg(test)]
mod tests;
