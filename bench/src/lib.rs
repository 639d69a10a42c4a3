//! The lab library behind `fleet-lab`.
pub mod baseline;
pub mod cmd;
pub mod compare_gate;
pub mod compare_paired;
pub mod compare_rounds;
pub mod gate;
pub mod lab;
pub mod ops;
pub mod paired;
pub mod probe;
pub mod report;
