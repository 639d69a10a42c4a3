//! One module per `fleet-lab` verb. Each exposes a clap `Args` struct and a
//! `run` function returning `anyhow::Result<()>`; the binary maps an error
//! to a plain message and a non-zero exit.

pub mod corpus;
pub mod plan;
pub mod report;
pub mod posture;
pub mod run;
pub mod parity;
pub mod gate;
pub mod compare;
