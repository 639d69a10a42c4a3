//! Bounds of the numeric command-line arguments, checked while parsing so
//! a value out of range is refused with one plain sentence before anything
//! starts; the fleet config file and its environment overrides are held to
//! the same ranges ([`load_config`]). Negative numbers reach these parsers as values (the arguments
//! allow hyphen values) and are refused here, with the domain's reason.

/// The most CPUs a quota may name: more than any host the fleet runs on has.
pub const MAX_CORES: f64 = 4096.0;
/// The longest window in milliseconds: one day.
pub const MAX_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
/// The largest time scale: 100 (a cycle a hundred times slower than live).
pub const MAX_SCALE: f64 = 100.0;

/// Why a numeric argument was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BoundError {
    /// The text is not a number of the expected kind.
    #[error("{flag} {text:?} is not a number")]
    NotANumber {
        /// The argument.
        flag: &'static str,
        /// The text given.
        text: String,
    },
    /// Infinity or NaN.
    #[error("{flag} {text} is invalid: it is not finite; give {expected}")]
    NotFinite {
        /// The argument.
        flag: &'static str,
        /// The text given.
        text: String,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// Below the argument's range.
    #[error("{flag} {text} is invalid: give {expected}")]
    TooSmall {
        /// The argument.
        flag: &'static str,
        /// The text given.
        text: String,
        /// What a valid value looks like.
        expected: &'static str,
    },
    /// Above the argument's range.
    #[error("{flag} {text} is invalid: at most {max} {unit}")]
    TooLarge {
        /// The argument.
        flag: &'static str,
        /// The text given.
        text: String,
        /// The largest value allowed.
        max: String,
        /// What the maximum counts.
        unit: &'static str,
    },
}

fn float(flag: &'static str, s: &str, expected: &'static str) -> Result<f64, BoundError> {
    let text = s.trim().to_string();
    let v: f64 = text.parse().map_err(|_| BoundError::NotANumber {
        flag,
        text: text.clone(),
    })?;
    if !v.is_finite() {
        return Err(BoundError::NotFinite {
            flag,
            text,
            expected,
        });
    }
    if v <= 0.0 {
        return Err(BoundError::TooSmall {
            flag,
            text,
            expected,
        });
    }
    Ok(v)
}

fn at_most(
    flag: &'static str,
    s: &str,
    v: f64,
    max: f64,
    unit: &'static str,
) -> Result<f64, BoundError> {
    if v > max {
        return Err(BoundError::TooLarge {
            flag,
            text: s.trim().to_string(),
            max: max.to_string(),
            unit,
        });
    }
    Ok(v)
}

fn cores(flag: &'static str, s: &str) -> Result<f64, BoundError> {
    let v = float(flag, s, "a positive number of cores, e.g. 8 or 6.5")?;
    at_most(flag, s, v, MAX_CORES, "cores")
}

/// `--quota`: a positive, finite number of cores, at most [`MAX_CORES`].
pub fn parse_quota(s: &str) -> Result<f64, BoundError> {
    cores("--quota", s)
}

/// `--cgroup-quota`: as [`parse_quota`].
pub fn parse_cgroup_quota(s: &str) -> Result<f64, BoundError> {
    cores("--cgroup-quota", s)
}

fn scale(flag: &'static str, s: &str) -> Result<f64, BoundError> {
    let v = float(
        flag,
        s,
        "a positive number (1.0 is the live bot's timing, 0.1 ten times faster)",
    )?;
    at_most(flag, s, v, MAX_SCALE, "(times the live bot's timing)")
}

/// `--scale`: positive, finite, at most [`MAX_SCALE`].
pub fn parse_scale(s: &str) -> Result<f64, BoundError> {
    scale("--scale", s)
}

/// `--gate-scale`: as [`parse_scale`].
pub fn parse_gate_scale(s: &str) -> Result<f64, BoundError> {
    scale("--gate-scale", s)
}

