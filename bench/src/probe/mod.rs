//! Measurement probes of the lab: threads, perf counters, real cgroups,
//! other processes' load on the host, the host's state.

pub mod cgroup;
pub mod haltpoll;
pub mod heap;
pub mod hostload;
pub mod hoststate;
pub mod perf;
pub mod rss;
pub mod threads;
