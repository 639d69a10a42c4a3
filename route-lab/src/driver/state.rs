//! What the driver keeps per device (its online spell, the lease in its
//! hands, the item it executes) and per host (the host's true politeness
//! limit, kept apart from the router's buckets to count violations).

use router::api::LeaseItem;
use routing::field::Receipt;
use routing::participant::Participant;

use crate::world::Attempt;

/// The item a device is executing.
#[derive(Debug, Clone)]
pub(super) struct Running {
    pub(super) target: usize,
    pub(super) attempt: Attempt,
}

/// A lease in a device's hands.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub(super) id: String,
    pub(super) items: Vec<LeaseItem>,
    pub(super) receipts: Vec<Receipt>,
    pub(super) next: usize,
    pub(super) running: Option<Running>,
}

#[derive(Debug, Clone)]
pub(super) struct DevState {
    pub(super) online: bool,
    pub(super) epoch: u64,
    pub(super) secret: Option<String>,
    pub(super) version: &'static str,
    pub(super) participant: Participant,
    pub(super) held: Option<Held>,
    pub(super) attempts: u64,
    pub(super) deposits: u64,
    pub(super) idle_since: Option<f64>,
    /// The earliest instant work may have become admissible for this
    /// device after its last empty answer: the next refill tick or the
    /// router's politeness hint, whichever is first.
    pub(super) admissible_from: Option<f64>,
    /// While the router holds this device's long poll: when the poll's
    /// wait runs out (its later tries are the router's, not the device's).
    pub(super) poll_until: Option<f64>,
    /// When the device last came online (meaningful while online).
    pub(super) online_since: f64,
    pub(super) busy_until: f64,
}

/// A host's true politeness limit, kept independently of the router's buckets.
#[derive(Debug, Clone)]
pub(super) struct Shadow {
    pub(super) capacity: f64,
    pub(super) rate: f64,
    pub(super) tokens: f64,
    pub(super) last: f64,
}

impl Shadow {
    /// The host's true limit as it is at `t` (a timed change may have
    /// moved it): tokens refilled at the old rate up to `t`, then kept up
    /// to the new capacity.
    pub(super) fn retune(&mut self, (capacity, rate): (f64, f64), t: f64) {
        if (capacity, rate) == (self.capacity, self.rate) {
            return;
        }
        self.refill(t);
        self.capacity = capacity;
        self.rate = rate;
        self.tokens = self.tokens.min(capacity);
    }

    fn refill(&mut self, t: f64) {
        self.tokens = (self.tokens + self.rate * (t - self.last).max(0.0)).min(self.capacity);
        self.last = self.last.max(t);
    }

    pub(super) fn admit(&mut self, t: f64) -> bool {
        self.refill(t);
        if self.tokens >= 1.0 - 1e-9 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Shadow;

    #[test]
    fn a_shadow_bucket_follows_a_host_whose_limit_changes() {
        let mut b = Shadow {
            capacity: 5.0,
            rate: 2.0,
            tokens: 5.0,
            last: 0.0,
        };
        assert!((0..5).all(|_| b.admit(0.0)));
        assert!(!b.admit(0.0));
        // At t = 1 the host starts a 20 s crawl delay: the second of
        // refill at the old rate is kept, up to the new capacity of one.
        b.retune((1.0, 1.0 / 20.0), 1.0);
        assert!(b.admit(1.0));
        assert!(!b.admit(2.0));
        assert!(!b.admit(20.0));
        assert!(b.admit(21.0));
        // The same limit again changes nothing.
        b.retune((1.0, 1.0 / 20.0), 30.0);
        assert_eq!((b.tokens, b.last), (0.0, 21.0));
    }
}
