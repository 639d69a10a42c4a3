//! The posture-edge feeder: nudges every registered host when the posture
//! changes.
//!
//! Posture is a live guard, never mirrored in a host; a host only needs a
//! nudge to re-read it. The feeder site (whoever owns posture changes) calls
//! [`PostureWaker::observe`] with each fresh guard read, or
//! [`PostureWaker::notify`] directly on a change; every registered host gets
//! a sequence-stamped `PostureEdge`. Edges are hints: a lost one costs at
//! most one backstop interval (seed 003 decisions 2 and 4). No thread here.

use crate::guard::GuardSnapshot;
use crate::shell::HostHandle;
use parking_lot::Mutex;
use std::sync::Arc;

/// A registered host's nudge: called with the edge sequence number.
pub type EdgeFn = Arc<dyn Fn(u64) + Send + Sync>;

/// The registration token (pass it to [`PostureWaker::unregister`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Registration(u64);

#[derive(Default)]
struct Inner {
    next_id: u64,
    hosts: Vec<(u64, EdgeFn)>,
    seq: u64,
    last: Option<GuardSnapshot>,
}

/// The registry of hosts to nudge.
#[derive(Default)]
pub struct PostureWaker {
    inner: Mutex<Inner>,
}

impl PostureWaker {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a nudge.
    pub fn register(&self, edge: EdgeFn) -> Registration {
        let mut inner = self.inner.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner.hosts.push((id, edge));
        Registration(id)
    }

    /// Registers a host shell through its handle.
    pub fn register_host<P: Send + 'static>(&self, handle: &HostHandle<P>) -> Registration {
        let handle = handle.clone();
        self.register(Arc::new(move |seq| handle.posture_edge(seq)))
    }

    /// Removes a registration (a no-op if already removed).
    pub fn unregister(&self, registration: Registration) {
        self.inner
            .lock()
            .hosts
            .retain(|(id, _)| *id != registration.0);
    }

    /// How many hosts are registered.
    pub fn len(&self) -> usize {
        self.inner.lock().hosts.len()
    }

    /// Whether no host is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sends `PostureEdge { seq }` to every registered host (outside the lock).
    pub fn notify(&self, seq: u64) {
        let hosts: Vec<EdgeFn> = self
            .inner
            .lock()
            .hosts
            .iter()
            .map(|(_, f)| f.clone())
            .collect();
        for f in hosts {
            f(seq);
        }
    }

    /// Feeds a fresh guard read: on a change from the previous read (or the
    /// first read), stamps the next sequence number and notifies every host.
    /// Returns the sequence number sent, if any.
    pub fn observe(&self, guard: GuardSnapshot) -> Option<u64> {
        let seq = {
            let mut inner = self.inner.lock();
            if inner.last == Some(guard) {
                return None;
            }
            inner.last = Some(guard);
            inner.seq += 1;
            inner.seq
        };
        self.notify(seq);
        Some(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn notifies_every_registered_host_on_a_change_only() {
        let waker = PostureWaker::new();
        let seen = Arc::new(AtomicU64::new(0));
        let (a, b) = (seen.clone(), seen.clone());
        let ra = waker.register(Arc::new(move |s| {
            a.fetch_add(s, Ordering::SeqCst);
        }));
        waker.register(Arc::new(move |s| {
            b.fetch_add(s * 100, Ordering::SeqCst);
        }));
        assert_eq!(waker.observe(GuardSnapshot::nominal(4)), Some(1));
        assert_eq!(waker.observe(GuardSnapshot::nominal(4)), None);
        assert_eq!(seen.load(Ordering::SeqCst), 101);
        waker.unregister(ra);
        let cordoned = GuardSnapshot {
            cordoned: true,
            sim_intake_cap: 2,
            lane_dead: false,
        };
        assert_eq!(waker.observe(cordoned), Some(2));
        assert_eq!(seen.load(Ordering::SeqCst), 301);
        assert_eq!(waker.len(), 1);
    }
}