/// `--inject-slowdown`: a factor of at least 1, at most [`MAX_SCALE`].
pub fn parse_slowdown(s: &str) -> Result<f64, BoundError> {
    const EXPECTED: &str = "a factor of at least 1, e.g. 1.5";
    let v = float("--inject-slowdown", s, EXPECTED)?;
    if v < 1.0 {
        return Err(BoundError::TooSmall {
            flag: "--inject-slowdown",
            text: s.trim().to_string(),
            expected: EXPECTED,
        });
    }
    at_most("--inject-slowdown", s, v, MAX_SCALE, "(times)")
}

/// A whole number ≥ 1 for `flag` (a leading minus is refused as too small).
pub(crate) fn count(
    flag: &'static str,
    s: &str,
    expected: &'static str,
) -> Result<u64, BoundError> {
    let text = s.trim().to_string();
    if text.starts_with('-') {
        return Err(BoundError::TooSmall {
            flag,
            text,
            expected,
        });
    }
    let n: u64 = text.parse().map_err(|_| BoundError::NotANumber {
        flag,
        text: text.clone(),
    })?;
    if n == 0 {
        return Err(BoundError::TooSmall {
            flag,
            text,
            expected,
        });
    }
    Ok(n)
}

/// `--cycles`: at least one cycle (and at most `u32::MAX`).
pub fn parse_cycles(s: &str) -> Result<u32, BoundError> {
    let n = count("--cycles", s, "at least 1 cycle")?;
    u32::try_from(n).map_err(|_| BoundError::TooLarge {
        flag: "--cycles",
        text: s.trim().to_string(),
        max: u32::MAX.to_string(),
        unit: "cycles",
    })
}

/// The most cycles `corpus generate` writes: 100,000 (a file of about
/// 700 MB; the shipped corpus has 333).
pub const MAX_CORPUS_CYCLES: u32 = 100_000;

/// `corpus generate --cycles`: at least 1, at most [`MAX_CORPUS_CYCLES`].
pub fn parse_corpus_cycles(s: &str) -> Result<u32, BoundError> {
    let n = parse_cycles(s)?;
    if n > MAX_CORPUS_CYCLES {
        return Err(BoundError::TooLarge {
            flag: "--cycles",
            text: s.trim().to_string(),
            max: MAX_CORPUS_CYCLES.to_string(),
            unit: "cycles (a corpus of about 700 MB)",
        });
    }
    Ok(n)
}

/// A window in milliseconds: at least 1, at most [`MAX_WINDOW_MS`] (a day).
pub fn parse_window_ms(s: &str) -> Result<u64, BoundError> {
    let n = count("window", s, "at least 1 ms")?;
    if n > MAX_WINDOW_MS {
        return Err(BoundError::TooLarge {
            flag: "window",
            text: s.trim().to_string(),
            max: MAX_WINDOW_MS.to_string(),
            unit: "ms (one day)",
        });
    }
    Ok(n)
}

/// An arrival interval in milliseconds (`--interval-ms`): at least 1, at
/// most [`MAX_WINDOW_MS`] (a day).
pub fn parse_interval_ms(s: &str) -> Result<u64, BoundError> {
    let n = count("--interval-ms", s, "at least 1 ms between cycles")?;
    if n > MAX_WINDOW_MS {
        return Err(BoundError::TooLarge {
            flag: "--interval-ms",
            text: s.trim().to_string(),
            max: MAX_WINDOW_MS.to_string(),
            unit: "ms (one day)",
        });
    }
    Ok(n)
}

/// The most seats a sim slot cap or intake floor may name in a config.
pub const MAX_SEATS: u32 = 65_536;

/// A config value (file or environment) outside its range, or a config
/// that does not load. Nothing runs when a config is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigFileError {
    /// The config file could not be read.
    #[error("cannot read config {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The config does not parse or fails the fleet's own checks.
    #[error("{origin}: {source}")]
    Load {
        /// `config FILE`, or `the DEGENBOT_* environment` without a file.
        origin: String,
        /// The fleet's typed error (names the key).
        #[source]
        source: fleet::config::ConfigError,
    },
    /// A value above the range the command line allows for the same figure.
    #[error("{origin}: {key} = {value} is invalid: at most {max} {unit}")]
    TooLarge {
        /// `config FILE`, or `environment variable NAME` when the
        /// environment set the value.
        origin: String,
        /// The key, `[table] name`.
        key: String,
        /// The value given.
        value: String,
        /// The largest value allowed.
        max: String,
        /// What the maximum counts.
        unit: &'static str,
    },
}

