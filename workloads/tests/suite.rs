//! The integration tests of `fleet-workloads`, one binary: each module is one
//! former test file (its name is the first segment of every test name, so
//! `cargo nextest run -E 'test(/^MODULE::/)'` runs one of them). One binary
//! links the dependencies once instead of once per file.

mod corpus_file;
mod math_props;
mod optimal_input;
mod oracle_vectors;
mod replay_deadline;
