//! One module per `fleet-lab` verb. Each exposes a clap `Args` struct and a
//! `run` function returning `anyhow::Result<()>`; the binary maps an error
//! to a plain message and a non-zero exit.

pub mod compare;
pub mod corpus;
pub mod gate;
pub mod parity;
pub mod plan;
pub mod posture;
pub mod report;
pub mod run;