/// Checks a loaded config against the command line's ranges: windows and
/// intervals at most [`MAX_WINDOW_MS`] (their lower bounds are the fleet's
/// own checks), cores at most [`MAX_CORES`], seats at most [`MAX_SEATS`].
/// `origin(dotted_key)` names where a key's value came from.
///
/// Errors: [`ConfigFileError::TooLarge`] for the first key out of range.
pub fn check_config(
    cfg: &fleet::config::FleetConfig,
    origin: impl Fn(&str) -> String,
) -> Result<(), ConfigFileError> {
    let too_large = |table: &str, key: &str, value: String, max: String, unit| {
        Err(ConfigFileError::TooLarge {
            origin: origin(&format!("{table}.{key}")),
            key: format!("[{table}] {key}"),
            value,
            max,
            unit,
        })
    };
    let p = &cfg.posture;
    for (key, v) in [
        ("cordon_enter_window_ms", p.cordon_enter_window_ms),
        ("cordon_duty_window_ms", p.cordon_duty_window_ms),
        ("cordon_exit_clean_ms", p.cordon_exit_clean_ms),
    ] {
        if v > MAX_WINDOW_MS {
            return too_large(
                "posture",
                key,
                v.to_string(),
                MAX_WINDOW_MS.to_string(),
                "ms (one day)",
            );
        }
    }
    if let Some(f) = p.cordon_sim_intake_floor.filter(|&f| f > MAX_SEATS) {
        return too_large(
            "posture",
            "cordon_sim_intake_floor",
            f.to_string(),
            MAX_SEATS.to_string(),
            "seats",
        );
    }
    if cfg.pump.backstop_interval_ms > MAX_WINDOW_MS {
        return too_large(
            "pump",
            "backstop_interval_ms",
            cfg.pump.backstop_interval_ms.to_string(),
            MAX_WINDOW_MS.to_string(),
            "ms (one day)",
        );
    }
    for (key, v) in cfg.budget.set_keys() {
        let (max, unit) = if key == "sim_slot_cap" {
            (MAX_SEATS as f64, "seats")
        } else {
            (MAX_CORES, "cores")
        };
        if v as f64 > max {
            return too_large("budget", key, v.to_string(), max.to_string(), unit);
        }
    }
    Ok(())
}

