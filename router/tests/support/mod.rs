//! Shared test support for the router's integration tests.
#![allow(dead_code)]

pub mod core;
pub mod in_process;
pub mod pg;
pub mod routerd;
