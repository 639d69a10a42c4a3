//! A fraction of the run, as a world file writes a time: a number or
//! `"a/b"`, kept exact.

use serde::{Deserialize, Deserializer, Serialize};

use super::{bad, PlanError};

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

    pub(super) fn check(self, key: &'static str) -> Result<f64, PlanError> {
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
