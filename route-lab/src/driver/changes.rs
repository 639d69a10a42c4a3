//! Figures of the timed source changes (`[[events.source_change]]`): what
//! each change shut and opened, and the attempts on its source per
//! archetype in the hour before, the first hour after and the whole time
//! the change held. Source: docs/routing-lab.md ("Worlds as files").

use crate::report::ChangeFigures;
use crate::world::{World, ARCHETYPES};

/// One change's running figures and the index of its source.
#[derive(Debug, Clone)]
pub(super) struct ChangeCount {
    source: usize,
    figures: ChangeFigures,
}

/// The figures of every change of `world`, counts at zero: the archetypes
/// whose success on the source went from above 0 to 0 (shut) or back
/// (opened) at the change, and how long it held.
pub(super) fn change_counts(world: &World) -> Vec<ChangeCount> {
    let end = world.spec.end_s();
    world
        .changes
        .iter()
        .map(|e| {
            let next = world
                .changes
                .iter()
                .filter(|o| o.source == e.source && o.from_s > e.from_s)
                .map(|o| o.from_s)
                .fold(end, f64::min);
            let p = |a: usize, t: f64| world.p_success(e.source, a, t);
            let before = e.from_s - 1e-6;
            let names = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
                (0..ARCHETYPES.len())
                    .filter(|&a| keep(a))
                    .map(|a| ARCHETYPES[a].to_string())
                    .collect()
            };
            ChangeCount {
                source: e.source,
                figures: ChangeFigures {
                    source: e.truth.name.clone(),
                    at_s: e.from_s,
                    held_s: (next - e.from_s).max(0.0),
                    shut: names(&|a| p(a, before) > 0.0 && p(a, e.from_s) == 0.0),
                    opened: names(&|a| p(a, before) == 0.0 && p(a, e.from_s) > 0.0),
                    ..ChangeFigures::default()
                },
            }
        })
        .collect()
}

/// Counts an attempt by archetype `a` on source `s` at `t` against every
/// change of that source it falls around.
pub(super) fn count_attempt(counts: &mut [ChangeCount], s: usize, a: usize, t: f64) {
    for c in counts.iter_mut().filter(|c| c.source == s) {
        let f = &mut c.figures;
        if (f.at_s - 3600.0..f.at_s).contains(&t) {
            f.hour_before[a] += 1;
        }
        if (f.at_s..f.at_s + f.held_s).contains(&t) {
            f.after[a] += 1;
            if t < f.at_s + 3600.0 {
                f.first_hour_after[a] += 1;
            }
        }
    }
}

/// Adds one attempt's regret parts, `(failures, cost)`, on source `s` at
/// `t` to every change of that source then holding.
pub(super) fn count_regret(counts: &mut [ChangeCount], s: usize, t: f64, (f, c): (f64, f64)) {
    for ch in counts.iter_mut().filter(|ch| ch.source == s) {
        let fig = &mut ch.figures;
        if (fig.at_s..fig.at_s + fig.held_s).contains(&t) {
            fig.regret_after.failures += f;
            fig.regret_after.cost += c;
        }
    }
}

/// The finished figures.
pub(super) fn finish(counts: Vec<ChangeCount>) -> Vec<ChangeFigures> {
    counts.into_iter().map(|c| c.figures).collect()
}
