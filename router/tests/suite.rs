//! The integration tests of `router`, one binary: each module is one
//! former test file (its name is the first segment of every test name, so
//! `cargo nextest run -E 'test(/^MODULE::/)'` runs one of them). One binary
//! links the dependencies once instead of once per file.

mod support;

mod data_dir;
mod device_rows;
mod faults;
mod held_polls;
mod hostile;
mod http;
mod identities;
mod lease_restart;
mod load_devices;
mod operator_reads;
mod pg_connection;
mod registrar;
mod replicas;
mod reports;
mod retention;
#[path = "core.rs"]
mod router_core;
mod snapshots;
mod stop_signal;
mod store_suite;
mod tick;
mod verification;
