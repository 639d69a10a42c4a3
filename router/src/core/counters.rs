//! The counters `/metrics` exports.

use std::collections::BTreeMap;

/// Counters exported on `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Counters {
    /// Registrations accepted.
    pub registrations: u64,
    /// Leases granted (including empty ones).
    pub leases: u64,
    /// Items granted.
    pub items: u64,
    /// Deposits folded (acknowledged).
    pub deposits: u64,
    /// Deposits folded again at restart.
    pub replayed: u64,
    /// Retried deposits answered again with their acknowledgement (the
    /// first answer was lost).
    pub deposits_answered_again: u64,
    /// Protests (preflight releases).
    pub protests: u64,
    /// Leases expired with undeposited items.
    pub leases_expired: u64,
    /// Outstanding leases restored from the store when the router opened.
    pub leases_restored: u64,
    /// Refused requests per error kind.
    pub refused: BTreeMap<String, u64>,
    /// Events per kind.
    pub events: BTreeMap<String, u64>,
    /// Ticks run.
    pub ticks: u64,
    /// Agreements between related identities that moved no trust
    /// (one credential from one network or one registration burst).
    pub related_agreements: u64,
    /// Devices forgotten after their retention (decision: docs/router.md).
    pub devices_departed: u64,
    /// Logged deposits pruned after their retention.
    pub deposits_pruned: u64,
    /// Candidates passed over for politeness.
    pub politeness_passes: u64,
    /// Leases whose batch a capped pool's remaining window budget cut
    /// (to fewer items than the device asked for, or none).
    pub budget_held: u64,
    /// Ticks whose field was aged in place under the lock because the
    /// aged clone could not take the writes made meanwhile (its journal
    /// overflowed); see `core/aging.rs`.
    pub aging_in_place: u64,
    /// Bytes of the last snapshot row written (0 before the first).
    pub snapshot_bytes: u64,
}
