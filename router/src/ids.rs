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

/// SHA-256 of a device's secret, as the router keeps it: 32 bytes in
/// place instead of 64 hex characters on the heap (a router holds one per
/// device: docs/router.md, "The small box"). Written and read as the same
/// 64 lowercase hex characters [`digest`] gives, so stored rows are
/// unchanged; anything else is a typed error naming what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretDigest([u8; 32]);

impl SecretDigest {
    /// The digest of `secret`.
    pub fn of(secret: &str) -> SecretDigest {
        SecretDigest(Sha256::digest(secret.as_bytes()).into())
    }

    /// Whether `presented` is the secret, compared in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        let d = SecretDigest::of(presented);
        d.0.iter()
            .zip(&self.0)
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
    }
}

impl std::fmt::Display for SecretDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl serde::Serialize for SecretDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 64];
        // Cannot fail: the buffer is exactly twice the bytes.
        let _ = hex::encode_to_slice(self.0, &mut buf);
        s.serialize_str(std::str::from_utf8(&buf).unwrap_or_default())
    }
}

impl<'de> serde::Deserialize<'de> for SecretDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        let mut b = [0u8; 32];
        hex::decode_to_slice(text.as_bytes(), &mut b).map_err(|_| {
            serde::de::Error::custom("secret digest: expected 64 hex characters (SHA-256)")
        })?;
        Ok(SecretDigest(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_digest_is_written_as_the_hex_digest_and_read_back() {
        let d = SecretDigest::of("s3cret");
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, format!("\"{}\"", digest("s3cret")));
        assert_eq!(d.to_string(), digest("s3cret"));
        assert_eq!(serde_json::from_str::<SecretDigest>(&json).unwrap(), d);
        assert!(d.matches("s3cret"));
        assert!(!d.matches("s3cre") && !d.matches("") && !d.matches("s3cret "));
        for bad in ["\"\"", "\"zz\"", "12", &format!("\"{}0\"", digest("x"))] {
            let e = serde_json::from_str::<SecretDigest>(bad).unwrap_err();
            assert!(
                e.to_string().contains("secret digest") || bad == "12",
                "{bad}: {e}"
            );
        }
    }
}
