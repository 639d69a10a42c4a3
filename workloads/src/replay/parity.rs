//! Parity: the produced outcomes against the corpus's golden ones, in
//! path order; the first difference (a differing outcome, a missing row or
//! an extra one) is the report's `first_mismatch`.

use fleet::PathOutcome;

use super::record::{Mismatch, OutcomeRow};
use crate::corpus::{Corpus, CycleCase};

/// The first difference between one cycle's produced outcomes and its
/// golden ones, in path order (a missing or extra row is a difference).
pub fn compare_cycle(case: &CycleCase, produced: &[OutcomeRow]) -> Option<Mismatch> {
    let mut expected: Vec<(u32, PathOutcome)> =
        case.paths.iter().map(|p| (p.id, p.expected)).collect();
    expected.sort_by_key(|(p, _)| *p);
    let mut got: Vec<&OutcomeRow> = produced.iter().collect();
    got.sort_by_key(|r| (r.cycle, r.path));
    let rows: Vec<OutcomeRow> = expected
        .iter()
        .map(|&(path, outcome)| OutcomeRow {
            cycle: case.index,
            path,
            outcome,
        })
        .collect();
    first_difference(rows.iter(), got.into_iter())
}

/// Compares produced outcomes with the golden ones of the first `n` cycles.
pub fn compare(corpus: &Corpus, n: usize, produced: &[OutcomeRow]) -> (bool, Option<Mismatch>) {
    let mut expected: Vec<OutcomeRow> = corpus
        .cycles
        .iter()
        .take(n)
        .flat_map(|c| {
            c.paths.iter().map(move |p| OutcomeRow {
                cycle: c.index,
                path: p.id,
                outcome: p.expected,
            })
        })
        .collect();
    expected.sort_by_key(|r| (r.cycle, r.path));
    let mut got: Vec<&OutcomeRow> = produced.iter().collect();
    got.sort_by_key(|r| (r.cycle, r.path));
    let first = first_difference(expected.iter(), got.into_iter());
    (first.is_none(), first)
}

/// The first difference between two row sequences, each sorted by
/// (cycle, path): a differing outcome, a missing row or an extra one.
fn first_difference<'a>(
    expected: impl Iterator<Item = &'a OutcomeRow>,
    got: impl Iterator<Item = &'a OutcomeRow>,
) -> Option<Mismatch> {
    let mut e = expected.peekable();
    let mut g = got.peekable();
    loop {
        let key = |r: &OutcomeRow| (r.cycle, r.path);
        match (e.peek(), g.peek()) {
            (None, None) => return None,
            (Some(x), Some(r)) if key(x) == key(r) => {
                if x.outcome != r.outcome {
                    return Some(Mismatch {
                        cycle: x.cycle,
                        path: x.path,
                        expected: Some(x.outcome),
                        got: Some(r.outcome),
                    });
                }
                e.next();
                g.next();
            }
            (Some(x), Some(r)) if key(x) < key(r) => {
                return Some(Mismatch {
                    cycle: x.cycle,
                    path: x.path,
                    expected: Some(x.outcome),
                    got: None,
                })
            }
            (Some(_), Some(r)) | (None, Some(r)) => {
                return Some(Mismatch {
                    cycle: r.cycle,
                    path: r.path,
                    expected: None,
                    got: Some(r.outcome),
                })
            }
            (Some(x), None) => {
                return Some(Mismatch {
                    cycle: x.cycle,
                    path: x.path,
                    expected: Some(x.outcome),
                    got: None,
                })
            }
        }
    }
}
