//! Workloads of the fleet lab (`DESIGN.md` §5): the golden outcome corpus
//! (format, generator, verifier) over real constant-product pool states, the
//! exact solver math every solver walk runs, and the calibrated CPU burn.
//!
//! - [`pools`]: pool states (`u128` reserves) and the swaps that move them.
//! - [`math`]: exact hop math and a cycle's optimal input.
//! - [`paths`]: WETH cycle discovery.
//! - [`lpt`]: LPT partition of a cycle's paths into the 6 solver bins.
//! - [`solve`]: a path's outcome on a pool snapshot.
//! - [`cpu`]: the CPU burn of a unit (thread CPU time, real arithmetic).
//! - [`simio`]: the simulated I/O timer every contender's sims wait on.
//! - [`corpus`]: the corpus data model, its text format, generator, verifier.
//! - [`replay`]: the driver that replays the corpus through a cycle host
//!   (the fleet or a baseline) and records what happened.

pub mod corpus;
pub mod cpu;
pub mod lpt;
pub mod math;
pub mod paths;
pub mod pools;
pub mod replay;
pub mod simio;
pub mod solve;

pub use corpus::{Corpus, CorpusError, CorpusHeader, CycleCase, PathCase, SimCase};
pub use paths::Hop;
pub use pools::{Pool, PoolSet, Swap};
pub use solve::solve_path;
