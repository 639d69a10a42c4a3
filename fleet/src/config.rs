//! Typed fleet configuration (TOML) with environment overrides.
//!
//! Source: `DESIGN.md` §3 "Config"; seed 000 §2 item 6 (the retired stance
//! switch) and §5 (overrides are terminal).
//!
//! ```toml
//! profile = "auto"            # auto | pinned | serial
//! [budget]                    # whole cores; each override is terminal and sum-checked
//! ambient_cpus = 2
//! [posture]                   # the six cordon_* keys (see PosturePolicy)
//! cordon_enter_events = 2
//! [pump]
//! backstop_interval_ms = 250
//! stall_ticks = 8
//! ```
//!
//! Environment overrides win over the file (names in [`ENV_KEYS`]). Other
//! `DEGENBOT_*` names belong to the rest of the bot and are ignored here.
//! `DEGENBOT_FLEET` or a `fleet.stance` key fails the load: the stance
//! switch is retired and fleet is the only stance.

use crate::budget::BudgetOverrides;
use crate::plan::Profile;
use crate::posture::{PosturePolicy, PostureRetuneError};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Host pump settings (read by the pump).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PumpConfig {
    /// The backstop tick interval, ms (> 0; default 250).
    pub backstop_interval_ms: u64,
    /// K: consecutive admitting ticks without progress that fail loudly (> 0; default 8).
    pub stall_ticks: u32,
}

impl Default for PumpConfig {
    fn default() -> Self {
        PumpConfig {
            backstop_interval_ms: 250,
            stall_ticks: 8,
        }
    }
}

impl From<PumpConfig> for crate::pump::PumpConfig {
    /// The pump's timing from the config (the backstop is always enabled:
    /// only tests switch it off).
    fn from(c: PumpConfig) -> Self {
        crate::pump::PumpConfig {
            backstop_interval_ms: c.backstop_interval_ms,
            stall_ticks: c.stall_ticks,
            ..crate::pump::PumpConfig::default()
        }
    }
}

/// The whole fleet configuration. `Default` is the design's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// The requested profile (default `auto`).
    pub profile: Profile,
    /// Budget overrides (terminal, sum-checked at derive time).
    pub budget: BudgetOverrides,
    /// The posture policy (validated at load).
    pub posture: PosturePolicy,
    /// Host pump settings.
    pub pump: PumpConfig,
}

