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
    pub(super) fn admit(&mut self, t: f64) -> bool {
        self.tokens = (self.tokens + self.rate * (t - self.last).max(0.0)).min(self.capacity);
        self.last = self.last.max(t);
        if self.tokens >= 1.0 - 1e-9 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
