//! The lab's run harness: one function runs a contender (the fleet under a
//! profile, or a baseline it replaces) over a corpus and measures it the same
//! way every time — latency (end − intended start), threads, CPU, perf
//! counters, real throttling — into a [`RunReport`](crate::report::RunReport).
//!
//! `DESIGN.md` §6.

mod build;
pub mod contend;
pub mod cotenant;
mod cycle_stats;
pub mod feeder;
pub mod floor;
mod hooks;
pub mod inject;
mod probes;
mod release;
pub mod requota;
mod session;
mod spec;
mod stages;

pub use build::RunArtifacts;
pub use cotenant::{CoTenantMode, Lateness};
pub use inject::Injection;
pub use session::run;
pub use spec::{Contender, LabError, QuotaShrink, RunSpec};
