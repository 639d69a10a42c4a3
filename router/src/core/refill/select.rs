//! The first `k` of a walk in a given order, in memory bounded by `k`
//! instead of by the walk: the refill keeps the longest overdue targets
//! and the least recently attempted filler candidates this way, so a
//! refill over 1,000,000 targets holds a few thousand entries, not a
//! million (docs/router.md, "The small box").

use std::cmp::Ordering;

/// The `k` smallest items pushed so far under `order`
/// ([`Smallest::into_sorted`]). Ties keep no particular one of the equal
/// items: give `order` a tie-break (the target's name) for a total order.
///
/// Holds at most `2k` items at a time: when the buffer fills, a
/// selection keeps its `k` smallest (linear), so a walk of `n` items
/// costs O(n) comparisons plus one sort of `k`.
pub(crate) struct Smallest<T, F> {
    k: usize,
    kept: Vec<T>,
    order: F,
}

impl<T, F: Fn(&T, &T) -> Ordering> Smallest<T, F> {
    /// Keeps the `k` smallest under `order`.
    pub(crate) fn new(k: usize, order: F) -> Self {
        Smallest {
            k,
            kept: Vec::new(),
            order,
        }
    }

    /// Offers one item.
    pub(crate) fn push(&mut self, item: T) {
        if self.k == 0 {
            return;
        }
        if self.kept.len() == 2 * self.k {
            self.keep_k();
        }
        self.kept.push(item);
    }

    fn keep_k(&mut self) {
        if self.kept.len() > self.k {
            self.kept.select_nth_unstable_by(self.k - 1, &self.order);
            self.kept.truncate(self.k);
        }
    }

    /// The `k` smallest offered (fewer when fewer were), sorted by `order`.
    pub(crate) fn into_sorted(mut self) -> Vec<T> {
        if self.k > 0 {
            self.keep_k();
        }
        self.kept.sort_by(&self.order);
        self.kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn smallest<T: Ord>(items: Vec<T>, k: usize) -> Vec<T> {
        let mut s = Smallest::new(k, T::cmp);
        for it in items {
            s.push(it);
        }
        s.into_sorted()
    }

    #[test]
    fn nothing_kept_for_k_zero_and_all_for_k_past_the_end() {
        assert!(smallest(vec![3, 1, 2], 0).is_empty());
        assert_eq!(smallest(vec![3, 1, 2], 10), [1, 2, 3]);
        assert_eq!(smallest(Vec::<u8>::new(), 3), Vec::<u8>::new());
    }

    proptest! {
        /// Whatever the input and `k`, the result is the sorted input's
        /// first `k`.
        #[test]
        fn the_first_k_of_the_sorted_walk(
            items in proptest::collection::vec((0u8..20, 0u16..1000), 0..300),
            k in 0usize..40,
        ) {
            let mut sorted = items.clone();
            sorted.sort();
            sorted.truncate(k);
            prop_assert_eq!(smallest(items, k), sorted);
        }
    }
}
