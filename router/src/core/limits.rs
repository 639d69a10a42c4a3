//! Request budgets no device can reset or dodge (docs/router.md "Threat
//! model"): a token bucket per device for its requests, one per
//! registration credential and one per source address for registrations.
//!
//! The buckets live here, apart from the device's live entry, so that
//! registering again (which renews the live entry) leaves a spent budget
//! spent. A bucket that has refilled to its capacity behaves exactly as a
//! new one, so the maps drop such buckets when they grow past
//! [`TRACKED_MAX`]: the bound on memory costs no budget anything.
//! Time is an argument (`now_s`, the router's clock), as everywhere in the
//! core. Source: `ROUTING.md` §4 (every device is untrusted).

use std::collections::HashMap;

use routing::politeness::{Bucket, Level};

use crate::api::ApiError;

/// Most buckets a map keeps before it drops the full ones.
pub const TRACKED_MAX: usize = 65_536;

/// What a registration was refused for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The registration credential's budget.
    Credential,
    /// The source address's budget.
    Address,
}

impl Scope {
    /// The name used in refusals and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Credential => "registration credential",
            Scope::Address => "source address",
        }
    }
}

/// One map of buckets, all of one capacity and rate: each key holds its
/// bucket's level only (about 40 bytes an entry with its key, where a
/// whole bucket under a `String` took 96: a router holds one per live
/// device; docs/router.md, "The small box"). These buckets are never
/// paused or spaced, so the level is all they hold ([`Level`]).
#[derive(Debug, Clone)]
struct Buckets {
    /// A new, full bucket: what every key starts with, and the capacity
    /// and rate every level is read with.
    template: Bucket,
    map: HashMap<Box<str>, Level>,
}

impl Buckets {
    fn new(field: &str, (capacity, rate): (f64, f64)) -> Result<Self, String> {
        let template = Bucket::new(capacity, rate).map_err(|e| format!("{field}: {e}"))?;
        Ok(Buckets {
            template,
            map: HashMap::new(),
        })
    }

    /// Takes one token of `key`'s bucket at `now_s`; `Err(wait_s)` (the
    /// seconds until one is back) when it is empty.
    fn charge(&mut self, key: &str, now_s: f64) -> Result<(), f64> {
        let Buckets { template, map } = self;
        // A known key: one lookup, its level spent in place.
        if let Some(level) = map.get_mut(key) {
            return spend(template, level, now_s);
        }
        if map.len() >= TRACKED_MAX {
            map.retain(|_, l| !template.at_level(*l).is_full_at(now_s));
        }
        let mut level = template.level();
        let spent = spend(template, &mut level, now_s);
        map.insert(key.into(), level);
        spent
    }

