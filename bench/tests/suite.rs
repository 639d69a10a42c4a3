//! The integration tests of `fleet-bench`, one binary: each module is one
//! former test file (its name is the first segment of every test name, so
//! `cargo nextest run -E 'test(/^MODULE::/)'` runs one of them). One binary
//! links the dependencies once instead of once per file.

mod common;

mod cotenant_cli;
mod metrics_scrape;
mod operator_channel;
mod plan_cli;
mod profiler;
mod report_hdr;
mod report_html;
mod report_model;
mod report_summary;
mod report_write;
#[cfg(feature = "routing-lab")]
mod route_box_plot;
#[cfg(feature = "routing-lab")]
mod route_cli;
mod run_cli;
mod run_overruns;
mod run_requota;
mod run_stream;
mod spans_replay;
