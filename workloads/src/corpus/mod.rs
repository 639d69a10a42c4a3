//! The golden outcome corpus (`DESIGN.md` §5; format in `corpus/README.md`):
//! solve cycles over real pool states with the expected outcome of every
//! path, versioned, checksummed and deterministic from a seed.

mod error;
mod format;
mod generate;
mod poolfile;
pub mod rng;
mod verify;

use std::path::Path;

use fleet::PathOutcome;

pub use error::{CorpusError, Reason};
pub use generate::{generate, GenerateParams};
pub use poolfile::{read_pool_file, write_pool_file, PoolFile, PoolSource};
pub use verify::{CorpusStats, VerifyReport};

use crate::paths::Hop;
use crate::pools::{PoolSet, Swap};

/// The format version this build writes and reads.
pub const VERSION: u32 = 1;

/// The corpus header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusHeader {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// Generator seed.
    pub seed: u64,
    /// Number of cycles in the file.
    pub cycles: u32,
    /// Intended arrival interval between cycles at scale 1, µs.
    pub cycle_interval_us: u64,
    /// A path is `Solved` when its profit is strictly above this, wei.
    pub profit_threshold: u128,
    /// File name of the pool-state file the base pools came from (provenance).
    pub pool_source: String,
    /// sha256 (hex) of every line of the file except the checksum line.
    pub checksum: String,
}

/// A path's simulation: CPU on a simulation seat, then an I/O wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimCase {
    /// CPU time at scale 1, µs.
    pub cpu_us: u32,
    /// I/O wait at scale 1, µs.
    pub io_us: u32,
    /// The simulation reverts: the path's outcome is `Failed { SimReverted }`.
    pub reverts: bool,
}

/// One candidate path of a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathCase {
    /// Index of the path within its cycle (`paths[i].id == i`).
    pub id: u32,
    /// Hops from WETH back to WETH (2 or 3).
    pub hops: Vec<Hop>,
    /// The walk's CPU for this path at scale 1, µs.
    pub walk_cpu_us: u32,
    /// The simulation the walk waits on, if any.
    pub sim: Option<SimCase>,
    /// The golden outcome.
    pub expected: PathOutcome,
}

impl PathCase {
    /// LPT cost of the path, µs at scale 1: walk CPU plus, when it has one,
    /// its simulation's CPU and I/O (the time the path holds its bin at no
    /// contention).
    pub fn cost_us(&self) -> u64 {
        self.walk_cpu_us as u64 + self.sim.map_or(0, |s| s.cpu_us as u64 + s.io_us as u64)
    }
}

/// One solve cycle (one block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleCase {
    /// 0-based cycle number.
    pub index: u32,
    /// Resolve CPU at scale 1, µs.
    pub resolve_cpu_us: u32,
    /// Swaps applied to the pool set (in order) before this cycle is solved.
    pub swaps: Vec<Swap>,
    /// CPU of the pool-update unit that applies `swaps`, µs at scale 1.
    pub poolupd_cpu_us: u32,
    /// The candidate paths.
    pub paths: Vec<PathCase>,
    /// Exactly [`crate::lpt::BINS`] bins of path indices: the LPT partition
    /// of `paths` by [`PathCase::cost_us`].
    pub bins: Vec<Vec<u32>>,
}

/// A whole corpus: header, base pool states, cycles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corpus {
    /// The header.
    pub header: CorpusHeader,
    /// The pool states before cycle 0.
    pub pools: PoolSet,
    /// The cycles, in order.
    pub cycles: Vec<CycleCase>,
}

impl Corpus {
    /// Reads and checks a corpus file (structure, ranges, checksum).
    ///
    /// Errors: [`CorpusError::Io`] when unreadable; [`CorpusError::At`] with
    /// the line and the [`Reason`] (bad field, truncated, unknown version,
    /// checksum mismatch). Outcomes are not recomputed here: see
    /// [`Corpus::verify`].
    pub fn load(path: impl AsRef<Path>) -> Result<Corpus, CorpusError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Io {
            file: path.into(),
            source,
        })?;
        format::parse(&text, path)
    }

    /// Parses corpus text; `file` names it in errors.
    pub fn parse(text: &str, file: impl AsRef<Path>) -> Result<Corpus, CorpusError> {
        format::parse(text, file.as_ref())
    }

    /// The file text (with the checksum recomputed into the header).
    pub fn to_text(&self) -> String {
        format::write(self)
    }

    /// Writes the file atomically (a temporary next to it, then a rename).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), CorpusError> {
        let path = path.as_ref();
        let tmp = path.with_extension("tmp");
        let io = |source| CorpusError::Io {
            file: path.into(),
            source,
        };
        std::fs::write(&tmp, self.to_text()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Recomputes every expected outcome from the pools and swaps, checks the
    /// bins are the LPT partition, and returns counts and calibration figures.
    pub fn verify(&self) -> Result<VerifyReport, CorpusError> {
        verify::verify(self, Path::new("<corpus>"))
    }

    /// As [`Corpus::verify`], naming `file` in errors.
    pub fn verify_as(&self, file: impl AsRef<Path>) -> Result<VerifyReport, CorpusError> {
        verify::verify(self, file.as_ref())
    }

    /// Calibration figures of the corpus (see [`CorpusStats`]).
    pub fn stats(&self) -> CorpusStats {
        verify::stats(self)
    }
}
