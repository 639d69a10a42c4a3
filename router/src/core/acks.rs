//! Deposit acknowledgements, remembered so that a deposit retried after its
//! answer was lost gets the same answer (docs/router.md "Threat model",
//! faults that lose nothing): idempotent by the deposit token, even after
//! the lease finished and was dropped.
//!
//! A retry is the same deposit when the device, the lease, the target, the
//! token and the whole logged request agree (a digest of it is kept);
//! anything else under a used token is refused as before (`replayed`
//! while the lease is held, `unknown_lease` once it is gone). Each answer is kept
//! for [`ACK_MEMORY_S`] and at most [`ACKS_MAX`] are held (the oldest go
//! first). Time is an argument, as everywhere in the core.

use std::collections::VecDeque;

use hashbrown::HashTable;

use sha2::{Digest, Sha256};

use crate::api::{DepositRequest, DepositResponse};

/// The digest [`DepositKey::request`] compares: of the request as logged,
/// its device secret cleared.
pub fn request_digest(req: &DepositRequest) -> String {
    let mut cleared = req.clone();
    cleared.device_secret.clear();
    crate::ids::digest(&serde_json::to_string(&cleared).unwrap_or_default())
}

/// Seconds an acknowledgement is remembered.
pub const ACK_MEMORY_S: f64 = 3600.0;

/// Most acknowledgements held at once.
pub const ACKS_MAX: usize = 262_144;

/// A deposit token as held: the first 16 bytes of its SHA-256. Tokens are
/// the router's own random strings, so two never share a prefix by
/// accident, and no device can choose one to collide.
type TokenKey = [u8; 16];

/// One acknowledgement: its token, what identifies the deposit, its
/// answer and when it was given. The deposit's identity is the first 16
/// bytes of one SHA-256 over the device, the lease, the target and the
/// request's digest (matching another deposit's by chance is a 2^-128
/// event, and by design costs a search of about 2^64 hashes to get
/// nothing but the other's answer), so an acknowledgement holds 64 bytes
/// however long its strings are (the router holds up to [`ACKS_MAX`] of
/// them: docs/router.md, "The small box").
#[derive(Debug, Clone, PartialEq)]
struct Ack {
    token: TokenKey,
    identity: [u8; 16],
    response: DepositResponse,
    at_s: f64,
}

/// The remembered acknowledgements: one queue in the order they were
/// given, and an index from token to place in it of one `u64` per entry.
/// A map of tokens to acknowledgements beside a queue of tokens held each
/// twice and cost about 200 bytes an acknowledgement with their spare
/// room (massif: a quarter of what each later deposit added).
#[derive(Debug, Default)]
pub struct Acks {
    /// Oldest first; an entry whose token was acknowledged again later
    /// stays until its turn, unindexed.
    order: VecDeque<Ack>,
    /// How many entries have left the queue's front: entry `p` of the
    /// index is `order[p - popped]`.
    popped: u64,
    index: HashTable<u64>,
}

/// A token's hash for the index: its first 8 bytes (a SHA-256 prefix of
/// the router's own random token, so already uniform).
fn token_hash(t: &TokenKey) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&t[..8]);
    u64::from_le_bytes(b)
}

/// One deposit as [`Acks`] compares it.
#[derive(Debug, Clone, Copy)]
pub struct DepositKey<'a> {
    /// The depositing device.
    pub device: &'a str,
    /// Its lease.
    pub lease_id: &'a str,
    /// The item's target.
    pub target: &'a str,
    /// The item's deposit token.
    pub token: &'a str,
    /// Digest of the logged request.
    pub request: &'a str,
}

impl DepositKey<'_> {
    fn token_key(&self) -> TokenKey {
        let d = Sha256::digest(self.token.as_bytes());
        let mut k = [0u8; 16];
        k.copy_from_slice(&d[..16]);
        k
    }

    /// The first 16 bytes of a SHA-256 over the four parts, each preceded
    /// by its length, so no two different tuples hash the same input.
    fn identity(&self) -> [u8; 16] {
        let mut h = Sha256::new();
        for part in [self.device, self.lease_id, self.target, self.request] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        let d = h.finalize();
        let mut k = [0u8; 16];
        k.copy_from_slice(&d[..16]);
        k
    }
}

impl Acks {
    /// Remembers `response` as the answer to `key` at `now_s`, dropping what
    /// is older than [`ACK_MEMORY_S`] or beyond [`ACKS_MAX`].
    pub fn remember(&mut self, key: DepositKey<'_>, response: &DepositResponse, now_s: f64) {
        self.forget_before(now_s - ACK_MEMORY_S);
        while self.order.len() >= ACKS_MAX {
            self.pop_front();
        }
        let token = key.token_key();
        let hash = token_hash(&token);
        // The same token acknowledged again: the newer answer is the one
        // indexed.
        if let Ok(e) = self.index.find_entry(hash, |&p| {
            self.order[(p - self.popped) as usize].token == token
        }) {
            e.remove();
        }
        let place = self.popped + self.order.len() as u64;
        self.order.push_back(Ack {
            token,
            identity: key.identity(),
            response: response.clone(),
            at_s: now_s,
        });
        let (order, popped) = (&self.order, self.popped);
        self.index.insert_unique(hash, place, |&p| {
            token_hash(&order[(p - popped) as usize].token)
        });
    }