    /// Seconds until `key` could spend a token (0 for a key never seen).
    fn wait_s(&self, key: &str, now_s: f64) -> f64 {
        self.map
            .get(key)
            .map_or(0.0, |l| self.template.at_level(*l).next_admit_s(now_s))
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// Takes one token from the bucket `template` reads at `level` at
/// `now_s`, and keeps the level it leaves; `Err(wait_s)` (the seconds
/// until one is back) when it is empty.
fn spend(template: &Bucket, level: &mut Level, now_s: f64) -> Result<(), f64> {
    let mut b = template.at_level(*level);
    let admitted = b.admit(now_s);
    *level = b.level();
    match admitted {
        Ok(true) => Ok(()),
        Ok(false) => Err(b.next_admit_s(now_s)),
        // A non-finite clock admits nothing.
        Err(_) => Err(f64::INFINITY),
    }
}

/// The request budgets of one router.
#[derive(Debug, Clone)]
pub struct Limits {
    devices: Buckets,
    credentials: Buckets,
    addresses: Buckets,
}

impl Limits {
    /// Limits with `device_rate` per device, `registration_rate` per
    /// registration credential and `address_rate` per source address, each
    /// (capacity in requests ≥ 1, refill per second > 0). Errors: the
    /// first rate out of range, named.
    pub fn new(
        device_rate: (f64, f64),
        registration_rate: (f64, f64),
        address_rate: (f64, f64),
    ) -> Result<Limits, String> {
        Ok(Limits {
            devices: Buckets::new("device_rate", device_rate)?,
            credentials: Buckets::new("registration_rate", registration_rate)?,
            addresses: Buckets::new("registration_address_rate", address_rate)?,
        })
    }

    /// Charges one request of `device` at `now_s`. Errors: `RateLimited`
    /// with the seconds until a token is back.
    pub fn charge_device(&mut self, device: &str, now_s: f64) -> Result<(), ApiError> {
        self.devices
            .charge(device, now_s)
            .map_err(ApiError::RateLimited)
    }

    /// Seconds until `device` may make its next request (0: now).
    pub fn device_wait_s(&self, device: &str, now_s: f64) -> f64 {
        self.devices.wait_s(device, now_s)
    }

    /// Charges one registration attempt: the source address's budget first
    /// (every attempt, a wrong credential's too, so guessing is paced),
    /// then, for a valid credential, the credential's (`credential` is its
    /// digest, never the secret itself). Errors: the scope whose budget is
    /// spent and the seconds until it refills.
    pub fn charge_registration(
        &mut self,
        credential: Option<&str>,
        address: Option<&str>,
        now_s: f64,
    ) -> Result<(), (Scope, f64)> {
        if let Some(a) = address {
            self.addresses
                .charge(a, now_s)
                .map_err(|w| (Scope::Address, w))?;
        }
        if let Some(c) = credential {
            self.credentials
                .charge(c, now_s)
                .map_err(|w| (Scope::Credential, w))?;
        }
        Ok(())
    }

    /// Buckets held: (devices, credentials, addresses).
    pub fn tracked(&self) -> (usize, usize, usize) {
        (
            self.devices.len(),
            self.credentials.len(),
            self.addresses.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::new((2.0, 1.0), (3.0, 0.5), (2.0, 0.25)).unwrap()
    }

    #[test]
    fn a_device_budget_is_spent_until_it_refills() {
        let mut l = limits();
        assert!(l.charge_device("d", 0.0).is_ok());
        assert!(l.charge_device("d", 0.0).is_ok());
        match l.charge_device("d", 0.0) {
            Err(ApiError::RateLimited(w)) => assert!((w - 1.0).abs() < 1e-9, "{w}"),
            other => panic!("{other:?}"),
        }
        assert!((l.device_wait_s("d", 0.5) - 0.5).abs() < 1e-9);
        assert!(
            l.charge_device("other", 0.0).is_ok(),
            "budgets are per device"
        );
        assert!(l.charge_device("d", 1.0).is_ok());
    }

    #[test]
    fn registrations_are_paced_per_address_then_per_credential() {
        let mut l = limits();
        // The address's two tokens go first, whatever the credential.
        assert!(l.charge_registration(None, Some("10.0.0.1"), 0.0).is_ok());
        assert!(l
            .charge_registration(Some("c"), Some("10.0.0.1"), 0.0)
            .is_ok());
        let (scope, wait) = l
            .charge_registration(Some("c"), Some("10.0.0.1"), 0.0)
            .unwrap_err();
        assert_eq!(scope, Scope::Address);
        assert!((wait - 4.0).abs() < 1e-9, "{wait}");
        // Another address: the credential has two of its three tokens left.
        assert!(l
            .charge_registration(Some("c"), Some("10.0.0.2"), 0.0)
            .is_ok());
        assert!(l
            .charge_registration(Some("c"), Some("10.0.0.3"), 0.0)
            .is_ok());
        let (scope, wait) = l
            .charge_registration(Some("c"), Some("10.0.0.4"), 0.0)
            .unwrap_err();
        assert_eq!(scope, Scope::Credential);
        assert!((wait - 2.0).abs() < 1e-9, "{wait}");
        // In process (no address) only the credential is charged.
        assert!(l.charge_registration(Some("c"), None, 2.0).is_ok());
        assert!(l.charge_registration(None, None, 2.0).is_ok());
    }

    #[test]
    fn the_maps_stay_bounded_by_dropping_only_full_buckets() {
        let mut l = Limits::new((1.0, 1.0), (1.0, 1.0), (1.0, 1.0)).unwrap();
        for i in 0..TRACKED_MAX {
            l.charge_device(&format!("d{i}"), 0.0).unwrap();
        }
        assert_eq!(l.tracked().0, TRACKED_MAX);
        // Nothing has refilled at t = 0.5: nothing may be dropped.
        l.charge_device("new", 0.5).unwrap();
        assert_eq!(l.tracked().0, TRACKED_MAX + 1);
        assert!(
            l.charge_device("d0", 0.5).is_err(),
            "a spent budget is kept"
        );
        // At t = 2 every bucket is full again: all are dropped, and a
        // dropped device starts as a full (new) bucket would.
        l.charge_device("newer", 2.0).unwrap();
        assert_eq!(l.tracked().0, 1);
        assert!(l.charge_device("d0", 2.0).is_ok());
    }

    #[test]
    fn rates_out_of_range_are_refused_by_name() {
        let e = Limits::new((0.5, 1.0), (1.0, 1.0), (1.0, 1.0)).unwrap_err();
        assert!(e.starts_with("device_rate"), "{e}");
        let e = Limits::new((1.0, 1.0), (1.0, 0.0), (1.0, 1.0)).unwrap_err();
        assert!(e.starts_with("registration_rate"), "{e}");
        let e = Limits::new((1.0, 1.0), (1.0, 1.0), (f64::NAN, 1.0)).unwrap_err();
        assert!(e.starts_with("registration_address_rate"), "{e}");
    }
}
