//! When open verifications lapse, soonest first, so a tick expires them
//! without walking every target (`ROUTING.md` §3 Assignment policy, the
//! verification TTL).

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap};

/// One open verification's expiry: its target and when it lapses, seconds.
#[derive(Debug, Clone)]
struct Due {
    at_s: f64,
    target: String,
}

impl Ord for Due {
    /// Reversed, so the max-heap's top is the soonest expiry.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at_s
            .total_cmp(&self.at_s)
            .then_with(|| other.target.cmp(&self.target))
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Due {}

/// The expiry of every verification opened, soonest on top.
///
/// An entry outlives its verification when that closes first (a vote, a
/// release): it is taken at its time and finds nothing to expire. So every
/// open verification whose time has come has an entry due, and a tick pays
/// O(log n) per verification opened since, instead of a walk of every
/// target.
#[derive(Debug, Default)]
pub(crate) struct VerifyDue(BinaryHeap<Due>);

impl VerifyDue {
    /// The expiries of the open verifications `(target, expiry)` (a
    /// restart: the snapshot holds them, the heap is rebuilt).
    pub(crate) fn from_open(open: impl IntoIterator<Item = (String, f64)>) -> Self {
        VerifyDue(
            open.into_iter()
                .map(|(target, at_s)| Due { at_s, target })
                .collect(),
        )
    }

    /// A verification of `target` opened, lapsing at `at_s`.
    pub(crate) fn push(&mut self, target: &str, at_s: f64) {
        self.0.push(Due {
            at_s,
            target: target.to_string(),
        });
    }

    /// Takes every entry due at `now_s` (expiry ≤ `now_s`): their targets,
    /// in name order.
    pub(crate) fn take_due(&mut self, now_s: f64) -> BTreeSet<String> {
        let mut due = BTreeSet::new();
        while self.0.peek().is_some_and(|d| d.at_s <= now_s) {
            if let Some(d) = self.0.pop() {
                due.insert(d.target);
            }
        }
        due
    }

    /// Entries held (closed verifications included until their time).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_due_in_time_order_and_each_target_once() {
        let mut d = VerifyDue::from_open([("b".to_string(), 5.0), ("a".to_string(), 9.0)]);
        d.push("c", 1.0);
        d.push("b", 2.0);
        assert!(d.take_due(0.5).is_empty());
        assert_eq!(d.take_due(5.0).into_iter().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(d.len(), 1);
        assert!(d.take_due(8.999).is_empty());
        assert_eq!(d.take_due(9.0).into_iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(d.len(), 0);
    }
}