/// Loads the fleet config from `path` (none: defaults) with the
/// `DEGENBOT_*` overrides in `env`, then checks it with [`check_config`].
/// Each error names the file or the environment variable, and the key.
pub fn load_config(
    path: Option<&std::path::Path>,
    env: Vec<(String, String)>,
) -> Result<fleet::config::FleetConfig, ConfigFileError> {
    let file = path.map(|p| p.display().to_string());
    let text = match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| ConfigFileError::Read {
            path: p.display().to_string(),
            reason: e.to_string(),
        })?,
        None => String::new(),
    };
    let from_file = file.as_ref().map_or_else(
        || "the DEGENBOT_* environment".to_string(),
        |f| format!("config {f}"),
    );
    let cfg = fleet::config::FleetConfig::load(&text, env.clone()).map_err(|source| {
        ConfigFileError::Load {
            origin: from_file.clone(),
            source,
        }
    })?;
    check_config(&cfg, |key| {
        let var = fleet::config::ENV_KEYS
            .iter()
            .find(|(_, sets)| sets.split_whitespace().next() == Some(key))
            .map(|(name, _)| *name);
        match var {
            Some(name) if env.iter().any(|(k, _)| k == name) => {
                format!("environment variable {name}")
            }
            _ => from_file.clone(),
        }
    })?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn config_values_share_the_command_line_ranges_and_name_key_and_origin() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fleet.toml");
        let shown = file.display().to_string();
        let cases = [
            (
                "[posture]\ncordon_enter_window_ms = 86400001\n",
                "[posture] cordon_enter_window_ms = 86400001 is invalid: at most 86400000 ms (one day)",
            ),
            (
                "[posture]\ncordon_exit_clean_ms = 99999999999\n",
                "[posture] cordon_exit_clean_ms = 99999999999",
            ),
            (
                "[pump]\nbackstop_interval_ms = 90000000\n",
                "[pump] backstop_interval_ms = 90000000",
            ),
            (
                "[budget]\nsolver_cpus = 5000\n",
                "[budget] solver_cpus = 5000 is invalid: at most 4096 cores",
            ),
            (
                "[budget]\nsim_slot_cap = 70000\n",
                "[budget] sim_slot_cap = 70000 is invalid: at most 65536 seats",
            ),
            (
                "[posture]\ncordon_sim_intake_floor = 70000\n",
                "[posture] cordon_sim_intake_floor = 70000",
            ),
        ];
        for (text, want) in cases {
            std::fs::write(&file, text).unwrap();
            let e = load_config(Some(&file), vec![]).unwrap_err();
            assert!(matches!(e, ConfigFileError::TooLarge { .. }), "{e:?}");
            let msg = e.to_string();
            assert!(msg.starts_with(&format!("config {shown}: ")), "{msg}");
            assert!(msg.contains(want), "{msg}");
        }
        std::fs::write(&file, "[posture]\ncordon_enter_window_ms = 86400000\n").unwrap();
        assert_eq!(
            load_config(Some(&file), vec![])
                .unwrap()
                .posture
                .cordon_enter_window_ms,
            MAX_WINDOW_MS
        );
    }

    #[test]
    fn an_environment_value_out_of_range_names_the_variable() {
        let e = load_config(
            None,
            env(&[("DEGENBOT_CORDON_DUTY_WINDOW_MS", "100000000000")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("environment variable DEGENBOT_CORDON_DUTY_WINDOW_MS: [posture] cordon_duty_window_ms = 100000000000"),
            "{e}"
        );
    }

    #[test]
    fn a_config_that_does_not_load_is_a_typed_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("fleet.toml");
        std::fs::write(&file, "[posture]\ncordon_enter_window_ms = 0\n").unwrap();
        let e = load_config(Some(&file), vec![]).unwrap_err();
        assert!(matches!(e, ConfigFileError::Load { .. }), "{e:?}");
        assert!(e.to_string().contains("cordon_enter_window_ms = 0"), "{e}");
        std::fs::write(&file, "[posture]\nno_such_key = 1\n").unwrap();
        let e = load_config(Some(&file), vec![]).unwrap_err().to_string();
        assert!(
            e.contains(&file.display().to_string()) && e.contains("no_such_key"),
            "{e}"
        );
        let missing = dir.path().join("absent.toml");
        let e = load_config(Some(&missing), vec![]).unwrap_err();
        assert!(matches!(e, ConfigFileError::Read { .. }), "{e:?}");
    }

    #[test]
    fn quota_bounds() {
        assert_eq!(parse_quota("6.5"), Ok(6.5));
        assert_eq!(parse_quota("4096"), Ok(4096.0));
        assert!(parse_quota("inf")
            .unwrap_err()
            .to_string()
            .contains("not finite"));
        assert!(parse_quota("1e9")
            .unwrap_err()
            .to_string()
            .contains("at most 4096"));
        assert!(parse_quota("-1")
            .unwrap_err()
            .to_string()
            .contains("positive"));
        assert!(parse_quota("x")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
    }

    #[test]
    fn counts_and_windows() {
        assert_eq!(parse_cycles("3"), Ok(3));
        assert!(parse_cycles("0")
            .unwrap_err()
            .to_string()
            .contains("at least 1"));
        assert!(parse_cycles("-2")
            .unwrap_err()
            .to_string()
            .contains("at least 1"));
        assert_eq!(parse_corpus_cycles("100000"), Ok(MAX_CORPUS_CYCLES));
        assert!(parse_corpus_cycles("100001")
            .unwrap_err()
            .to_string()
            .contains("at most 100000 cycles"));
        assert!(parse_corpus_cycles("0").is_err());
        assert_eq!(parse_window_ms("86400000"), Ok(MAX_WINDOW_MS));
        assert!(parse_window_ms("86400001").is_err());
    }
}
