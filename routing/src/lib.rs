//! The router's pure model: no I/O, no clock (time is always an argument), no threads.
//!
//! Modules follow the design brief `ROUTING.md` §3, in the order a reader
//! meets them (each uses only those above it):
//! - [`serde_float`]: how non-finite numbers cross JSON;
//! - [`field`]: the addressed evidence field, its aging, and `decide`;
//! - [`dynamics`]: the drift detector (and the aging rule, re-exported);
//! - [`prices`]: metered pools and their price tick;
//! - [`politeness`]: per-host token buckets;
//! - [`trust`]: pairwise trust updates, states, churn, clustering, fleet cap;
//! - [`verify`]: verification bookkeeping (quorum, cap, TTL);
//! - [`policy`]: the lease decision (tiers, feasibility, politeness, batches);
//! - [`participant`]: the device-side fold of a lease with local facts.

#![warn(missing_docs)]

pub mod dynamics;
pub mod field;
pub mod participant;
pub mod policy;
pub mod politeness;
pub mod prices;
pub mod serde_float;
pub mod trust;
pub mod verify;
