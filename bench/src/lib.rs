//! The lab library behind `fleet-lab`.
pub mod probe;
pub mod report;
pub mod cmd;
pub mod ops;
pub mod baseline;
pub mod lab;
pub mod gate;
