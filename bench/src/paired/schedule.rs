//! The order a paired measurement runs its blocks in.
//!
//! Pairs alternate which arm goes first — candidate, reference, reference,
//! candidate, … (an ABBA design) — so a drift of the host over the job
//! (a page cache warming, a neighbour starting) falls on both arms alike
//! and cancels in the pairs' ratios instead of favouring whichever arm
//! always ran second.

use serde::Serialize;

/// One side of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// The build under test.
    Candidate,
    /// The build it is measured against.
    Reference,
}

/// The order of the two blocks of pair `i` (0-based): the candidate first
/// in even pairs, the reference first in odd ones.
pub fn pair_order(i: u32) -> [Arm; 2] {
    if i % 2 == 0 {
        [Arm::Candidate, Arm::Reference]
    } else {
        [Arm::Reference, Arm::Candidate]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_abba_and_balanced_in_every_even_prefix() {
        let seq: Vec<Arm> = (0..4).flat_map(pair_order).collect();
        use Arm::*;
        assert_eq!(
            seq,
            [
                Candidate, Reference, Reference, Candidate, Candidate, Reference, Reference,
                Candidate
            ]
        );
        for pairs in (2..=40).step_by(2) {
            let firsts = (0..pairs)
                .filter(|&i| pair_order(i)[0] == Candidate)
                .count();
            assert_eq!(firsts * 2, pairs as usize, "{pairs} pairs");
        }
    }

    #[test]
    fn every_pair_runs_each_arm_once() {
        for i in 0..100 {
            let [a, b] = pair_order(i);
            assert_ne!(a, b);
        }
    }
}
