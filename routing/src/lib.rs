//! The router's pure model: no I/O, no clock (time is always an argument), no threads.
//!
//! Modules follow the design brief `ROUTING.md` §3:
//! - [`field`]: the addressed evidence field and `decide`;
//! - [`dynamics`]: clock aging and the drift detector;
//! - [`prices`]: metered pools and their price tick;
//! - [`politeness`]: per-host token buckets;
//! - [`trust`]: pairwise trust updates and trust states.

pub mod dynamics;
pub mod field;
pub mod politeness;
pub mod prices;
pub mod trust;
