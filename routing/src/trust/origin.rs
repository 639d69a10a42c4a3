//! Where an identity came from, and which identities count as one.
//!
//! A registration credential can mint identities; a device that holds one
//! can make many. Two identities are *related* when both registered over
//! the network with the same credential and either from the same network
//! (an IPv4 /24, an IPv6 /48), for good, or in one burst (less than the
//! burst window apart), until the later of them is past the burst hold.
//! Agreement between related identities moves no trust, their reports do
//! not corroborate each other, and a quorum counts related voters once.
//! An identity the host registered in process (no network) is related to
//! no other. Source: `ROUTING.md` §3 Trust;
//! `docs/decisions/0014-identities-cost-something.md`.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// Default burst window, seconds: identities of one credential registered
/// this close together count as one (see [`Origin::related`]).
pub const BURST_S: f64 = 60.0;

/// Default burst hold, seconds: how long after the later registration a
/// burst's identities keep counting as one.
pub const BURST_HOLD_S: f64 = 3600.0;

/// The relation's parameters (`VerifyConfig`'s, decision 0014).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    /// Burst window, seconds (≥ 0; 0 turns the burst rule off).
    pub burst_s: f64,
    /// Burst hold, seconds (≥ 0).
    pub burst_hold_s: f64,
}

impl Default for Relation {
    fn default() -> Self {
        Relation {
            burst_s: BURST_S,
            burst_hold_s: BURST_HOLD_S,
        }
    }
}

impl Relation {
    /// Both finite and ≥ 0.
    pub fn is_valid(&self) -> bool {
        [self.burst_s, self.burst_hold_s]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
    }
}

/// Where one identity came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// The registration credential's name (never its secret); shared
    /// with the identity's record and every vote it casts.
    pub credential: std::sync::Arc<str>,
    /// The network it first registered from ([`network_of`]); `None`:
    /// registered in process by the host, vouched for by the host's code.
    /// Shared as the credential is.
    pub network: Option<std::sync::Arc<str>>,
    /// When it first registered, seconds on the router's clock.
    pub registered_at_s: f64,
}

impl Origin {
    /// Whether `self` and `other` (two distinct identities) count as one
    /// at `now_s`: both registered over the network with the same
    /// credential, and from the same network, or less than
    /// `rule.burst_s` apart with the later registration less than
    /// `rule.burst_hold_s` before `now_s`. A non-finite time reads as
    /// related: the safe side.
    pub fn related(&self, other: &Origin, rule: &Relation, now_s: f64) -> bool {
        let (Some(a), Some(b)) = (&self.network, &other.network) else {
            return false;
        };
        if self.credential != other.credential {
            return false;
        }
        if a == b {
            return true;
        }
        let (x, y) = (self.registered_at_s, other.registered_at_s);
        if !(x.is_finite() && y.is_finite() && now_s.is_finite()) {
            return true;
        }
        (x - y).abs() < rule.burst_s && now_s - x.max(y) < rule.burst_hold_s
    }
}

/// The network an address belongs to, as a prefix string: an IPv4 /24
/// (`"v4:10.1.2.0/24"`), an IPv6 /48 (`"v6:2001:db8:1::/48"`), an
/// IPv4-mapped IPv6 address as its IPv4 network. One subscriber is given
/// a /48 or more of IPv6, so a single host cannot span two networks.
pub fn network_of(address: IpAddr) -> String {
    let v6 = match address {
        IpAddr::V4(a) => return v4_network(a),
        IpAddr::V6(a) => a,
    };
    if let Some(a) = v6.to_ipv4_mapped() {
        return v4_network(a);
    }
    let s = v6.segments();
    format!("v6:{:x}:{:x}:{:x}::/48", s[0], s[1], s[2])
}

fn v4_network(a: std::net::Ipv4Addr) -> String {
    let [x, y, z, _] = a.octets();
    format!("v4:{x}.{y}.{z}.0/24")
}

