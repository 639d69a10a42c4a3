//! The outcome of one path of a solve cycle.
//!
//! Every path of a cycle gets exactly one [`PathOutcome`]; the merge's
//! outcome ledger checks it (`DESIGN.md` §3 "Outcome ledger"). Amounts are
//! integer token units (wei for WETH) and travel as decimal strings in JSON
//! so no consumer parses them through a float.

use serde::{Deserialize, Serialize};

/// Why a path failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailReason {
    /// The path's simulation reverted (a property of the corpus, never of timing).
    SimReverted,
    /// The lane that owed this path died mid-flight (a panic in a unit, a lost
    /// seat thread); delivered by the lane's witness so the ledger stays exact.
    LaneDeath,
    /// The path's simulation could not be submitted (a full queue or a closed host).
    SimRefused,
    /// A wait on a receipt this path needed passed its deadline (a hung
    /// unit): the path is failed now, exactly once; the unit's late value
    /// is dropped. Counted in `degenbot_fleet_receipt_overruns_total`.
    Overrun,
}

/// The one outcome of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PathOutcome {
    /// Profitable above the threshold: the chosen input and its exact profit
    /// (both in the cycle's start token units).
    Solved {
        /// The optimal input amount.
        #[serde(with = "u128_string")]
        amount_in: u128,
        /// The exact profit of that input.
        #[serde(with = "u128_string")]
        profit: u128,
    },
    /// Not profitable enough; nothing to submit.
    Suppressed,
    /// The path failed, with the reason.
    Failed {
        /// Why it failed.
        reason: FailReason,
    },
}

impl PathOutcome {
    /// `solved`, `suppressed` or `failed`.
    pub const fn kind(&self) -> &'static str {
        match self {
            PathOutcome::Solved { .. } => "solved",
            PathOutcome::Suppressed => "suppressed",
            PathOutcome::Failed { .. } => "failed",
        }
    }
}

/// Serde helper: a `u128` as a decimal string.
pub mod u128_string {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the value as a decimal string.
    pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    /// Reads a decimal string (never a float).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_round_trip_through_json_exactly() {
        let cases = [
            PathOutcome::Solved {
                amount_in: (1u128 << 112) - 1,
                profit: 12345,
            },
            PathOutcome::Suppressed,
            PathOutcome::Failed {
                reason: FailReason::LaneDeath,
            },
        ];
        for o in cases {
            let j = serde_json::to_string(&o).unwrap();
            assert_eq!(serde_json::from_str::<PathOutcome>(&j).unwrap(), o, "{j}");
        }
        let j = serde_json::to_string(&cases[0]).unwrap();
        assert!(j.contains("\"5192296858534827628530496329220095\""), "{j}");
    }
}
