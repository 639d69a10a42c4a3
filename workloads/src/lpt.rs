//! LPT (longest processing time first) partition of a cycle's paths into the
//! solver bins: one solver unit per bin (`DESIGN.md` §3 "Solver (one keyed pin
//! per LPT bin)", §5).

/// Number of solver bins per cycle.
pub const BINS: usize = 6;

/// Partitions items with the given costs (any unit, e.g. µs) into `bins` bins.
///
/// Items are taken in descending cost, ties by ascending index; each goes to
/// the bin with the smallest load so far, ties to the lowest bin number. Each
/// returned bin lists its item indices in ascending order. Deterministic.
/// Panics when `bins == 0`.
pub fn partition(costs: &[u64], bins: usize) -> Vec<Vec<u32>> {
    assert!(bins > 0, "LPT needs at least one bin");
    let mut order: Vec<u32> = (0..costs.len() as u32).collect();
    order.sort_by(|&a, &b| costs[b as usize].cmp(&costs[a as usize]).then(a.cmp(&b)));
    let mut load = vec![0u64; bins];
    let mut out = vec![Vec::new(); bins];
    for i in order {
        let (b, _) = load
            .iter()
            .enumerate()
            .min_by(|x, y| x.1.cmp(y.1).then(x.0.cmp(&y.0)))
            .unwrap();
        load[b] += costs[i as usize];
        out[b].push(i);
    }
    for b in &mut out {
        b.sort_unstable();
    }
    out
}

/// The load (sum of costs) of each bin of a partition.
pub fn loads(costs: &[u64], bins: &[Vec<u32>]) -> Vec<u64> {
    bins.iter()
        .map(|b| b.iter().map(|&i| costs[i as usize]).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_example_and_tie_breaks() {
        // Costs 7,6,5,4,3,3 into 2 bins: 7→b0, 6→b1, 5→b1(6<7), 4→b0(7<11),
        // 3 (idx4)→b0? loads b0=11,b1=11 tie → b0; 3 (idx5) → b1.
        let bins = partition(&[7, 6, 5, 4, 3, 3], 2);
        assert_eq!(bins, vec![vec![0, 3, 4], vec![1, 2, 5]]);
        assert_eq!(loads(&[7, 6, 5, 4, 3, 3], &bins), vec![14, 14]);
    }

    #[test]
    fn every_item_lands_once_and_empty_bins_are_kept() {
        let bins = partition(&[1, 1], BINS);
        assert_eq!(bins.len(), BINS);
        assert_eq!(bins.iter().map(Vec::len).sum::<usize>(), 2);
        assert_eq!(bins[0], vec![0]);
        assert_eq!(bins[1], vec![1]);
    }

    #[test]
    fn lpt_bound_holds() {
        // LPT makespan ≤ (4/3 − 1/(3m))·OPT ≤ 4/3·max(mean load, max item).
        let costs: Vec<u64> = (0..100u64).map(|i| 1000 + (i * 7919) % 3000).collect();
        let bins = partition(&costs, BINS);
        let l = loads(&costs, &bins);
        let lower = (costs.iter().sum::<u64>() / BINS as u64).max(*costs.iter().max().unwrap());
        assert!(
            *l.iter().max().unwrap() * 3 <= lower * 4,
            "{l:?} lower {lower}"
        );
    }
}
