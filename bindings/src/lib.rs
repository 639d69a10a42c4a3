//! `fleet-bindings`: the two bindings of the fleet's lane interface.
//!
//! - `pinned`: one dedicated OS thread per seat, named by role, with an
//!   ambient Tokio I/O runtime and optional core pinning.
//! - `serial`: one named cycle thread per host running every granted unit in
//!   grant order on a current-thread Tokio runtime.
//!
//! Both produce the identical outcome corpus for the same input
//! (`DESIGN.md` §4; seed 000 §13).
//!
//! The modules, in the order a reader meets them (each uses only those
//! above it):
//!
//! - [`affinity`]: the process's CPU mask and whether seats are pinned;
//! - [`mod@checkpoint`]: where a long CPU unit yields its serial thread;
//! - [`handle`]: the handle callers submit units through, and its errors;
//! - `exec`: what every seat does with a granted unit (run, catch, settle);
//! - `options`: what boot takes and how it fails (re-exported by [`mod@boot`]);
//! - `lend`: the serial tier's reserve lent at the idle class, and its guard;
//! - [`running`]: a running fleet, its census and its shutdown;
//! - `host`: the pump thread, handle and lane both bindings start alike;
//! - [`pinned`] and [`serial`]: the two bindings' seat threads and sinks;
//! - [`mod@boot`]: a plan in, a running fleet of the plan's binding out.

#![warn(missing_docs)]

pub mod affinity;
pub mod boot;
pub mod checkpoint;
mod exec;
pub mod handle;
mod host;
mod lend;
mod options;
pub mod pinned;
pub mod running;
pub mod serial;

pub use crate::running::{Fleet, LentReserve, ShutdownError, ShutdownReport, PUMP_THREAD_NAME};
pub use affinity::{AffinityError, AffinityMask, PinCores, PinDecision, PinReason};
pub use boot::{boot, BootError, BootOptions, PinPlan};
pub use checkpoint::{checkpoint, CHECKPOINT_SLICE};
pub use handle::{unit_body, within, Backlog, FleetHandle, SeatCtx, SubmitError, UnitBody};
