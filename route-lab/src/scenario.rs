//! The lab's scenarios and the run specification. Each scenario is one
//! departure from `steady`; `docs/routing-lab.md` describes what each is
//! built to show. Source: `ROUTING.md` §5.

use serde::{Deserialize, Serialize};

use super::plan::{PlanError, WorldPlan};
use super::SimError;

/// A simulated situation of the crawling fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Nothing changes: the reference for false drift alarms.
    Steady,
    /// Every browser goes offline for a night (a quarter of the run, from its third).
    Drought,
    /// At a third of the run one source starts refusing browsers with plain failures.
    RegimeChange,
    /// 20 % of browsers write the same forged content hash on every success.
    Liars,
    /// At a third of the run 30 % of devices upgrade to an adapter version
    /// that scrapes one source wrongly.
    AdapterBug,
    /// Database and object-store caps at half of the fleet's measured demand.
    BudgetSaturation,
    /// Many small sources, arriving in eight waves: few observations per source.
    ColdStart,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Scenario; 7] = [
        Scenario::Steady,
        Scenario::Drought,
        Scenario::RegimeChange,
        Scenario::Liars,
        Scenario::AdapterBug,
        Scenario::BudgetSaturation,
        Scenario::ColdStart,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::Drought => "drought",
            Scenario::RegimeChange => "regime-change",
            Scenario::Liars => "liars",
            Scenario::AdapterBug => "adapter-bug",
            Scenario::BudgetSaturation => "budget-saturation",
            Scenario::ColdStart => "cold-start",
        }
    }

    /// One sentence on what the scenario does.
    pub fn describe(self) -> &'static str {
        match self {
            Scenario::Steady => "stationary world: fixed truths, browsers and desktops come and go, no liars, no bugs",
            Scenario::Drought => "every browser leaves for a night (from 1/3 to 7/12 of the run); containers and desktops remain",
            Scenario::RegimeChange => "from 1/3 of the run, source src-0 refuses browsers with plain failures (no gate class)",
            Scenario::Liars => "20 % of browsers write one forged content hash (the same for all liars) on every success",
            Scenario::AdapterBug => "from 1/3 of the run, 30 % of devices run adapter 3.3, which scrapes src-1 to a wrong hash",
            Scenario::BudgetSaturation => "database and object-store caps per price window at half of what the fleet spends in steady",
            Scenario::ColdStart => "480 sources of one target each, arriving in 8 waves: each source has few observations",
        }
    }

    /// Parses a command-line name. Errors: [`SimError::UnknownScenario`].
    pub fn parse(s: &str) -> Result<Scenario, SimError> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| SimError::UnknownScenario(s.chars().take(64).collect()))
    }
}

impl Scenario {
    /// The shipped world file of this scenario (`route-lab/worlds/`).
    pub fn world_file(self) -> &'static str {
        match self {
            Scenario::Steady => include_str!("../worlds/steady.toml"),
            Scenario::Drought => include_str!("../worlds/drought.toml"),
            Scenario::RegimeChange => include_str!("../worlds/regime-change.toml"),
            Scenario::Liars => include_str!("../worlds/liars.toml"),
            Scenario::AdapterBug => include_str!("../worlds/adapter-bug.toml"),
            Scenario::BudgetSaturation => include_str!("../worlds/budget-saturation.toml"),
            Scenario::ColdStart => include_str!("../worlds/cold-start.toml"),
        }
    }

    /// The plan of this scenario, parsed from its shipped file. Errors:
    /// [`PlanError`] (a shipped file that does not parse is a build defect;
    /// a test parses every one).
    pub fn plan(self) -> Result<WorldPlan, PlanError> {
        WorldPlan::parse(self.world_file())
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Most devices a run may simulate.
pub const MAX_DEVICES: usize = 100_000;
/// Longest run, simulated hours (one week).
pub const MAX_HOURS: f64 = 168.0;

/// What to simulate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSpec {
    /// The scenario.
    pub scenario: Scenario,
    /// Devices in the population (1..=[`MAX_DEVICES`]).
    pub devices: usize,
    /// Simulated hours (> 0, ≤ [`MAX_HOURS`]).
    pub hours: f64,
    /// Seed of the world and of every draw.
    pub seed: u64,
    /// Router tick period, simulated seconds (1..=600; default 30).
    pub tick_s: f64,
    /// A world file's plan, in place of the scenario's shipped one
    /// ([`crate::plan`]; `route sim --world FILE.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<WorldPlan>,
    /// Report sampling period, simulated seconds (≥ tick; default: the run cut in 96).
    pub sample_s: f64,
}

impl SimSpec {
    /// A spec with the default tick (30 s) and sampling (96 samples).
    pub fn new(scenario: Scenario, devices: usize, hours: f64, seed: u64) -> SimSpec {
        SimSpec {
            scenario,
            devices,
            hours,
            seed,
            tick_s: 30.0,
            sample_s: (hours * 3600.0 / 96.0).max(30.0),
            world: None,
        }
    }

    /// The plan this run follows: the world file's, else the scenario's
    /// shipped one. Errors: [`SimError::World`].
    pub fn plan(&self) -> Result<WorldPlan, SimError> {
        match &self.world {
            Some(p) => {
                p.check()?;
                Ok(p.clone())
            }
            None => Ok(self.scenario.plan()?),
        }
    }

    /// Checks the ranges. Errors: [`SimError::BadSpec`] naming the field.
    pub fn check(&self) -> Result<(), SimError> {
        if !(1..=MAX_DEVICES).contains(&self.devices) {
            return Err(SimError::BadSpec(format!(
                "devices {} outside 1..={MAX_DEVICES}",
                self.devices
            )));
        }
        if !(self.hours.is_finite() && self.hours > 0.0 && self.hours <= MAX_HOURS) {
            return Err(SimError::BadSpec(format!(
                "hours {} outside (0, {MAX_HOURS}]",
                self.hours
            )));
        }
        if !(self.tick_s.is_finite() && (1.0..=600.0).contains(&self.tick_s)) {
            return Err(SimError::BadSpec(format!(
                "tick {} s outside [1, 600]",
                self.tick_s
            )));
        }
        if !(self.sample_s.is_finite() && self.sample_s >= self.tick_s) {
            return Err(SimError::BadSpec(format!(
                "sample period {} s must be finite and at least the tick ({} s)",
                self.sample_s, self.tick_s
            )));
        }
        Ok(())
    }

    /// The run's end, simulated seconds.
    pub fn end_s(&self) -> f64 {
        self.hours * 3600.0
    }
}
