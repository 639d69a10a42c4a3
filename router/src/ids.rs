//! Unguessable ids (lease ids, deposit tokens, device secrets) and their hashes.

use sha2::{Digest, Sha256};

/// 128 random bits from the operating system, as 32 hex characters.
/// Falls back to hashing the time and a counter if the OS source fails
/// (never panics; the fallback is logged by the caller's absence of entropy).
pub fn token() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let h = Sha256::digest(format!("{t}:{n}:{:p}", &b).as_bytes());
        b.copy_from_slice(&h[..16]);
    }
    hex::encode(b)
}

/// SHA-256 of a secret, hex: what the router keeps instead of the secret.
pub fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Constant-time equality of two strings of equal length (false otherwise).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}
