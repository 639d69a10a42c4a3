//! The integration tests of `fleet-bindings`, one binary: each module is one
//! former test file (its name is the first segment of every test name, so
//! `cargo nextest run -E 'test(/^MODULE::/)'` runs one of them). One binary
//! links the dependencies once instead of once per file.

mod common;

mod backlog;
mod census;
mod cooperative;
mod deadline;
mod lane_death;
mod lent_reserve;
mod parity;
mod pinning;
mod scheduling;
mod seat_lost;
mod shutdown;
mod stranded;
