//! The integration tests of `routing`, one binary: each module is one
//! former test file (its name is the first segment of every test name, so
//! `cargo nextest run -E 'test(/^MODULE::/)'` runs one of them). One binary
//! links the dependencies once instead of once per file.

mod dense;
mod drift;
mod dynamics_field;
mod field;
mod field_scales;
mod golden;
mod journal;
mod mechanisms;
mod participant;
mod policy;
mod policy_relations;
mod trust_extra;
