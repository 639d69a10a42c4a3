//! Measurement probes of the lab: threads, perf counters, real cgroups.

pub mod cgroup;
pub mod perf;
pub mod threads;
