//! Bounds of the numeric command-line arguments, checked while parsing so
//! a value out of range is refused with one plain sentence before anything
//! starts. Negative numbers reach these parsers as values (the arguments
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

fn count(flag: &'static str, s: &str, expected: &'static str) -> Result<u64, BoundError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(parse_window_ms("86400000"), Ok(MAX_WINDOW_MS));
        assert!(parse_window_ms("86400001").is_err());
    }
}
