//! Value tiers and the soft trust preference between them, as a table.
//! Source: `ROUTING.md` §3 Assignment policy, step 2.

use serde::{Deserialize, Serialize};

/// The kind of work a candidate target offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Tier {
    /// First observation of a never-observed target (low τ breaks new ground).
    FirstObservation,
    /// A verification vote on an unsettled row (high τ certifies).
    Verification,
    /// Re-observation of a settled row (avoid low τ).
    Reobservation,
    /// A listing crawl that mints targets (mid/high τ).
    Discovery,
    /// Occupancy filler: least recently observed targets, granted only when
    /// nothing above is admissible and the value exceeds the priced cost.
    Filler,
}

impl Tier {
    /// Every tier, in declaration order.
    pub const ALL: [Tier; 5] = [
        Tier::FirstObservation,
        Tier::Verification,
        Tier::Reobservation,
        Tier::Discovery,
        Tier::Filler,
    ];

    /// Whether the tier is low-value: admitted only when its value exceeds
    /// its priced cost (`ROUTING.md` §3 Prices).
    pub fn low_value(self) -> bool {
        matches!(self, Tier::Reobservation | Tier::Filler)
    }

    fn index(self) -> usize {
        match self {
            Tier::FirstObservation => 0,
            Tier::Verification => 1,
            Tier::Reobservation => 2,
            Tier::Discovery => 3,
            Tier::Filler => 4,
        }
    }
}

/// A device's trust band as the policy treats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Band {
    /// Treated as limited (τ < τ_lo and inside the fleet-level cap).
    Low,
    /// Neither limited nor trusted.
    Mid,
    /// Trusted: τ ≥ τ_hi.
    High,
}

impl Band {
    /// Every band.
    pub const ALL: [Band; 3] = [Band::Low, Band::Mid, Band::High];

    /// The band of a device with trust `tau` that the fleet cap does (`limited`)
    /// or does not let the policy treat as limited. Non-finite τ counts as 0.5.
    pub fn of(tau: f64, limited: bool, tau_hi: f64) -> Band {
        let tau = if tau.is_finite() { tau } else { 0.5 };
        if tau >= tau_hi {
            Band::High
        } else if limited {
            Band::Low
        } else {
            Band::Mid
        }
    }

    fn index(self) -> usize {
        match self {
            Band::Low => 0,
            Band::Mid => 1,
            Band::High => 2,
        }
    }
}

/// Preference rank (lower is drawn first) of each tier per band; rows are
/// bands (Low, Mid, High), columns tiers in [`Tier::ALL`] order. Soft: a
/// rank orders the draw, nobody is cut off. Filler is always last (it is
/// only considered when nothing above was admissible).
pub const PREFERENCE: [[u8; 5]; 3] = [
    // first, verify, re-observe, discover, filler
    [0, 1, 3, 2, 4], // Low: break new ground; vote in a quorum; avoid overwriting settled rows
    [3, 0, 2, 1, 4], // Mid: vote; discover; re-observe; new ground is left to low trust
    [3, 0, 1, 2, 4], // High: certify; re-observe settled rows; new ground last
];

/// The preference rank of `tier` for a device in `band` (see [`PREFERENCE`]).
pub fn preference(band: Band, tier: Tier) -> u8 {
    PREFERENCE[band.index()][tier.index()]
}
