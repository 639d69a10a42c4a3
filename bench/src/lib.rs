//! The lab library behind `fleet-lab`.
pub mod probe;
pub mod report;
pub mod cmd;