    /// The answer already given to this very deposit, if it is remembered.
    pub fn answer(&self, key: DepositKey<'_>) -> Option<&DepositResponse> {
        let token = key.token_key();
        let p = self.index.find(token_hash(&token), |&p| {
            self.order[(p - self.popped) as usize].token == token
        })?;
        let ack = &self.order[(p - self.popped) as usize];
        (ack.identity == key.identity()).then_some(&ack.response)
    }

    /// Drops every acknowledgement made before `t_s`.
    pub fn forget_before(&mut self, t_s: f64) {
        while self.order.front().is_some_and(|a| a.at_s < t_s) {
            self.pop_front();
        }
    }

    /// Drops the oldest entry and its index entry, if it still has one.
    fn pop_front(&mut self) {
        let Some(ack) = self.order.pop_front() else {
            return;
        };
        let place = self.popped;
        self.popped += 1;
        if let Ok(e) = self
            .index
            .find_entry(token_hash(&ack.token), |&p| p == place)
        {
            e.remove();
        }
    }

    /// Acknowledgements held.
    pub fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key<'a>(token: &'a str, request: &'a str) -> DepositKey<'a> {
        DepositKey {
            device: "d",
            lease_id: "l",
            target: "t",
            token,
            request,
        }
    }

    fn resp(seq: u64) -> DepositResponse {
        DepositResponse {
            seq,
            trust: 0.5,
            settled: false,
        }
    }

    /// An acknowledgement is 64 bytes whatever its strings (the queue
    /// holds up to `ACKS_MAX`).
    #[test]
    fn an_acknowledgement_is_sixty_four_bytes() {
        assert_eq!(std::mem::size_of::<Ack>(), 64);
    }

    #[test]
    fn the_same_deposit_gets_the_same_answer_and_nothing_else_does() {
        let mut a = Acks::default();
        a.remember(key("k1", "r1"), &resp(7), 10.0);
        assert_eq!(a.answer(key("k1", "r1")), Some(&resp(7)));
        assert_eq!(
            a.answer(key("k1", "r2")),
            None,
            "another body under the token"
        );
        assert_eq!(a.answer(key("k2", "r1")), None);
        let mut other = key("k1", "r1");
        other.device = "e";
        assert_eq!(a.answer(other), None, "another device presenting the token");
        let mut other = key("k1", "r1");
        other.lease_id = "m";
        assert_eq!(a.answer(other), None);
        let mut other = key("k1", "r1");
        other.target = "u";
        assert_eq!(a.answer(other), None, "another target under the token");
        // The parts are length-prefixed: moving a byte from one part to
        // the next is another deposit.
        let mut other = key("k1", "r1");
        other.device = "dl";
        other.lease_id = "";
        assert_eq!(a.answer(other), None);
    }

    #[test]
    fn a_token_acknowledged_again_answers_with_the_newer_answer_until_it_lapses() {
        let mut a = Acks::default();
        a.remember(key("k", "r1"), &resp(1), 0.0);
        a.remember(key("other", "r"), &resp(2), 5.0);
        a.remember(key("k", "r2"), &resp(3), 10.0);
        assert_eq!(a.len(), 2);
        assert_eq!(
            a.answer(key("k", "r1")),
            None,
            "the older deposit is replaced"
        );
        assert_eq!(a.answer(key("k", "r2")), Some(&resp(3)));
        // The older entry's lapse leaves the newer one.
        a.forget_before(1.0);
        assert_eq!(a.answer(key("k", "r2")), Some(&resp(3)));
        assert_eq!(a.len(), 2);
        a.forget_before(7.0);
        assert_eq!((a.len(), a.answer(key("other", "r"))), (1, None));
        a.forget_before(11.0);
        assert_eq!((a.len(), a.answer(key("k", "r2"))), (0, None));
    }

    #[test]
    fn every_remembered_answer_is_found_and_every_forgotten_one_is_not() {
        let mut a = Acks::default();
        for i in 0..5_000u64 {
            a.remember(key(&format!("k{i}"), "r"), &resp(i), i as f64);
        }
        a.forget_before(2_500.0);
        assert_eq!(a.len(), 2_500);
        for i in 0..5_000u64 {
            let got = a.answer(key(&format!("k{i}"), "r"));
            assert_eq!(got, (i >= 2_500).then(|| resp(i)).as_ref(), "k{i}");
        }
    }

    #[test]
    fn answers_are_forgotten_after_the_memory_and_beyond_the_bound() {
        let mut a = Acks::default();
        a.remember(key("old", "r"), &resp(1), 0.0);
        a.remember(key("new", "r"), &resp(2), ACK_MEMORY_S - 1.0);
        a.remember(key("newer", "r"), &resp(3), ACK_MEMORY_S + 0.5);
        assert_eq!(a.answer(key("old", "r")), None);
        assert_eq!(a.answer(key("new", "r")), Some(&resp(2)));
        assert_eq!(a.len(), 2);
        let mut a = Acks::default();
        for i in 0..ACKS_MAX + 3 {
            a.remember(key(&format!("k{i}"), "r"), &resp(i as u64), 1.0);
        }
        assert_eq!(a.len(), ACKS_MAX);
        assert_eq!(a.answer(key("k0", "r")), None, "the oldest went first");
        assert!(a.answer(key(&format!("k{}", ACKS_MAX + 2), "r")).is_some());
    }
}
