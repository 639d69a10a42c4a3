//! One block of a paired measurement and the line protocol that carries it.
//!
//! A block is one boot of the contender, a replay of the first
//! `--cycles` cycles of the corpus, and a shutdown: the unit a paired gate
//! alternates between the candidate and the reference. `fleet-lab blocks`
//! serves blocks over stdin and stdout, one JSON object per line:
//!
//! ```text
//! → (server starts)         ← {"protocol":1,"ready":"<label>"}
//! → block                   ← {"protocol":1,"block":{…BlockFigures…}}
//! → block                   ← {"protocol":1,"block":{…}}
//! → (stdin closed)          (server exits 0)
//! ```
//!
//! A failed block answers `{"protocol":1,"error":"…"}` and the server
//! exits non-zero. The protocol is versioned because the reference is the
//! `fleet-lab` of another commit: a server of another version is refused
//! by name, never misread.

use serde::{Deserialize, Serialize};

use crate::report::RunReport;

/// The protocol version this build speaks.
pub const PROTOCOL: u32 = 1;

/// What one block measured (times in ms, shares in `[0, 1]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockFigures {
    /// The run's label (contender and profile).
    pub label: String,
    /// Cycles replayed.
    pub cycles: u64,
    /// Mean cycle makespan (end − intended start), ms: the timed figure
    /// the paired gates compare.
    pub makespan_mean_ms: f64,
    /// Median cycle makespan, ms.
    pub makespan_p50_ms: f64,
    /// Largest cycle makespan, ms.
    pub makespan_max_ms: f64,
    /// Mean of makespan over the cycle's lower bound (for people: the old
    /// absolute figure, which moves with the host).
    pub over_lower_bound_mean: f64,
    /// Whether every outcome equalled the golden one.
    pub parity: bool,
    /// Whether the late-cycle backlog kept growing to the end.
    pub saturated: bool,
    /// OS threads created while the block ran.
    pub threads_created: u64,
    /// Values above a histogram's range.
    pub histograms_out_of_range: u64,
    /// Throttled time over wall time, where a cgroup was read.
    pub throttled_share: Option<f64>,
    /// Whether the throttle figure came from a cgroup the lab made for
    /// the block (one with a quota that can throttle).
    pub throttle_in_lab_cgroup: bool,
    /// The co-tenant probe's p99 lateness, µs, where it ran.
    pub cotenant_p99_us: Option<f64>,
    /// CPU seconds the process used in the block.
    pub cpu_seconds: f64,
    /// Wall seconds of the block.
    pub wall_seconds: f64,
}

impl BlockFigures {
    /// The figures of one run's report; `in_lab_cgroup` says whether the
    /// run was inside a cgroup the lab made with a quota.
    pub fn from_report(r: &RunReport, in_lab_cgroup: bool) -> Self {
        BlockFigures {
            label: r.label.clone(),
            cycles: r.cycles,
            makespan_mean_ms: r.makespan_ms.mean,
            makespan_p50_ms: r.makespan_ms.p50,
            makespan_max_ms: r.makespan_ms.max,
            over_lower_bound_mean: r.makespan_over_lower_bound.mean,
            parity: r.parity,
            saturated: r.saturation.is_some(),
            threads_created: r.threads.created_during_run,
            histograms_out_of_range: r.histograms_out_of_range,
            throttled_share: r.throttle.as_ref().map(|t| t.throttled_share),
            throttle_in_lab_cgroup: in_lab_cgroup && r.throttle.is_some(),
            cotenant_p99_us: r.cotenant_lateness_us.map(|l| l.p99),
            cpu_seconds: r.cpu_seconds,
            wall_seconds: r.wall_seconds,
        }
    }
}

/// One line a block server writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerLine {
    /// The protocol version of the server.
    pub protocol: u32,
    /// Present once, first: the server is ready; the contender's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// A block's figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockFigures>,
    /// Why the server stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ServerLine {
    /// The ready line.
    pub fn ready(label: &str) -> Self {
        ServerLine {
            protocol: PROTOCOL,
            ready: Some(label.to_string()),
            block: None,
            error: None,
        }
    }

    /// A block's line.
    pub fn block(b: BlockFigures) -> Self {
        ServerLine {
            protocol: PROTOCOL,
            ready: None,
            block: Some(b),
            error: None,
        }
    }

    /// An error line.
    pub fn error(e: &str) -> Self {
        ServerLine {
            protocol: PROTOCOL,
            ready: None,
            block: None,
            error: Some(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_keep_to_one_line() {
        let b = BlockFigures {
            label: "fleet auto".into(),
            cycles: 12,
            makespan_mean_ms: 66.5,
            makespan_p50_ms: 66.0,
            makespan_max_ms: 80.0,
            over_lower_bound_mean: 1.2,
            parity: true,
            saturated: false,
            threads_created: 0,
            histograms_out_of_range: 0,
            throttled_share: Some(0.0),
            throttle_in_lab_cgroup: true,
            cotenant_p99_us: Some(300.0),
            cpu_seconds: 1.0,
            wall_seconds: 1.3,
        };
        for line in [
            ServerLine::ready("fleet auto"),
            ServerLine::block(b),
            ServerLine::error("no corpus\nat all"),
        ] {
            let text = serde_json::to_string(&line).unwrap();
            assert!(!text.contains('\n'), "{text}");
            assert_eq!(serde_json::from_str::<ServerLine>(&text).unwrap(), line);
        }
    }
}
