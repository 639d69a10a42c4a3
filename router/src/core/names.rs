//! Names held once: the device ids, adapter ids and adapter versions that
//! every observation of every target repeats. A target keeps up to
//! [`super::state::KEEP_OBSERVATIONS`] observations, each naming its
//! device, adapter and version; held as strings of their own they cost
//! about 90 bytes an observation over the shared names (docs/router.md,
//! "The small box"). Each distinct name is held once here and shared by
//! pointer.
//!
//! Not durable: a restart reads each observation's names as its own and
//! shares them again as observations are next made. A name nothing else
//! holds any more is dropped by [`Names::prune`] (the router prunes at
//! each snapshot), so names a device sends once, or a forgotten device's
//! id, are not kept.

use std::collections::HashSet;
use std::sync::Arc;

/// The shared names ([`Names::intern`]).
#[derive(Debug, Default)]
pub struct Names {
    set: HashSet<Arc<str>>,
    /// Lists of names (a device's declared capabilities), shared whole.
    lists: HashSet<Arc<[String]>>,
}

impl Names {
    /// The one shared copy of `name`: the held one, or a new one held
    /// from here on.
    pub fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(held) = self.set.get(name) {
            return held.clone();
        }
        let held: Arc<str> = Arc::from(name);
        self.set.insert(held.clone());
        held
    }

    /// The one shared copy of the list `names`, as [`Names::intern`].
    pub fn intern_list(&mut self, names: &[String]) -> Arc<[String]> {
        if let Some(held) = self.lists.get(names) {
            return held.clone();
        }
        let held: Arc<[String]> = Arc::from(names);
        self.lists.insert(held.clone());
        held
    }

    /// Drops every name and list held only here; returns how many were
    /// dropped.
    pub fn prune(&mut self) -> usize {
        let before = self.set.len() + self.lists.len();
        self.set.retain(|n| Arc::strong_count(n) > 1);
        if self.set.capacity() > 2 * self.set.len().max(16) {
            self.set.shrink_to_fit();
        }
        self.lists.retain(|n| Arc::strong_count(n) > 1);
        if self.lists.capacity() > 2 * self.lists.len().max(16) {
            self.lists.shrink_to_fit();
        }
        before - self.set.len() - self.lists.len()
    }

    /// Names held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no name is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_held_once_and_shared() {
        let mut n = Names::default();
        let a = n.intern("dev-1");
        let b = n.intern(&String::from("dev-1"));
        assert!(Arc::ptr_eq(&a, &b), "one allocation for both");
        assert_eq!(&*a, "dev-1");
        let c = n.intern("dev-2");
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(n.len(), 2);
    }

    #[test]
    fn a_list_is_held_once_and_shared_and_pruned_like_a_name() {
        let mut n = Names::default();
        let caps = vec!["needs_js".to_string(), "residential".to_string()];
        let a = n.intern_list(&caps);
        let b = n.intern_list(&caps.clone());
        assert!(Arc::ptr_eq(&a, &b), "one allocation for both");
        assert_eq!(&a[..], &caps[..]);
        let other = n.intern_list(&caps[..1]);
        assert!(!Arc::ptr_eq(&a, &other));
        drop(other);
        assert_eq!(n.prune(), 1, "the list no one else holds");
        assert!(Arc::ptr_eq(&n.intern_list(&caps), &a), "the held one kept");
    }

    #[test]
    fn prune_drops_exactly_the_names_no_one_else_holds() {
        let mut n = Names::default();
        let kept = n.intern("kept");
        drop(n.intern("dropped"));
        let copies: Vec<Arc<str>> = (0..3).map(|_| n.intern("shared")).collect();
        assert_eq!(n.prune(), 1);
        assert_eq!(n.len(), 2);
        // What is still held is still shared: a new intern finds it.
        assert!(Arc::ptr_eq(&kept, &n.intern("kept")));
        assert!(Arc::ptr_eq(&copies[0], &n.intern("shared")));
        drop((kept, copies));
        assert_eq!(n.prune(), 2);
        assert!(n.is_empty());
    }

    #[test]
    fn a_dropped_name_interned_again_is_held_again() {
        let mut n = Names::default();
        drop(n.intern("x"));
        n.prune();
        let again = n.intern("x");
        assert_eq!((&*again, n.len()), ("x", 1));
    }
}
