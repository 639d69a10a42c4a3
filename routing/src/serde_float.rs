//! Serde for an `f64` that may be non-finite: JSON has no ∞ or NaN, so
//! those travel as the strings `"inf"`, `"-inf"` and `"NaN"`; finite values
//! stay numbers. Use as `#[serde(with = "routing::serde_float")]`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr {
    Number(f64),
    Text(String),
}

/// Serializes `v`: a number when finite, else `"inf"`, `"-inf"` or `"NaN"`.
pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else if v.is_nan() {
        s.serialize_str("NaN")
    } else if *v > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

/// Deserializes a number or one of `"inf"`, `"-inf"`, `"NaN"`; any other
/// string is an error.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Repr::deserialize(d)? {
        Repr::Number(v) => Ok(v),
        Repr::Text(t) => match t.as_str() {
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "NaN" => Ok(f64::NAN),
            other => Err(serde::de::Error::custom(format!(
                "expected a number, \"inf\", \"-inf\" or \"NaN\", got {other:?}"
            ))),
        },
    }
}
