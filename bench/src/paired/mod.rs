//! Paired, interleaved measurement: the timed gates' method.
//!
//! A timed figure on a shared host moves with the host (its idle states,
//! its neighbours, its page cache), so no absolute limit on it can both
//! pass unchanged code on every host and catch a real slowdown. A paired
//! gate instead runs the candidate build and a reference build in
//! alternating blocks on the same corpus slice, cores and co-tenant work,
//! and judges the pairs' ratios by an exact sign test: the host's mood
//! falls on both sides of every ratio.
//!
//! - [`block`]: one block's figures and the line protocol of
//!   `fleet-lab blocks`, the server both builds run;
//! - [`server`]: a block server as a child process;
//! - [`schedule`]: the balanced (ABBA) order of the blocks;
//! - [`sign`]: the exact one-sided sign test.
//!
//! `docs/gates.md` ("The paired gates") has the calibration: false alarms
//! of the same build against itself and the power against injected
//! slowdowns, quiet and with a busy neighbour.

pub mod block;
pub mod schedule;
pub mod server;
pub mod sign;

use serde::Serialize;

pub use block::BlockFigures;
pub use schedule::{pair_order, Arm};
pub use server::{BlockServer, ServerError};
pub use sign::{SignTest, SignVerdict};

/// One measured pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    /// Which arm ran first.
    pub first: Arm,
    /// The candidate's block.
    pub candidate: BlockFigures,
    /// The reference's block.
    pub reference: BlockFigures,
}

impl Pair {
    /// Candidate ÷ reference mean makespan.
    pub fn ratio(&self) -> f64 {
        self.candidate.makespan_mean_ms / self.reference.makespan_mean_ms
    }
}

/// Runs `warmup` unmeasured blocks on each server, then `pairs` pairs in
/// the balanced order; `on_pair` sees each pair as it completes (for the
/// live table).
pub fn measure(
    candidate: &mut BlockServer,
    reference: &mut BlockServer,
    warmup: u32,
    pairs: u32,
    mut on_pair: impl FnMut(u32, &Pair),
) -> Result<Vec<Pair>, ServerError> {
    for _ in 0..warmup {
        candidate.block()?;
        reference.block()?;
    }
    let mut out = Vec::with_capacity(pairs as usize);
    for i in 0..pairs {
        let order = pair_order(i);
        let (mut c, mut r) = (None, None);
        for arm in order {
            match arm {
                Arm::Candidate => c = Some(candidate.block()?),
                Arm::Reference => r = Some(reference.block()?),
            }
        }
        let pair = Pair {
            first: order[0],
            candidate: c.expect("each pair runs the candidate"),
            reference: r.expect("each pair runs the reference"),
        };
        on_pair(i, &pair);
        out.push(pair);
    }
    Ok(out)
}
