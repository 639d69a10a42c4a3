//! When open verifications lapse, soonest first, so a tick expires them
//! without walking every target (`ROUTING.md` §3 Assignment policy, the
//! verification TTL).
//!
//! One entry per target, at the earliest expiry it is armed for, not one
//! per verification opened: verifications are opened at the lease rate
//! and live an hour by default, so an entry per verification held some
//! 3.6 million entries an hour at 1,000 a second however few were still
//! open (docs/router.md, "The small box").

use std::cmp::Ordering;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

/// One target's expiry: its target and when it lapses, seconds.
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

/// The earliest expiry of each target with a verification opened, soonest
/// on top.
///
/// A target is armed once, at the earliest expiry pushed for it; a later
/// one pushed while it is armed adds nothing. Whoever takes a target due
/// arms it again at the earliest expiry it still has open
/// ([`VerifyDue::push`]), so every open verification whose time has come
/// has its target due. An entry outlives its verification when that
/// closes first (a vote, a release): it is taken at its time and finds
/// nothing to expire. So the heap holds at most one live entry per target
/// (and a stale one only when a target was armed earlier than its entry,
/// which a shortened TTL does), and a tick pays O(log n) per target due
/// instead of a walk of every target.
#[derive(Debug, Default)]
pub(crate) struct VerifyDue {
    heap: BinaryHeap<Due>,
    /// The expiry each target in the heap is armed for.
    armed: HashMap<String, f64>,
}

impl VerifyDue {
    /// The expiries of the open verifications `(target, expiry)` (a
    /// restart: the snapshot holds them, the heap is rebuilt).
    pub(crate) fn from_open(open: impl IntoIterator<Item = (String, f64)>) -> Self {
        let mut due = VerifyDue::default();
        for (target, at_s) in open {
            due.push(&target, at_s);
        }
        due
    }

    /// A verification of `target` lapses at `at_s`: arms the target there
    /// unless it is armed at or before `at_s` already. A non-finite time
    /// is never due and is not held.
    pub(crate) fn push(&mut self, target: &str, at_s: f64) {
        if !at_s.is_finite() {
            return;
        }
        match self.armed.get_mut(target) {
            Some(armed) if *armed <= at_s => return,
            Some(armed) => *armed = at_s,
            None => {
                self.armed.insert(target.to_string(), at_s);
            }
        }
        self.heap.push(Due {
            at_s,
            target: target.to_string(),
        });
    }

    /// Takes every target due at `now_s` (armed at or before `now_s`), in
    /// name order, and disarms them: the caller arms each again at the
    /// earliest expiry it still has open. Entries left stale by an
    /// earlier arming are dropped on the way.
    pub(crate) fn take_due(&mut self, now_s: f64) -> BTreeSet<String> {
        let mut due = BTreeSet::new();
        while self.heap.peek().is_some_and(|d| d.at_s <= now_s) {
            let Some(d) = self.heap.pop() else { break };
            if self.armed.get(&d.target) == Some(&d.at_s) {
                self.armed.remove(&d.target);
                due.insert(d.target);
            }
        }
        if self.armed.is_empty() {
            self.armed.shrink_to(64);
            self.heap.shrink_to(64);
        }
        due
    }

    /// Entries held (stale ones included until their time).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
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
        assert_eq!(d.len(), 1, "b's stale entry at 5 went with it");
        assert!(d.take_due(8.999).is_empty());
        assert_eq!(d.take_due(9.0).into_iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn a_target_is_held_once_however_many_verifications_it_opens() {
        let mut d = VerifyDue::default();
        for i in 0..10_000 {
            d.push("t", 3600.0 + i as f64);
        }
        assert_eq!(d.len(), 1);
        assert_eq!(d.take_due(3600.0).into_iter().collect::<Vec<_>>(), ["t"]);
        // Taken and disarmed: the caller arms it at what is still open.
        d.push("t", 4000.0);
        assert!(d.take_due(3999.0).is_empty());
        assert_eq!(d.take_due(4000.0).into_iter().collect::<Vec<_>>(), ["t"]);
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn non_finite_expiries_are_not_held() {
        let mut d = VerifyDue::default();
        d.push("t", f64::NAN);
        d.push("u", f64::INFINITY);
        assert_eq!(d.len(), 0);
        assert!(d.take_due(f64::MAX).is_empty());
    }

    /// Against a model that holds every expiry pushed: whatever the order
    /// of pushes and takes, a target with an expiry due is taken at the
    /// first take at or after it, provided whoever takes it re-arms it at
    /// the expiries it has left.
    #[test]
    fn every_expiry_is_taken_on_time_against_a_full_model() {
        use proptest::prelude::*;
        let op = prop_oneof![
            (0u8..4, 0u32..50).prop_map(|(t, at)| (true, t, at)),
            (0u8..1, 0u32..50).prop_map(|(t, at)| (false, t, at)),
        ];
        proptest!(|(ops in proptest::collection::vec(op, 1..80))| {
            let mut d = VerifyDue::default();
            let mut open: Vec<(String, f64)> = Vec::new();
            let mut now = 0.0;
            for (push, t, at) in ops {
                if push {
                    let name = format!("t{t}");
                    let at_s = now + f64::from(at);
                    open.push((name.clone(), at_s));
                    d.push(&name, at_s);
                } else {
                    now += f64::from(at);
                    let taken = d.take_due(now);
                    let want: BTreeSet<String> =
                        open.iter().filter(|(_, a)| *a <= now).map(|(n, _)| n.clone()).collect();
                    prop_assert!(want.is_subset(&taken), "{want:?} not in {taken:?}");
                    open.retain(|(_, a)| *a > now);
                    for name in &taken {
                        for (n, a) in &open {
                            if n == name {
                                d.push(n, *a);
                            }
                        }
                    }
                }
                prop_assert!(d.armed.len() <= 4);
            }
        });
    }
}
