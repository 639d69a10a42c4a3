//! The lab library behind `fleet-lab`: it runs the fleet and the designs it
//! replaces over the golden corpus, measures them alike, reports and gates
//! them (`DESIGN.md` §6).
//!
//! The modules, in the order a reader meets them:
//!
//! - [`probe`]: what the lab measures beside a run (cgroups, perf counters,
//!   threads, memory, the host's state);
//! - [`baseline`]: the designs the fleet replaces, as cycle hosts;
//! - [`lab`]: one measured run of a contender;
//! - [`report`]: the run report, its table, logs, page and plots;
//! - [`paired`]: paired blocks of a candidate and a reference, and the
//!   sign test that judges them;
//! - [`gate`], [`compare_gate`], [`budgets`]: the profiles' budgets, the
//!   comparison's, and the file that holds both;
//! - [`compare_rounds`], [`compare_paired`], [`compare_sims`]: the
//!   comparison over rounds, paired with a reference build, and each
//!   contender's bound on sims at once;
//! - [`ops`]: the operator endpoints (metrics, posture retunes);
//! - [`cmd`]: the `fleet-lab` commands.
pub mod baseline;
pub mod budgets;
pub mod cmd;
pub mod compare_floor;
pub mod compare_gate;
pub mod compare_paired;
pub mod compare_rounds;
pub mod compare_sims;
pub mod gate;
pub mod lab;
pub mod ops;
pub mod paired;
pub mod probe;
pub mod report;
