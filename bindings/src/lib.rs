//! `fleet-bindings`: the two bindings of the fleet's lane interface.
//!
//! - `pinned`: one dedicated OS thread per seat, named by role, with an
//!   ambient Tokio I/O runtime and optional core pinning.
//! - `serial`: one named cycle thread per host running every granted unit in
//!   grant order on a current-thread Tokio runtime.
//!
//! Both produce the identical outcome corpus for the same input
//! (`DESIGN.md` §4; seed 000 §13).

#![warn(missing_docs)]

pub mod affinity;
pub mod boot;
pub mod checkpoint;
mod exec;
pub mod handle;
pub mod pinned;
pub mod running;
pub mod serial;

pub use crate::running::{Fleet, LentReserve, ShutdownError, ShutdownReport, PUMP_THREAD_NAME};
pub use affinity::{AffinityError, AffinityMask, PinCores, PinDecision, PinReason};
pub use boot::{boot, BootError, BootOptions, PinPlan};
pub use checkpoint::{checkpoint, CHECKPOINT_SLICE};
pub use handle::{unit_body, within, Backlog, FleetHandle, SeatCtx, SubmitError, UnitBody};
