//! `fleet`: one bounded worker fleet for every execution resource of a
//! latency-critical bot.
//!
//! The model (roles, slot state machine, budget authority, quota detection,
//! plan, posture, census, status) and the lane interface (host pump, seat
//! sink, receipts, outcome ledger). This crate spawns no threads of its own;
//! the bindings in `fleet-bindings` map lanes to threads. See `DESIGN.md` §3.

#![warn(missing_docs)]

pub mod admission;
pub mod guard;
pub mod ledger;
pub mod outcome;
pub mod pump;
pub mod receipt;
pub mod role;
pub mod shell;
pub mod sink;
pub mod slot;
mod sync;
pub mod unit;
pub mod waker;

pub use guard::GuardSnapshot;
pub use outcome::{FailReason, PathOutcome};
pub use role::{CordonClass, Hosting, WorkerRole, ALL_ROLES};
pub mod budget;
pub mod census;
pub mod config;
pub mod plan;
pub mod posture;
pub mod quota;
pub mod status;
pub mod telemetry;
