//! Operator events: written as JSON lines and counted on `/metrics`.
//! Source: `ROUTING.md` §4 (events), issue-level contract of `routerd`.

use serde::{Deserialize, Serialize};

/// One event, tagged by `event`, with the router-clock time `t_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A disagreement cluster of one adapter version on one source was
    /// confirmed as an adapter bug; the trust it moved was restored.
    AdapterDisagreement {
        /// Time, seconds.
        t_s: f64,
        /// Source.
        source: String,
        /// Adapter id.
        adapter: String,
        /// Adapter version.
        version: String,
        /// Devices whose trust was restored.
        restored: usize,
    },
    /// A regime change was confirmed by a drift detector.
    DriftConfirmed {
        /// Time, seconds.
        t_s: f64,
        /// The binding cell, `source/binding`.
        cell: String,
        /// Archetype.
        option: String,
        /// Dimension.
        dimension: String,
        /// Fast estimate.
        fast: f64,
        /// Slow estimate (before the rebase).
        slow: f64,
    },
    /// A row was settled.
    VerificationSettled {
        /// Time, seconds.
        t_s: f64,
        /// Target.
        target: String,
        /// `trusted` or `quorum`.
        by: String,
    },
    /// Open verifications expired unanswered.
    VerificationExpired {
        /// Time, seconds.
        t_s: f64,
        /// Target.
        target: String,
        /// How many expired.
        count: usize,
    },
    /// A pool's price changed at a tick.
    PriceChanged {
        /// Time, seconds.
        t_s: f64,
        /// Pool.
        pool: String,
        /// Price before.
        from: f64,
        /// Price after.
        to: f64,
        /// Usage in the window.
        usage: f64,
    },
    /// A target's content churned too often and cools down for 24 h.
    ChurnCooldown {
        /// Time, seconds.
        t_s: f64,
        /// Target.
        target: String,
    },
    /// A device changed trust state.
    DeviceState {
        /// Time, seconds.
        t_s: f64,
        /// Device id.
        device: String,
        /// New state.
        state: String,
    },
}

/// What a device id reads as where the field is shown to anyone
/// ([`Event::without_identities`]).
pub const WITHHELD: &str = "(withheld)";

impl Event {
    /// The event as `GET /v1/field` shows it to anyone: every device
    /// identity replaced by [`WITHHELD`] (the event log and the operator
    /// keep them; docs/router.md "Threat model").
    pub fn without_identities(&self) -> Event {
        match self {
            Event::DeviceState { t_s, state, .. } => Event::DeviceState {
                t_s: *t_s,
                device: WITHHELD.into(),
                state: state.clone(),
            },
            other => other.clone(),
        }
    }

    /// The event's kind name (its `event` tag).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::AdapterDisagreement { .. } => "adapter_disagreement",
            Event::DriftConfirmed { .. } => "drift_confirmed",
            Event::VerificationSettled { .. } => "verification_settled",
            Event::VerificationExpired { .. } => "verification_expired",
            Event::PriceChanged { .. } => "price_changed",
            Event::ChurnCooldown { .. } => "churn_cooldown",
            Event::DeviceState { .. } => "device_state",
        }
    }
}
