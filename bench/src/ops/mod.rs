//! Live-run operations: the metrics exporter and scrape endpoint, the
//! posture operator channel, and the small loopback HTTP pieces they share.
//!
//! Entry points for a run: [`metrics::install`] (with `--metrics-addr`) and
//! [`operator::serve`] (with `--operator-addr`); both stop on drop.

pub mod http;
pub mod metrics;
pub mod operator;
pub mod serve;