/// How many of `origins` count as independent: a greedy pass in order
/// that keeps an origin only when it is related to none kept before
/// (a lower bound on the largest unrelated subset, so a quorum it
/// allows is never easier than the rule). `None` (an unknown origin)
/// is related to nothing. Also returns the distinct credentials among
/// the kept ones. Relatedness as of `now_s` under `rule`.
pub fn independent(origins: &[Option<&Origin>], rule: &Relation, now_s: f64) -> (usize, usize) {
    let mut kept: Vec<Option<&Origin>> = Vec::new();
    for o in origins {
        let clash = match o {
            None => false,
            Some(o) => kept.iter().flatten().any(|k| k.related(o, rule, now_s)),
        };
        if !clash {
            kept.push(*o);
        }
    }
    let mut credentials: Vec<&str> = kept
        .iter()
        .map(|o| o.map_or("", |o| &*o.credential))
        .collect();
    credentials.sort_unstable();
    credentials.dedup();
    (kept.len(), credentials.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(credential: &str, network: Option<&str>, at: f64) -> Origin {
        Origin {
            credential: credential.into(),
            network: network.map(Into::into),
            registered_at_s: at,
        }
    }

    /// The relation's table: every combination of credential, network,
    /// time apart and time since (in process on either side is never
    /// related). Columns: the two origins, now, related.
    #[test]
    fn relatedness_table() {
        let rule = Relation::default();
        let rows: [(Origin, Origin, f64, bool); 12] = [
            (o("a", Some("n1"), 0.0), o("a", Some("n1"), 1e6), 1e9, true),
            (
                o("a", Some("n1"), 0.0),
                o("a", Some("n2"), 59.0),
                60.0,
                true,
            ),
            (
                o("a", Some("n1"), 0.0),
                o("a", Some("n2"), 59.0),
                3658.9,
                true,
            ),
            (
                o("a", Some("n1"), 0.0),
                o("a", Some("n2"), 59.0),
                3659.0,
                false,
            ),
            (
                o("a", Some("n1"), 0.0),
                o("a", Some("n2"), 60.0),
                61.0,
                false,
            ),
            (o("a", Some("n1"), 0.0), o("b", Some("n1"), 0.0), 1.0, false),
            (o("a", Some("n1"), 0.0), o("b", Some("n2"), 1.0), 2.0, false),
            (o("a", None, 0.0), o("a", Some("n1"), 0.0), 1.0, false),
            (o("a", None, 0.0), o("a", None, 0.0), 1.0, false),
            (
                o("a", Some("n1"), f64::NAN),
                o("a", Some("n2"), 0.0),
                1.0,
                true,
            ),
            (
                o("a", Some("n1"), 0.0),
                o("a", Some("n2"), 0.0),
                f64::NAN,
                true,
            ),
            (
                o("a", Some("n1"), 0.0),
                o("a", Some("n2"), 0.0),
                f64::INFINITY,
                true,
            ),
        ];
        for (i, (x, y, now, want)) in rows.iter().enumerate() {
            assert_eq!(x.related(y, &rule, *now), *want, "row {i}");
            assert_eq!(y.related(x, &rule, *now), *want, "row {i}, swapped");
        }
        let off = Relation {
            burst_s: 0.0,
            ..rule
        };
        assert!(!o("a", Some("n1"), 0.0).related(&o("a", Some("n2"), 0.0), &off, 1.0));
        assert!(o("a", Some("n1"), 0.0).related(&o("a", Some("n1"), 0.0), &off, 1.0));
    }

    #[test]
    fn networks_are_v4_slash_24_and_v6_slash_48() {
        let n = |s: &str| network_of(s.parse().unwrap());
        assert_eq!(n("10.1.2.3"), "v4:10.1.2.0/24");
        assert_eq!(n("10.1.2.3"), n("10.1.2.250"));
        assert_ne!(n("10.1.2.3"), n("10.1.3.3"));
        assert_eq!(n("::ffff:10.1.2.3"), "v4:10.1.2.0/24");
        assert_eq!(n("2001:db8:1:2::5"), "v6:2001:db8:1::/48");
        assert_eq!(n("2001:db8:1:ffff::9"), n("2001:db8:1::1"));
        assert_ne!(n("2001:db8:1::1"), n("2001:db8:2::1"));
    }

    #[test]
    fn independent_counts_related_voters_once() {
        let a1 = o("a", Some("n1"), 0.0);
        let a1b = o("a", Some("n1"), 5000.0);
        let a2 = o("a", Some("n2"), 10.0);
        let a3 = o("a", Some("n3"), 500.0);
        let b1 = o("b", Some("n1"), 0.0);
        let host = o("a", None, 0.0);
        let (r, now) = (Relation::default(), 600.0);
        assert_eq!(
            independent(&[Some(&a1), Some(&a1b), Some(&a2)], &r, now),
            (1, 1)
        );
        assert_eq!(independent(&[Some(&a1), Some(&a3)], &r, now), (2, 1));
        assert_eq!(independent(&[Some(&a1), Some(&b1)], &r, now), (2, 2));
        assert_eq!(
            independent(&[Some(&host), Some(&host.clone()), None], &r, now),
            (3, 2),
            "in process and unknown origins are each their own"
        );
        // Past the burst hold a burst's networks count apart.
        assert_eq!(independent(&[Some(&a1), Some(&a2)], &r, 1e4), (2, 1));
    }
}
