//! The integration tests of `fleet`, one binary: each module is one
//! former test file (its name is the first segment of every test name, so
//! `cargo nextest run -E 'test(/^MODULE::/)'` runs one of them). One binary
//! links the dependencies once instead of once per file.

mod pump_support;

mod budget_plan;
mod config_status;
mod conformance;
mod crawl_registration;
mod live_cgroup;
mod posture;
mod pump_explore;
mod pump_rules;
mod pump_schedules;
mod pump_shell;
mod pump_shell_model;
mod quota_fixtures;
mod reserve_lending;
mod shell_direct;
mod slot_table;
mod telemetry_record;