/// Why the configuration did not load. Each says what to fix.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    /// The TOML is malformed or names an unknown key (the message names it).
    #[error("fleet config: {0}")]
    Parse(String),
    /// The retired stance switch was set.
    #[error("the fleet stance switch is retired ({found}): fleet is the only stance; remove it")]
    StanceRetired {
        /// Where it was found: the env var or the key.
        found: String,
    },
    /// An environment override does not parse.
    #[error("environment variable {name}={value:?} is invalid: expected {expected}")]
    BadEnv {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// A posture key is invalid.
    #[error("fleet config [posture]: {0}")]
    Posture(#[from] PostureRetuneError),
    /// A pump key is zero.
    #[error("fleet config [pump]: {key} = 0 is invalid: it must be at least 1")]
    PumpZero {
        /// The key.
        key: &'static str,
    },
}

/// `(variable, what it sets)` for every environment override.
pub const ENV_KEYS: [(&str, &str); 15] = [
    ("DEGENBOT_PROFILE", "profile (auto | pinned | serial)"),
    ("DEGENBOT_RESERVE_CPUS", "budget.reserve_cpus"),
    ("DEGENBOT_IO_WORKERS", "budget.ambient_cpus"),
    ("DEGENBOT_RESOLVE_CPUS", "budget.resolve_cpus"),
    ("DEGENBOT_MERGE_CPUS", "budget.merge_cpus"),
    ("DEGENBOT_SOLVE_CPUS", "budget.solver_cpus"),
    ("DEGENBOT_SIM_SLOT_CAP", "budget.sim_slot_cap"),
    (
        "DEGENBOT_CORDON_ENTER_EVENTS",
        "posture.cordon_enter_events",
    ),
    (
        "DEGENBOT_CORDON_ENTER_WINDOW_MS",
        "posture.cordon_enter_window_ms",
    ),
    (
        "DEGENBOT_CORDON_DUTY_PERCENT",
        "posture.cordon_duty_percent",
    ),
    (
        "DEGENBOT_CORDON_DUTY_WINDOW_MS",
        "posture.cordon_duty_window_ms",
    ),
    (
        "DEGENBOT_CORDON_EXIT_CLEAN_MS",
        "posture.cordon_exit_clean_ms",
    ),
    (
        "DEGENBOT_CORDON_SIM_INTAKE_FLOOR",
        "posture.cordon_sim_intake_floor (a number, or `unset`)",
    ),
    ("DEGENBOT_BACKSTOP_INTERVAL_MS", "pump.backstop_interval_ms"),
    ("DEGENBOT_STALL_TICKS", "pump.stall_ticks"),
];

fn parse_env<T: std::str::FromStr>(
    name: &str,
    value: &str,
    expected: &'static str,
) -> Result<T, ConfigError> {
    value.trim().parse::<T>().map_err(|_| ConfigError::BadEnv {
        name: name.into(),
        value: value.into(),
        expected,
    })
}

impl FleetConfig {
    /// Parse `toml_text` (may be empty), then apply the environment
    /// overrides from `env`, then validate. Errors: [`ConfigError`].
    pub fn load(
        toml_text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<FleetConfig, ConfigError> {
        let table: toml::Table = toml_text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string()))?;
        let stance_key = table
            .get("fleet")
            .and_then(|f| f.as_table())
            .is_some_and(|f| f.contains_key("stance"));
        if stance_key || table.contains_key("stance") {
            return Err(ConfigError::StanceRetired {
                found: "the fleet.stance key".into(),
            });
        }
        let mut cfg: FleetConfig = toml::from_str(toml_text)
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string()))?;
        let env: Vec<(String, String)> = env.into_iter().collect();
        if env.iter().any(|(k, _)| k == "DEGENBOT_FLEET") {
            return Err(ConfigError::StanceRetired {
                found: "the DEGENBOT_FLEET environment variable".into(),
            });
        }
        for (name, value) in &env {
            let (n, v) = (name.as_str(), value.as_str());
            let cores = "a whole number of cores ≥ 1";
            let ms = "a whole number of milliseconds";
            match n {
                "DEGENBOT_PROFILE" => cfg.profile = parse_env(n, v, "auto, pinned or serial")?,
                "DEGENBOT_RESERVE_CPUS" => cfg.budget.reserve_cpus = Some(parse_env(n, v, cores)?),
                "DEGENBOT_IO_WORKERS" => cfg.budget.ambient_cpus = Some(parse_env(n, v, cores)?),
                "DEGENBOT_RESOLVE_CPUS" => cfg.budget.resolve_cpus = Some(parse_env(n, v, cores)?),
                "DEGENBOT_MERGE_CPUS" => cfg.budget.merge_cpus = Some(parse_env(n, v, cores)?),
                "DEGENBOT_SOLVE_CPUS" => cfg.budget.solver_cpus = Some(parse_env(n, v, cores)?),
                "DEGENBOT_SIM_SLOT_CAP" => {
                    cfg.budget.sim_slot_cap = Some(parse_env(n, v, "a whole number of seats")?)
                }
                "DEGENBOT_CORDON_ENTER_EVENTS" => {
                    cfg.posture.cordon_enter_events = parse_env(n, v, "a whole number")?
                }
                "DEGENBOT_CORDON_ENTER_WINDOW_MS" => {
                    cfg.posture.cordon_enter_window_ms = parse_env(n, v, ms)?
                }
                "DEGENBOT_CORDON_DUTY_PERCENT" => {
                    cfg.posture.cordon_duty_percent = parse_env(n, v, "a percentage")?
                }
                "DEGENBOT_CORDON_DUTY_WINDOW_MS" => {
                    cfg.posture.cordon_duty_window_ms = parse_env(n, v, ms)?
                }
                "DEGENBOT_CORDON_EXIT_CLEAN_MS" => {
                    cfg.posture.cordon_exit_clean_ms = parse_env(n, v, ms)?
                }
                "DEGENBOT_CORDON_SIM_INTAKE_FLOOR" => {
                    cfg.posture.cordon_sim_intake_floor = match v.trim() {
                        "" | "unset" => None,
                        _ => Some(parse_env(n, v, "a whole number of seats, or `unset`")?),
                    }
                }
                "DEGENBOT_BACKSTOP_INTERVAL_MS" => {
                    cfg.pump.backstop_interval_ms = parse_env(n, v, ms)?
                }
                "DEGENBOT_STALL_TICKS" => {
                    cfg.pump.stall_ticks = parse_env(n, v, "a whole number of ticks")?
                }
                _ => {}
            }
        }
        cfg.posture.validate()?;
        if cfg.pump.backstop_interval_ms == 0 {
            return Err(ConfigError::PumpZero {
                key: "backstop_interval_ms",
            });
        }
        if cfg.pump.stall_ticks == 0 {
            return Err(ConfigError::PumpZero { key: "stall_ticks" });
        }
        Ok(cfg)
    }
}
