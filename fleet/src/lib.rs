//! `fleet`: one bounded worker fleet for every execution resource of a
//! latency-critical bot.
//!
//! The model (roles, slot state machine, budget authority, quota detection,
//! plan, posture, census, status) and the lane interface (host pump, seat
//! sink, receipts, outcome ledger). This crate spawns no threads of its own;
//! the bindings in `fleet-bindings` map lanes to threads. See `DESIGN.md` §3.
//!
//! The modules, in the order a reader meets them:
//!
//! - [`role`], [`mod@unit`], [`outcome`]: the worker roles, a unit's identity and
//!   key, a path's outcome;
//! - [`slot`]: a seat's state machine (the transition table);
//! - [`guard`], [`admission`]: the posture's snapshot and the admission
//!   predicate it feeds;
//! - [`receipt`], [`ledger`]: a unit's answer, and the exactness ledger
//!   every path's outcome drains through;
//! - [`pump`]: the host pump, the pure state machine over every input;
//! - [`sink`], [`shell`], [`waker`]: how grants reach seats, the thread
//!   that drives the pump, posture edges to every host;
//! - [`quota`], [`budget`], [`plan`], [`config`]: the CPU quota detected,
//!   the budget over it, the plan a binding boots, its file;
//! - [`posture`]: Nominal/Cordoned from throttling and lane deaths;
//! - [`census`], [`status`], [`telemetry`]: what runs, as data and metrics.

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
