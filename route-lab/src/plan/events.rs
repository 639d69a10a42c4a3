//! Timed events of a world file: the drought, a regime change, an adapter
//! upgrade (buggy or correct), populations that drop out or register in a
//! burst, sources that change (`changes`). Times are fractions of the run ([`Fraction`]).

use serde::{Deserialize, Serialize};

use super::changes::{check_changes, SourceChange};
use super::{archetype_index, bad, Fraction, PlanError};
use crate::archetype::ARCHETYPES;

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
/// The i-th entry in time order brings version
/// [`crate::archetype::ADAPTER_LATER`]`[i]`; one that reaches devices
/// running the buggy version fixes the bug on them. Without the bug, what
/// the router must do with it is nothing (no adapter event, no trust lost
/// to the upgrade), and the first rollout's start is where trust is traced
/// from, as the adapter bug's control world does.
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

/// Most correct rollouts one world has.
pub const MAX_ROLLOUTS: usize = crate::archetype::ADAPTER_LATER.len();

/// Most devices one burst brings.
pub const MAX_BURST: usize = 100_000;

fn a_minute() -> f64 {
    60.0
}

/// Timed events (the first three at most once; a world needing more
/// regime changes writes them as `source_change` entries).
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
    /// Correct adapter versions that roll out (`[[events.adapter_rollout]]`,
    /// at most [`MAX_ROLLOUTS`], starting at distinct times).
    #[serde(default)]
    pub adapter_rollout: Vec<AdapterRollout>,
    /// Populations that drop out for a while (`[[events.dropout]]`).
    #[serde(default)]
    pub dropout: Vec<Dropout>,
    /// Populations that register in a burst (`[[events.burst]]`).
    #[serde(default)]
    pub burst: Vec<Burst>,
    /// Sources that change mid-run (`[[events.source_change]]`).
    #[serde(default)]
    pub source_change: Vec<SourceChange>,
}

impl EventsPlan {
    /// Checks every event against a world of `count` sources. Errors:
    /// [`PlanError::Key`] naming the key.
    pub(super) fn check(&self, count: usize) -> Result<(), PlanError> {
        if let Some(d) = &self.drought {
            let from = d.from.check("events.drought.from")?;
            let to = d.to.check("events.drought.to")?;
            if to <= from {
                return Err(bad(
                    "events.drought.to",
                    format!("{to} must come after from ({from})"),
                ));
            }
        }
        if let Some(r) = &self.regime_change {
            r.at.check("events.regime_change.at")?;
            if r.source >= count {
                return Err(bad(
                    "events.regime_change.source",
                    format!("{} but sources.count is {}", r.source, count),
                ));
            }
            if !ARCHETYPES.contains(&r.archetype.as_str()) {
                return Err(bad(
                    "events.regime_change.archetype",
                    format!("{:?}: use {}", r.archetype, ARCHETYPES.join(", ")),
                ));
            }
        }
        if let Some(b) = &self.adapter_bug {
            if b.source >= count {
                return Err(bad(
                    "events.adapter_bug.source",
                    format!("{} but sources.count is {}", b.source, count),
                ));
            }
            check_upgrade(
                (b.at, b.upgrade_share, b.over),
                [
                    "events.adapter_bug.at",
                    "events.adapter_bug.upgrade_share",
                    "events.adapter_bug.over",
                ],
            )?;
        }
        self.check_rollout()?;
        check_changes(&self.source_change, count)?;
        self.check_dropouts()?;
        self.check_bursts()
    }

    fn check_rollout(&self) -> Result<(), PlanError> {
        if self.adapter_rollout.len() > MAX_ROLLOUTS {
            return Err(bad(
                "events.adapter_rollout",
                format!(
                    "{} rollouts: at most {MAX_ROLLOUTS}",
                    self.adapter_rollout.len()
                ),
            ));
        }
        let mut starts = Vec::new();
        for r in &self.adapter_rollout {
            check_upgrade(
                (r.at, r.upgrade_share, r.over),
                [
                    "events.adapter_rollout.at",
                    "events.adapter_rollout.upgrade_share",
                    "events.adapter_rollout.over",
                ],
            )?;
            let at = r.at.value();
            if starts.contains(&at.to_bits()) {
                return Err(bad(
                    "events.adapter_rollout.at",
                    format!("two rollouts start at {at}: which version comes later is not said"),
                ));
            }
            starts.push(at.to_bits());
        }
        Ok(())
    }

    /// The buggy adapter's upgrade: its start, the share that upgrades and
    /// how long the rollout takes.
    pub fn upgrade(&self) -> Option<(Fraction, f64, Option<Fraction>)> {
        self.adapter_bug
            .as_ref()
            .map(|b| (b.at, b.upgrade_share, b.over))
    }

    /// The correct rollouts in time order (the i-th brings
    /// [`crate::archetype::ADAPTER_LATER`]`[i]`).
    pub fn rollouts(&self) -> Vec<&AdapterRollout> {
        let mut r: Vec<&AdapterRollout> = self.adapter_rollout.iter().collect();
        r.sort_by(|a, b| a.at.value().total_cmp(&b.at.value()));
        r
    }

    fn check_dropouts(&self) -> Result<(), PlanError> {
        for d in &self.dropout {
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
        for b in &self.burst {
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
}

/// Checks an upgrade's start, share and rollout time, `keys` naming them:
/// the start a fraction of the run, the share in (0, 1], and the rollout
/// over by the run's end. Errors: [`PlanError::Key`].
fn check_upgrade(
    (at, share, over): (Fraction, f64, Option<Fraction>),
    keys: [&'static str; 3],
) -> Result<(), PlanError> {
    let start = at.check(keys[0])?;
    if !(share > 0.0 && share <= 1.0) {
        return Err(bad(keys[1], format!("{share} outside (0, 1]")));
    }
    if let Some(over) = over {
        let o = over.check(keys[2])?;
        if start + o > 1.0 + 1e-12 {
            return Err(bad(
                keys[2],
                format!("at + over is {} (past the run's end)", start + o),
            ));
        }
    }
    Ok(())
}
